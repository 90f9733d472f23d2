"""`dv plan` without a cluster: manifests as helm and kustomize print them, the command's exit
codes and warnings over a fake cluster, and the Markdown and JSON it prints."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from derived_views.adapters.kube.views import ViewsError
from derived_views.cli import app as dv
from derived_views.cli.manifests import ManifestError, Manifests, parse_stream, read_manifests
from derived_views.core.judges.tenancy import SECRET_LABEL
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.preview.reads import SourceReads
from support.world.hand_observed import CONTENT_V1, I1, R1, R2, record
from support.world.samples import NAMESPACE, SECRET_LABELS, SQL_V2, VIEW, spec_body

POLICY = json.dumps({"kafka": {"clusters": [{"namespaces": ["*"],
                                             "bootstrapServers": ["kafka:9092"]}]}})
ENV = {"DV_TENANCY_POLICY": POLICY, "DV_CHECKPOINT_BASE": "s3a://checkpoints/dv"}
LABELLED = {SECRET_LABEL: "true"}


def view(spec: dict[str, Any], name: str = VIEW) -> dict[str, Any]:
    return {"apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


LIVE = {**view(spec_body()), "status": {
    "revision": R1, "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z",
                               "lag": {"messages": 0, "endOffsets": {"orders/0": 120}}},
    "revisions": [record(R1, "Active", content=CONTENT_V1, historyStart={"orders/0": 20},
                         buildRate={"firstRecords": 20, "firstSeconds": 12, "records": 80,
                                    "seconds": 27, "recordsPerSecond": 4},
                         startedAt="2026-03-01T11:00:00Z", hydratedAt="2026-03-01T11:00:27Z")]}}
LIVE["metadata"] = {**LIVE["metadata"], "resourceVersion": "7"}


class FakeViews:
    """The cluster: the views it holds; what the API server refuses on a dry run, by name."""

    live: ClassVar[dict[str, dict[str, Any]]] = {}
    refuse: ClassVar[dict[str, tuple[str, str]]] = {}
    dry_runs: ClassVar[list[tuple[str, str | None]]] = []
    secrets: ClassVar[dict[str, tuple[dict[str, str], dict[str, str]] | ViewsError]] = {}
    """Secrets by name: (data, labels), or the error reading it raises; absent: none."""

    def __init__(self, api_client: Any) -> None:
        pass

    def find(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.live.get(name)
        return copy.deepcopy(found) if found is not None else None

    def dry_run(self, namespace: str, body: dict[str, Any], resource_version: str | None
                ) -> tuple[str, str] | None:
        self.dry_runs.append((body["metadata"]["name"], resource_version))
        return self.refuse.get(body["metadata"]["name"])

    def labelled_secret(self, namespace: str, name: str
                        ) -> tuple[dict[str, str], dict[str, str]] | None:
        found = self.secrets.get(name)
        if isinstance(found, ViewsError):
            raise found
        return found


class FakeSources:
    """What the views' sources answer, by view name (default: every Secret present and
    labelled, nothing else read); and what was asked."""

    reads: ClassVar[dict[str, SourceReads]] = {}
    asked: ClassVar[list[tuple[str, bool]]] = []

    def __init__(self, api_client: Any, policy: Any) -> None:
        pass

    def read(self, spec: Any, namespace: str, name: str, status: Any, *, replays: bool
             ) -> SourceReads:
        self.asked.append((name, replays))
        return self.reads.get(name, SourceReads(dict.fromkeys(("views-db", "kafka-creds"),
                                                              LABELLED)))


@pytest.fixture()
def cluster(monkeypatch: pytest.MonkeyPatch) -> type[FakeViews]:
    FakeViews.live, FakeViews.refuse, FakeViews.dry_runs = {VIEW: LIVE}, {}, []
    FakeSources.reads, FakeSources.asked = {}, []
    monkeypatch.setattr(dv, "SourceReader", FakeSources)
    FakeViews.secrets = {}
    monkeypatch.setattr(dv, "Views", FakeViews)
    monkeypatch.setattr(dv.ClusterTarget, "api_client", lambda self: object())
    monkeypatch.setattr(dv, "operator_env", lambda api, namespace, name: dict(ENV))
    return FakeViews


def plan(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(dv.app, ["plan", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def stream(*documents: dict[str, Any]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False)


# --- manifests ----------------------------------------------------------------------------

def test_a_rendered_stream_keeps_its_views_and_counts_the_rest() -> None:
    text = ("# Source: chart/templates/cm.yaml\n---\napiVersion: v1\nkind: ConfigMap\n"
            "metadata: {name: x}\n---\n---\n" + stream(view(spec_body(), "a"))
            + "---\n" + stream({"apiVersion": "v1", "kind": "List", "items": [
                view(spec_body(), "b"), {"apiVersion": "v1", "kind": "Secret"}]}))
    found = Manifests()
    parse_stream(text, "rendered.yaml", found)
    assert [v["metadata"]["name"] for v in found.views] == ["a", "b"]
    assert found.skipped == 2


def test_a_folder_is_read_in_name_order_and_yaml_errors_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(stream(view(spec_body(), "second")))
    (tmp_path / "a.yml").write_text(stream(view(spec_body(), "first")))
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert [v["metadata"]["name"] for v in read_manifests([str(tmp_path)]).views] == [
        "first", "second"]
    (tmp_path / "c.yaml").write_text("kind: DerivedView\nspec: [unclosed\n")
    with pytest.raises(ManifestError, match=r"c\.yaml:3: not YAML"):
        read_manifests([str(tmp_path)])
    with pytest.raises(ManifestError, match="no such file or folder"):
        read_manifests([str(tmp_path / "absent.yaml")])


# --- the command ----------------------------------------------------------------------------

def test_an_unchanged_view_exits_0(cluster: type[FakeViews]) -> None:
    code, out, _ = plan("-f", "-", stdin=stream(view(spec_body())))
    assert code == 0
    assert f"{NAMESPACE}/{VIEW}: no change" in out
    assert cluster.dry_runs == [(VIEW, "7")]  # a replace of the live one, at its version


def test_a_content_change_exits_2_with_its_revision(cluster: type[FakeViews]) -> None:
    code, out, _ = plan("-f", "-", "-o", "json", stdin=stream(view(spec_body(SQL_V2))))
    assert code == 2
    document = json.loads(out)
    [shown] = document["views"]
    assert (shown["change"]["kind"], shown["change"]["revision"]) == ("replay", R2)
    assert shown["cost"]["records"] == 100
    # R1 built at 4 records/s after 12 - 20/4 = 7 s: 100 records at 6/s 23.7 s, at 2.7/s 44.5 s
    assert shown["cost"]["replaySeconds"] == {"low": 24, "high": 45}
    assert shown["cost"]["rate"] == {"recordsPerSecond": 4.0, "startupSeconds": 7.0,
                                     "fromRevision": R1}
    assert document["schemaVersion"] == 2
    assert (document["exitCode"], document["skipped"], document["warnings"]) == (2, 0, [])


def test_a_refusal_by_the_api_server_exits_1(cluster: type[FakeViews]) -> None:
    cluster.refuse = {"new": ("Invalid", 'DerivedView.derivedviews.io "new" is invalid')}
    code, out, _ = plan("-f", "-", stdin=stream(view(spec_body(), "new")))
    assert code == 1
    assert '- Invalid: DerivedView.derivedviews.io "new" is invalid' in out
    assert cluster.dry_runs == [("new", None)]  # a create: there is no such view


def test_without_the_server_dry_run_it_is_said(cluster: type[FakeViews]) -> None:
    code, out, _ = plan("-f", "-", "--no-server-dry-run", stdin=stream(view(spec_body())))
    assert (code, cluster.dry_runs) == (0, [])
    assert "warning: no server-side dry run (--no-server-dry-run)" in out


def test_an_unread_policy_falls_back_to_the_charts_with_a_warning(
        cluster: type[FakeViews], monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(api: Any, namespace: str, name: str) -> dict[str, str]:
        raise ViewsError("cannot read the operator StatefulSet derived-views/dv-derived-views: "
                         "the API server answered 403 Forbidden")

    monkeypatch.setattr(dv, "operator_env", unreadable)
    code, out, _ = plan("-f", "-", stdin=stream(view(spec_body())))
    assert code == 1  # the chart's default policy lists no Kafka cluster but loopback
    assert ("warning: the installed tenancy policy was not read (cannot read the operator "
            "StatefulSet derived-views/dv-derived-views: the API server answered 403 "
            "Forbidden): views are judged by the chart's default policy") in out
    assert "PolicyViolation: spec.source.kafka.bootstrapServers kafka:9092" in out


def test_a_cluster_that_cannot_be_read_is_one_error_line(
        cluster: type[FakeViews], monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(self: FakeViews, namespace: str, name: str) -> None:
        raise ViewsError("API server unreachable: connection refused")

    monkeypatch.setattr(FakeViews, "find", unreachable)
    code, out, err = plan("-f", "-", stdin=stream(view(spec_body())))
    assert (code, out, err) == (1, "", "error: API server unreachable: connection refused\n")


def test_a_missing_manifest_is_one_error_line(cluster: type[FakeViews], tmp_path: Path) -> None:
    code, _, err = plan("-f", str(tmp_path / "views.yaml"))
    assert (code, err) == (1, f"error: {tmp_path / 'views.yaml'}: no such file or folder\n")


# --- Markdown, for a pull request -------------------------------------------------------------

def test_markdown_for_a_pull_request(cluster: type[FakeViews]) -> None:
    cluster.live = {VIEW: LIVE, "settings": {**LIVE, "metadata": {
        **LIVE["metadata"], "name": "settings"}}}
    manifests = stream(
        view(spec_body(), "created"),
        view(spec_body(cutover={"maxLagMessages": 50}), "settings"),
        view(spec_body(SQL_V2)),
        view(spec_body("SELECT customer_id, colour FROM events"), "refused"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})
    code, out, _ = plan("-f", "-", "-o", "markdown", stdin=manifests)
    assert code == 1
    assert out.startswith("### `dv plan`: 4 DerivedView(s): 1 refused, 2 replay, 1 change "
                          "without a replay; 1 other document(s) skipped (exit 1)\n")
    assert "#### `shop/created`: new view, replays" in out
    assert "#### `shop/settings`: settings only, applied in place, no replay" in out
    assert "Changed in place: `spec.cutover.maxLagMessages`" in out
    assert f"#### `shop/{VIEW}`: new revision, replays" in out
    assert (f"```diff\n- spec.transform.sql: 'SELECT customer_id, count(*) AS orders FROM events "
            f"GROUP BY customer_id'\n+ spec.transform.sql: {SQL_V2!r}\n```") in out
    assert "| orders/0 | 100 | 20 | no: offsets below 20 deleted |" in out
    assert "#### `shop/refused`: refused (new view, replays once fixed)" in out
    assert "- `InvalidTransform`: transform.sql: [UNRESOLVED_COLUMN.WITH_SUGGESTION]" in out


def test_a_new_views_time_is_said_per_million_records_at_the_installed_default(
        cluster: type[FakeViews], monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {**ENV, "DV_REPLAY_RECORDS_PER_SECOND": "20000",
                 "DV_REPLAY_STARTUP_SECONDS": "25.2"}
    monkeypatch.setattr(dv, "operator_env", lambda api, namespace, name: dict(installed))
    code, out, _ = plan("-f", "-", stdin=stream(view(spec_body(), "created")))
    assert code == 2
    # a million records after 25.2 s: at 60,000/s 41.9 s, at 6,667/s 175.2 s
    assert ("expected replay time: unknown (the records to read are unknown); 42s to 2m56s "
            "per million records (the installation's default: 25 s start-up, then 20,000 "
            "records/s, no build of this view measured; 3x either way)") in out


# --- the sources, as the operator reads them before a job ------------------------------------

def test_the_sources_are_read_for_each_view_and_the_log_only_for_a_replay(
        cluster: type[FakeViews]) -> None:
    code, _, _ = plan("-f", "-", stdin=stream(view(spec_body()), view(spec_body(), "created")))
    assert code == 2
    assert FakeSources.asked == [(VIEW, False), ("created", True)]


def test_without_reading_the_sources_it_is_said(cluster: type[FakeViews]) -> None:
    code, out, _ = plan("-f", "-", "--no-read-sources", stdin=stream(view(spec_body(), "new")))
    assert (code, FakeSources.asked) == (2, [])
    assert ("warning: no sources read (--no-read-sources): Secrets (present and labelled), "
            "schema registries and the logs' offsets were not asked; a new view's records are "
            "unknown") in out


def test_a_missing_secret_refuses_and_forbidden_secrets_are_not_judged(
        cluster: type[FakeViews]) -> None:
    forbidden = ("its Secrets (present and labelled for views) and its log: not read: reading "
                 "secret shop/views-db is forbidden (HTTP 403): grant get on secrets in "
                 "namespace shop")
    FakeSources.reads = {"missing": SourceReads({"views-db": None, "kafka-creds": LABELLED}),
                         "forbidden": SourceReads(None, not_read=(forbidden,))}
    code, out, _ = plan("-f", "-", "-o", "json", stdin=stream(
        view(spec_body(), "missing"), view(spec_body(), "forbidden")))
    assert code == 1
    missing, unread = json.loads(out)["views"]
    assert [r["reason"] for r in missing["refusals"]] == ["SecretMissing"]
    assert (unread["refused"], unread["notJudged"]) == (False, [forbidden])


LOG = SourceOffsets({("orders", 0): 1_500, ("orders", 1): 900},
                    starts={("orders", 0): 0, ("orders", 1): 400})


def test_a_new_views_cost_read_from_the_log_in_text_markdown_and_json(
        cluster: type[FakeViews]) -> None:
    FakeSources.reads = {"created": SourceReads(dict.fromkeys(("views-db", "kafka-creds"),
                                                              LABELLED), log=LOG)}
    manifests = stream(view(spec_body(), "created"))
    code, text, _ = plan("-f", "-", stdin=manifests)
    assert code == 2
    assert "orders/0: 1,500 records from offset 0; log holds its beginning: yes" in text
    assert ("orders/1: 500 records from offset 400; log holds its beginning: no: offsets "
            "below 400 deleted") in text
    assert "records to read: at most 2,000, as the log holds them now" in text
    assert ("the log no longer holds its beginning on orders/1: a replay starts at the log "
            "start") in text
    assert ("held, as the operator would hold it: the log no longer holds offset 0: at least "
            "orders/1 (400 records) were deleted") in text
    _, markdown, _ = plan("-f", "-", "-o", "markdown", stdin=manifests)
    assert "| orders/0 | 1,500 | 0 | yes |" in markdown
    assert "| orders/1 | 500 | 400 | no: offsets below 400 deleted |" in markdown
    _, answer, _ = plan("-f", "-", "-o", "json", stdin=manifests)
    cost = json.loads(answer)["views"][0]["cost"]
    assert cost["partitions"] == [
        {"partition": "orders/0", "firstOffset": 0, "endOffset": 1500, "records": 1500,
         "holdsBeginning": True},
        {"partition": "orders/1", "firstOffset": 400, "endOffset": 900, "records": 500,
         "holdsBeginning": False}]
    assert (cost["records"], cost["fromLog"]) == (2000, True)
    assert cost["held"].startswith("the log no longer holds offset 0")
# --- what a replay holds: the jobs, two side by side, the sink space ---------------------------

SINK_DATA = {"host": "db.example", "port": "5432", "database": "views", "user": "dv",
             "password": "pw"}


@pytest.fixture()
def sizes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """The sink reads `dv plan` makes (kind, schema, index): each answers 5 MiB."""
    asked: list[tuple[str, str, str]] = []

    def five_mib(kind: str, data: dict[str, str], schema: str, index: str,
                 timeout_seconds: int) -> int:
        assert data == SINK_DATA and timeout_seconds <= 10
        asked.append((kind, schema, index))
        return 5 * 1024 * 1024

    monkeypatch.setattr(dv, "index_bytes", five_mib)
    return asked


def test_a_replays_footprint_in_text_markdown_and_json(
        cluster: type[FakeViews], sizes: list[tuple[str, str, str]]) -> None:
    cluster.secrets = {"views-db": (SINK_DATA, SECRET_LABELS["views-db"])}
    manifests = stream(view(spec_body(SQL_V2)))
    code, text, _ = plan("-f", "-", stdin=manifests)
    assert code == 2
    assert sizes == [("postgres", "public", I1)]
    assert ("    Spark resources of a job (as the operator renders its SparkApplication, from "
            "the template dv ships): driver 1 core, 1.4 GiB (1.0 GiB + 409 MiB overhead); "
            "no executors (its tasks run in the driver); in all 1 core, 1.4 GiB\n") in text
    assert ("    while both jobs run (the active's is steady and renders from the same "
            "spec.spark, restarted if it changed): 2 cores, 2.8 GiB\n") in text
    # the replay 24s..45s, then stableFor 10 s and the old job following 60 s (keep 300 s
    # capped by retain 60 s); the slow end 3 passes of 5 s more
    assert "    two jobs side by side: 1m34s to 2m10s (the replay, then stableForSeconds 10 s" \
        in text
    assert (f"    sink space: active index {I1} 5.0 MiB; peak about 10.0 MiB with "
            f"orders_by_customer__{R2} (estimated at the active's size; both exist from the "
            "new job's start until retainPreviousSeconds (1m00s) after the cutover)\n") in text
    _, markdown, _ = plan("-f", "-", "-o", "markdown", stdin=manifests)
    assert "\n- two jobs side by side: 1m34s to 2m10s (" in markdown
    assert f"\n- sink space: active index {I1} 5.0 MiB; peak about 10.0 MiB" in markdown
    _, out, _ = plan("-f", "-", "-o", "json", stdin=manifests)
    cost = json.loads(out)["views"][0]["cost"]
    assert cost["spark"]["job"]["driver"] == {"instances": 1, "cores": 1, "memoryMiB": 1024,
                                              "overheadMiB": 409, "podMemoryMiB": 1433}
    assert cost["spark"]["bothJobs"] == {"cores": 2, "memoryMiB": 2866}
    assert cost["sideBySide"]["seconds"] == {"low": 94, "high": 130}
    assert cost["sideBySide"]["afterReplaySeconds"] == {"low": 70, "high": 85}
    assert (cost["sink"]["activeBytes"], cost["sink"]["peakBytes"], cost["sink"]["notRead"]) \
        == (5_242_880, 10_485_760, None)


def test_a_sink_secret_that_cannot_be_read_leaves_the_size_unread(
        cluster: type[FakeViews], sizes: list[tuple[str, str, str]]) -> None:
    cluster.secrets = {"views-db": ViewsError(
        "reading the Secret shop/views-db is forbidden (it needs get on Secrets)")}
    code, out, _ = plan("-f", "-", "-o", "json", stdin=stream(view(spec_body(SQL_V2))))
    sink = json.loads(out)["views"][0]["cost"]["sink"]
    assert code == 2 and sizes == []
    assert (sink["activeBytes"], sink["peakBytes"]) == (None, None)
    assert sink["notRead"] == ("reading the Secret shop/views-db is forbidden (it needs get on "
                               "Secrets)")


def test_an_unlabelled_sink_secret_is_not_connected_with(
        cluster: type[FakeViews], sizes: list[tuple[str, str, str]]) -> None:
    cluster.secrets = {"views-db": (SINK_DATA, {})}
    _, out, _ = plan("-f", "-", stdin=stream(view(spec_body(SQL_V2))))
    assert sizes == []
    assert f"sink space: active index {I1}: not read (secret shop/views-db is not labelled" in out


def test_a_refused_views_sink_is_not_read(
        cluster: type[FakeViews], sizes: list[tuple[str, str, str]]) -> None:
    cluster.secrets = {"views-db": (SINK_DATA, SECRET_LABELS["views-db"])}
    cluster.refuse = {VIEW: ("Invalid", "no")}
    code, out, _ = plan("-f", "-", stdin=stream(view(spec_body(SQL_V2))))
    assert (code, sizes) == (1, [])
    assert "not read (the view is refused: dv plan does not connect to its sink)" in out
