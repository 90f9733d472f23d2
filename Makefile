# Entry points other tooling relies on: demo, test, stack-up, stack-down, lint.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

PHONY_EXTRA := commit-hook architecture
.PHONY: $(PHONY_EXTRA) setup demo demo-cdc test test-fast faults security-doc stack-up stack-down stack-status lint crds rbac-doc admission-doc bench bench-node bench-scale bench-report

$(STAMP): pyproject.toml stack/pyproject.toml
	@bash stack/check-prereqs.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]' -e ./stack
	@touch $(STAMP)

## setup: create the virtualenv with the project and its dev tools; install the commit-msg hook
setup: $(STAMP) commit-hook

# In a git checkout only (an unpacked archive has no hooks to install).
commit-hook:
	@hooks=$$(git rev-parse --git-path hooks 2>/dev/null) && mkdir -p "$$hooks" && \
	  { cmp -s .githooks/commit-msg "$$hooks/commit-msg" || \
	    { install -m 755 .githooks/commit-msg "$$hooks/commit-msg" && \
	      echo "installed the commit-msg hook (CONTRIBUTING.md, Commits)"; }; } || true

## stack-up: start (or reuse) etcd, kube-apiserver, controller-manager, Kafka, Kafka Connect, PostgreSQL, OpenSearch, S3Proxy, the Spark executor
stack-up: setup
	$(PY) -m dvstack up

## stack-down: stop every stack process (state and caches stay)
stack-down:
	@if [ -x $(PY) ]; then $(PY) -m dvstack down; else echo "no virtualenv: nothing to stop"; fi

stack-status: setup
	$(PY) -m dvstack status

## test: unit + integration + e2e on the local stack, with the real node where the machine can run one (PYTEST_ARGS passes through)
test: setup
	DV_NODE=$${DV_NODE:-auto} $(PY) -m dvstack test -- $(PYTEST_ARGS)

## test-fast: unit + integration only (no e2e, no fault suite), for development; CI runs `test`
test-fast: setup
	$(PY) -m dvstack test -- -m "not e2e and not faults" $(PYTEST_ARGS)

## faults: the fault suite alone (kills and restarts under live traffic); writes docs/reliability.md
faults: setup
	$(PY) -m dvstack test -- tests/faults -m faults $(PYTEST_ARGS)

## demo: bring the stack up and replay a topic into PostgreSQL, with progress
demo: setup
	$(PY) -m dvstack.demo

## demo-cdc: a database's changes through Debezium and Kafka into a view, migrated live
demo-cdc: setup
	$(PY) -m dvstack.demo.cdc

## crds: regenerate the DerivedView CRD from the models and copy it into the chart
crds: setup
	$(PY) -m derived_views.api.crd > crds/derivedviews.io_derivedviews.yaml
	bash stack/sync-chart-crds.sh

## rbac-doc: regenerate docs/rbac-can-i.md from a real install on the local stack
rbac-doc: stack-up
	$(PY) stack/can-i-matrix.py

## admission-doc: regenerate docs/admission.md from the local API server's refusals
admission-doc: stack-up
	DV_WRITE_DOCS=1 $(PY) -m dvstack test -- tests/integration/resource/test_admission_catalogue.py -q

## security-doc: docs/security.md's generated part, from the hostile corpora's last results
security-doc:
	$(PY) stack/security-doc.py $${DV_STATE_DIR:-.stack}/results docs/security.md

## bench: replay rates against same-run baselines, linearity, apply to Ready, a serving view's steady cost, VIEWS views on one operator; writes docs/performance.md
VIEWS ?= 1000
IDLE ?= 300
bench: stack-up
	$(PY) benchmarks/replay_rate.py
	$(PY) benchmarks/apply_to_ready.py
	$(PY) benchmarks/apply_to_ready.py --beside-serving 150
	$(PY) benchmarks/apply_to_ready.py --events 2000000 --runs 1 --lag-history-seconds 2 \
		--save-as replay_progress --watch-log .stack/results/replay_progress_watch.txt \
		--plot docs/performance/replay_progress.png
	$(PY) benchmarks/steady_cost.py
	$(PY) benchmarks/steady_cost.py --warmup 600 --save-as steady_cost_long
	$(PY) benchmarks/steady_cost.py --views 10
	$(PY) benchmarks/operator_scale.py $(VIEWS) $(IDLE)
	$(MAKE) --no-print-directory bench-report

## bench-node: on the real node (DV_NODE=1): a view's steady cost; a replay with 1, then 2 executors
bench-node: stack-up
	$(PY) benchmarks/steady_cost.py --node
	$(PY) benchmarks/apply_to_ready.py --node --events 2000000 --runs 1 --replay-executors 1 \
		--save-as replay_executors_1
	$(PY) benchmarks/apply_to_ready.py --node --events 2000000 --runs 1 --replay-executors 2 \
		--save-as replay_executors_2
	$(MAKE) --no-print-directory bench-report

## bench-scale: one operator's idle cost with VIEWS views (job side simulated; see the script)
bench-scale: stack-up
	$(PY) benchmarks/operator_scale.py $(VIEWS) $(IDLE)

## bench-report: docs/performance.md and its plots from the last results in .stack/results
bench-report:
	$(PY) benchmarks/report.py $${DV_STATE_DIR:-.stack}/results docs

## architecture: rewrite docs/architecture.md's folder map from the sources
architecture: setup
	$(PY) tests/support/house.py

## lint: ruff, mypy (strict), import contracts
lint: setup
	$(VENV)/bin/ruff check operator tests spark_templates benchmarks stack
	$(VENV)/bin/mypy
	# The Spark job runs on the Spark image's Python 3.10 (Ubuntu 22.04), not ours.
	$(VENV)/bin/mypy --python-version 3.10 spark_templates/dvjob spark_templates/derived_view_job.py
	PYTHONPATH=spark_templates $(VENV)/bin/lint-imports
	H=$$($(PY) -c 'from dvstack.helm import helm_binary; from dvstack.settings import load; print(helm_binary(load()))') && \
	  $$H lint --strict charts/derived-views && \
	  $$H lint --strict charts/derived-views --set watch.mode=namespaces --set 'watch.namespaces={a,b}'
	bash stack/lint-dockerfiles.sh
