"""Which namespaces an e2e test's operator watches."""

from __future__ import annotations


def second_namespace(namespace: str) -> str:
    """The one further namespace a test may use (created and deleted by the test)."""
    return f"{namespace}-2"


def watched(namespace: str) -> list[str]:
    """The operator's namespaces: the test's own and its second, by exact name.

    e2e files run side by side (`dvstack test`), each with its own operator, and two
    operators must never both reconcile one view; the cluster-wide mode
    (`--all-namespaces`) is the tutorial's, which runs alone. Not a pattern such as
    `<namespace>*`: Kopf stops serving a namespace matched by a pattern as soon as it
    is terminating with no blocking condition yet, so a view in a namespace being deleted
    would keep its finalizer forever (seen in test_deletion).
    """
    return ["--namespace", namespace, "--namespace", second_namespace(namespace)]
