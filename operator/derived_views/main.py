"""`derived-views-operator`: run the Kopf handlers (arguments are passed to `kopf run`)."""

from __future__ import annotations

import sys

import kopf  # noqa: F401  (the CLI below imports it too; keeps the dependency explicit)
from kopf.cli import main as kopf_main

from derived_views.process.environment import SettingsError, from_env
from derived_views.process.malloc import limit_arenas


def main() -> None:
    try:
        from_env()  # the handlers read it again; a bad setting stops here, in one line
    except SettingsError as exc:
        raise SystemExit(f"derived-views-operator: {exc}") from None
    limit_arenas()  # before Kopf starts its threads
    sys.argv = ["kopf", "run", "--standalone" if "--peering" not in " ".join(sys.argv) else "",
                "-m", "derived_views.handlers", *sys.argv[1:]]
    sys.argv = [a for a in sys.argv if a]
    kopf_main()


if __name__ == "__main__":
    main()
