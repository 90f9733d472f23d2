"""`kubectl auth can-i` as the chart's ServiceAccount, on the real API server with RBAC.

The checks live in dvstack.chart.CHECKS; stack/can-i-matrix.py runs the same
ones and writes docs/rbac-can-i.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from dvstack.chart import (
    CHECKS,
    Helm,
    Kubectl,
    Mode,
    can_i,
    matrix_release,
    matrix_table,
    run_matrix,
)
from dvstack.testing.waiting import wait_for


@pytest.mark.parametrize("mode", ["namespaces", "cluster"])
def test_service_account_can_do_exactly_what_the_operator_needs(
        helm_cli: Helm, kubectl: Kubectl, mode: Mode, capsys: Any) -> None:
    # Control: impersonation answers are meaningful only if the admin can do anything.
    assert kubectl.run("auth", "can-i", "*", "*", "--all-namespaces").stdout.strip() == "yes"

    with matrix_release(helm_cli, kubectl, mode) as target:
        results = run_matrix(kubectl, target)
        table = matrix_table(target, results)
        with capsys.disabled():
            print(f"\n{table}\n")
        wrong = [r for r in results if not r.ok]
        assert not wrong, "can-i answers differ from the chart's promise:\n" + "\n".join(
            f"  {r.check.label()} in {r.check.scope}: expected "
            f"{'yes' if r.expected else 'no'}, got {'yes' if r.actual else 'no'}" for r in wrong)

    # The "yes" answers come from this release's bindings: once it is uninstalled,
    # the same ServiceAccount is refused everything it was granted.
    # (The authorizer sees RBAC changes through an informer: wait, with a deadline.)
    granted = [c for c in CHECKS if c.expected(mode)]

    def still_allowed() -> list[str]:
        return [c.label() for c in granted if can_i(kubectl, target, c).actual]

    wait_for(lambda: not still_allowed(), timeout=30,
             what="the uninstalled release's permissions to be withdrawn",
             on_timeout=lambda: f"still allowed: {still_allowed()}")
