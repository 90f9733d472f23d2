"""OpenSearch, one node on loopback: the sink views are written to next (docs/sinks.md).

The minimal distribution (Maven Central's integ-test zip: the server and its
netty transport, no plugins, no JDK) is unpacked once into the cache and run
on the machine's Java 17. `java` is started directly, with the JVM options the
distribution's own parser derives from `config/jvm.options` (as `bin/opensearch`
does), because that script changes into the distribution before starting the
JVM, and the options' relative paths (GC log, heap dumps) would then write into
the shared cache; here they land in the node's directory, the working directory.

The node's config (the distribution's, with our `opensearch.yml`), data and
logs live in `.stack/opensearch`. OpenSearch refuses to run as root, so when we
are root it runs as a system user of its own, `dvstack-opensearch`, created on
first use. Like `postgres` for PostgreSQL, that user may not be able to enter
the checkout or the cache (a 0700 home), so its files then live under a
directory it can reach (`/var/tmp/dvstack-opensearch`): a root-owned copy of
the distribution, and the node's directory keyed by the state directory (named
in `.stack/opensearch/node`). Nobody's own directories are loosened.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from dvstack import processes
from dvstack.artefacts import java
from dvstack.settings import OPENSEARCH_VERSION, Settings
from dvstack.testing.waiting import wait_for

OPENSEARCH_NAME = "opensearch"
USER = "dvstack-opensearch"
_HEAP = ("-Xms256m", "-Xmx512m")
CLUSTER = "derived-views"
SHARED_BASE = Path("/var/tmp") / USER
"""Where the node's files go when its user cannot reach the checkout or the cache."""
TMPDIR_PLACEHOLDER = "@OPENSEARCH_TMPDIR@"


def opensearch_url(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.opensearch_port}"


def state_dir(settings: Settings) -> Path:
    """Our side: the node itself, or (as root, out of its user's reach) a note of where it is."""
    return settings.state_dir / OPENSEARCH_NAME


