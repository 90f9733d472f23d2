"""`derived-views-crds`: apply the DerivedView CRD this operator was built with.

The chart runs it as a pre-upgrade hook (Helm never upgrades `crds/`); a platform
that manages CRDs itself can run it by hand or in its pipeline (`--dry-run`
prints the decision only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from derived_views.adapters.kube.client import new_api_client
from derived_views.adapters.kube.crds import Crds
from derived_views.api.crd import crd
from derived_views.core.crd_upgrade import decide, with_version


def operator_version() -> str:
    try:
        return version("derived-views")
    except PackageNotFoundError:  # running from a source tree without installing
        return "0.0.0"


def apply_crds(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="derived-views-crds", description=__doc__)
    parser.add_argument("--dry-run", action="store_true", help="print the decision only")
    args = parser.parse_args(argv)
    crds = Crds(new_api_client())
    mine = operator_version()
    ours = with_version(crd(), mine)
    name = ours["metadata"]["name"]
    decision = decide(crds.get(name), ours, mine)
    print(f"derived-views-crds: {decision.reason}")
    if args.dry_run or decision.action == "skip":
        return 0
    if decision.action == "refuse":
        return 1
    if decision.action == "create":
        crds.create(ours)
    else:
        crds.apply(ours)
    print(f"derived-views-crds: {name} is operator {mine}'s")
    return 0


if __name__ == "__main__":
    sys.exit(apply_crds())
