"""The CLI's error paths that need no cluster: one `error:` line and exit 1, no traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derived_views.cli.app import app


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture()
def unreachable_kubeconfig(tmp_path: Path) -> str:
    """A kubeconfig naming a port nothing listens on, with namespace `team` in its context."""
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {{server: "https://127.0.0.1:{unused_port()}", insecure-skip-tls-verify: true}}
users:
- name: someone
  user: {{token: not-a-real-token}}
contexts:
- name: work
  context: {{cluster: nowhere, user: someone, namespace: team}}
current-context: work
""")
    return str(path)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", [
    ["status"], ["status", "orders"], ["watch", "orders", "--timeout", "1"],
    ["promote", "orders"], ["pause", "orders"], ["resume", "orders"], ["rollback", "orders"],
    ["plot", "orders", "-o", "lag.png"],
])
def test_unreachable_api_server(unreachable_kubeconfig: str, command: list[str],
                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run("--kubeconfig", unreachable_kubeconfig, *command)
    assert code == 1
    assert err.startswith("error: API server unreachable: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    code, _, err = run("--kubeconfig", str(tmp_path / "absent"), "status")
    assert (code, err.strip()) == (1, f"error: kubeconfig {tmp_path / 'absent'} does not exist")


def test_unknown_context(unreachable_kubeconfig: str) -> None:
    code, _, err = run("--kubeconfig", unreachable_kubeconfig, "--context", "nope", "status")
    assert code == 1
    assert err.startswith("error: cannot load kubeconfig: ")
    assert "nope" in err


def test_plot_refuses_a_file_that_is_not_png(unreachable_kubeconfig: str) -> None:
    code, _, err = run("--kubeconfig", unreachable_kubeconfig, "plot", "orders", "-o", "lag.svg")
    assert (code, err.strip()) == (1, "error: lag.svg must end in .png")


def test_plot_refuses_a_missing_directory(unreachable_kubeconfig: str, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "lag.png"
    code, _, err = run("--kubeconfig", unreachable_kubeconfig, "plot", "orders", "-o",
                       str(target))
    assert (code, err.strip()) == (1, f"error: directory {target.parent} does not exist")


def test_all_namespaces_with_a_view_is_refused(unreachable_kubeconfig: str) -> None:
    code, _, err = run("--kubeconfig", unreachable_kubeconfig, "status", "orders", "-A")
    assert code == 1
    assert err.strip() == "error: -A lists views; name a view with -n NAMESPACE instead"


def test_default_namespace_comes_from_the_context(unreachable_kubeconfig: str) -> None:
    from derived_views.adapters.kube.views import default_namespace

    assert default_namespace(unreachable_kubeconfig, None) == "team"
    assert default_namespace(unreachable_kubeconfig, "other") == "default"