def render_config(settings: Settings, node: Path) -> str:
    """opensearch.yml: one node that elects itself, loopback only, on the stack's ports."""
    config: dict[str, Any] = {
        "cluster.name": CLUSTER,
        "node.name": "dvstack",
        "discovery.type": "single-node",
        "network.host": settings.host,
        "http.port": settings.opensearch_port,
        "transport.port": settings.opensearch_transport_port,
        "path.data": str(node / "data"),
        "path.logs": str(node / "logs"),
        # Development disks are often nearly full: the watermarks would make every index
        # read-only (flood stage) or leave new shards unassigned, so they are off.
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def _run_as() -> str | None:
    """The user the node runs as: ours, or (as root) its own, created on first use."""
    if os.geteuid() != 0:
        return None
    known = subprocess.run(["getent", "passwd", USER], capture_output=True, check=False)
    if known.returncode != 0:
        print(f"creating system user {USER} to run OpenSearch (it refuses root)", flush=True)
        processes.run(["useradd", "--system", "--no-create-home", "--shell",
                       "/usr/sbin/nologin", USER], what=f"useradd {USER}")
    return USER


def _user_can(user: str, test: str, path: Path) -> bool:
    """`test <flag> path` asked as `user`, so parent directories, groups and ACLs count."""
    argv = ["runuser", "-u", user, "--", "test", test, str(path)]
    return subprocess.run(argv, capture_output=True, check=False, cwd="/").returncode == 0


def _shared_base() -> Path:
    """SHARED_BASE, made by root and only writable by root (a world-writable parent)."""
    SHARED_BASE.mkdir(mode=0o755, exist_ok=True)
    st = SHARED_BASE.lstat()
    if SHARED_BASE.is_symlink() or st.st_uid != 0 or st.st_mode & 0o022:
        raise SystemExit(f"{SHARED_BASE} is not a directory owned and only writable by root: "
                         "remove it and run again")
    return SHARED_BASE


def _reachable_home(home: Path, user: str) -> Path:
    """The distribution where `user` can read it: the cache's, else a root-owned copy."""
    probe = home / "lib" / f"opensearch-{OPENSEARCH_VERSION}.jar"
    if _user_can(user, "-r", probe):
        return home
    copy = _shared_base() / home.name
    if not (copy / ".complete").is_file():
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(home, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (copy / ".complete").write_text("ok\n")
    return copy


def node_dir(settings: Settings, user: str | None) -> Path:
    """The node's config, data and logs: `.stack/opensearch` when its user may enter it."""
    ours = state_dir(settings)
    if user is None or _user_can(user, "-x", settings.state_dir):
        return ours
    key = hashlib.sha256(str(settings.state_dir).encode()).hexdigest()[:16]
    return _shared_base() / key


def _prepare(settings: Settings, home: Path, node: Path, user: str | None) -> bool:
    """The node's directories and config; True when opensearch.yml changed."""
    for sub in ("config", "data", "logs", "tmp"):
        (node / sub).mkdir(parents=True, exist_ok=True)
    node.chmod(0o700)
    if node != state_dir(settings):
        state_dir(settings).mkdir(parents=True, exist_ok=True)
        (state_dir(settings) / "node").write_text(f"{node}\n")  # for people looking for it
    # The distribution's jvm.options and log4j2.properties, refreshed each start; the node's
    # keystore, which it creates in the same directory, is kept.
    for item in (home / "config").iterdir():
        if item.name == "opensearch.yml":
            continue
        if item.is_dir():
            shutil.copytree(item, node / "config" / item.name, dirs_exist_ok=True)
        else:
            shutil.copyfile(item, node / "config" / item.name)
    yml = node / "config" / "opensearch.yml"
    text = render_config(settings, node)
    changed = not yml.is_file() or yml.read_text() != text
    if changed:
        yml.write_text(text)
    if user is not None:
        uid = pwd.getpwnam(user).pw_uid
        for path in [node, *node.rglob("*")]:
            os.lchown(path, uid, -1)
    return changed


def _jvm_options(home: Path, node: Path, user: str | None) -> list[str]:
    """The distribution's JVM options for this Java (its own parser, as `bin/opensearch`
    runs it), with our heap. The parser prints them space-separated; the temporary
    directory goes in as a placeholder and is put back per option, so a path with spaces
    survives the split."""
    out = processes.run(
        [java(), "-cp", f"{home}/lib/*", "org.opensearch.tools.launchers.JvmOptionsParser",
         str(node / "config")],
        what="OpenSearch's JVM options parser", user=user, cwd=node,
        env={"OPENSEARCH_TMPDIR": TMPDIR_PLACEHOLDER, "OPENSEARCH_JAVA_OPTS": " ".join(_HEAP)})
    return [o.replace(TMPDIR_PLACEHOLDER, str(node / "tmp")) for o in out.split()]


def _health(settings: Settings) -> dict[str, Any] | None:
    """The cluster's health once it is at least yellow (None before)."""
    if not processes.running(settings, OPENSEARCH_NAME):
        raise SystemExit(f"OpenSearch exited while starting\n"
                         f"{processes.tail(processes.log_file(settings, OPENSEARCH_NAME))}")
    req = urllib.request.Request(f"{opensearch_url(settings)}/_cluster/health?wait_for_status=yellow"
                                 "&timeout=5s", headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        body: dict[str, Any] = json.loads(resp.read())
    return body if body.get("status") in ("yellow", "green") else None


def start_opensearch(settings: Settings, home: Path, *, wait: bool = True) -> None:
    """Start the node (or reuse it; restart it when its opensearch.yml changed). With
    `wait=False` it is only launched, so `up` can start the slower components meanwhile and
    call `wait_opensearch` afterwards."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    user = _run_as()
    node = node_dir(settings, user)
    run_home = home if user is None else _reachable_home(home, user)
    changed = _prepare(settings, run_home, node, user)
    if changed and processes.running(settings, OPENSEARCH_NAME):
        print("OpenSearch's configuration changed: restarting it", flush=True)
        stop_opensearch(settings)
    if not processes.running(settings, OPENSEARCH_NAME):
        options = _jvm_options(run_home, node, user)
        processes.start(settings, OPENSEARCH_NAME, [
            java(), *options,
            f"-Dopensearch.path.home={run_home}",
            f"-Dopensearch.path.conf={node / 'config'}",
            "-Dopensearch.distribution.type=zip",
            "-Dopensearch.bundled_jdk=false",
            "-cp", f"{run_home}/lib/*", "org.opensearch.bootstrap.OpenSearch",
        ], env={"OPENSEARCH_PATH_CONF": str(node / "config")}, cwd=node, user=user)
    if wait:
        wait_opensearch(settings)


def wait_opensearch(settings: Settings) -> None:
    """Until the node serves requests (cluster health at least yellow)."""
    wait_for(lambda: _health(settings), timeout=120, interval=0.5,
             what=f"OpenSearch at {opensearch_url(settings)} to report cluster health yellow or green",
             on_timeout=lambda: processes.tail(processes.log_file(settings, OPENSEARCH_NAME)))


def stop_opensearch(settings: Settings) -> None:
    processes.stop(settings, OPENSEARCH_NAME, timeout=45)
