"""PostgreSQL from Debian's packages, in a cluster of our own.

initdb'd once per state directory and started with pg_ctl (never the system
service).  The server refuses to run as root, so when we are root it runs as
the `postgres` user the Debian package creates.  That user may not be able to
enter the checkout (a 0700 home or `mktemp -d` directory), so its cluster
(data, socket, log) then lives in a directory it owns, keyed by the state
directory: under its home (Debian: /var/lib/postgresql/derived-views/<key>),
and every command it runs starts there.  The user's own directories keep their
permissions; `.stack/logs/postgres.log` links to the server's log.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path

import psycopg

from dvstack import processes
from dvstack.artefacts import postgres_bindir
from dvstack.settings import Settings
from dvstack.testing.waiting import wait_for

SUPERUSER = "postgres"
DATABASE = "derived_views"
WAL_LEVEL = "logical"


def pg_dir(settings: Settings) -> Path:
    """Our side: the password (and, when we run the server ourselves, the cluster)."""
    return settings.state_dir / "postgres"


def cluster_dir(settings: Settings) -> Path:
    """Where the server's own files live: a directory its user can enter."""
    user = _run_as()
    legacy = pg_dir(settings)
    if user is None or (legacy / "data" / "PG_VERSION").is_file():
        return legacy  # we are that user, or a cluster from before this layout keeps working
    import pwd

    home = Path(pwd.getpwnam(user).pw_dir)
    base = home if home.is_dir() else Path("/var/tmp")
    key = hashlib.sha256(str(settings.state_dir).encode()).hexdigest()[:16]
    return base / "derived-views" / key


def data_dir(settings: Settings) -> Path:
    return cluster_dir(settings) / "data"


def server_log(settings: Settings) -> Path:
    """The log pg_ctl writes, as the server's user."""
    if cluster_dir(settings) == pg_dir(settings):
        return processes.log_file(settings, "postgres")
    return cluster_dir(settings) / "postgres.log"


def running_pid(settings: Settings) -> int | None:
    """The postmaster's pid when it runs, from its pid file."""
    pid_path = data_dir(settings) / "postmaster.pid"
    try:
        pid = int(pid_path.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    return pid if processes.alive(pid) else None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        raise SystemExit("running as root, but there is no 'postgres' user to run PostgreSQL "
                         "as: install the Debian package 'postgresql'") from None
    return "postgres"


def password(settings: Settings) -> str:
    f = pg_dir(settings) / "password"
    if not f.is_file():
        pg_dir(settings).mkdir(parents=True, exist_ok=True)
        f.write_text(secrets.token_hex(16))
        f.chmod(0o600)
    return f.read_text().strip()


def conninfo(settings: Settings, database: str = DATABASE) -> str:
    return (f"host={settings.host} port={settings.pg_port} dbname={database} user={SUPERUSER} "
            f"password={password(settings)}")


def listen_addresses(settings: Settings) -> str:
    """Loopback, and the node address when pods must reach the server too."""
    return "127.0.0.1" if settings.host == "127.0.0.1" else f"127.0.0.1,{settings.host}"


def allow_node_pods(data: Path) -> bool:
    """A pg_hba.conf line for the node's pods (password auth, as on loopback); True when
    added."""
    from dvstack.node.config import SUBNET

    hba = data / "pg_hba.conf"
    line = f"host all all {SUBNET} scram-sha-256\n"
    text = hba.read_text()
    if line in text:
        return False
    hba.write_text(text + line)
    return True


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user=user, group=None)
        for p in path.rglob("*"):
            shutil.chown(p, user=user, group=None)


def _link_log(settings: Settings, log: Path) -> None:
    """`.stack/logs/postgres.log` shows the server's log wherever it lives."""
    link = processes.log_file(settings, "postgres")
    if link == log:
        return
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and link.readlink() == log:
        return
    link.unlink(missing_ok=True)
    link.symlink_to(log)


def start_postgres(settings: Settings) -> None:
    bindir = postgres_bindir()
    user = _run_as()
    root = cluster_dir(settings)
    data = root / "data"
    sockets = root / "sockets"
    log = server_log(settings)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    if root != pg_dir(settings) and not (pg_dir(settings) / "password").is_file():
        _discard_orphan(bindir, root, user)
    pw = password(settings)
    if root != pg_dir(settings):
        (pg_dir(settings) / "cluster").write_text(f"{root}\n")  # for people looking for it
    if not (data / "PG_VERSION").is_file():
        root.mkdir(parents=True, exist_ok=True)
        if user is not None and root != pg_dir(settings):
            shutil.chown(root.parent, user=user, group=None)
            root.parent.chmod(0o700)
        root.chmod(0o700)
        pwfile = root / "pwfile"
        pwfile.write_text(pw + "\n")
        sockets.mkdir(exist_ok=True)
        _chown(root, user)
        # Parents must be traversable by the server's user.
        for parent in root.parents:
            if parent == Path("/"):
                break
            if user is not None and not _can_enter(user, parent):
                raise SystemExit(f"{parent} is not traversable by user {user}")
        processes.run([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                       f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                       "--encoding=UTF8", "--no-sync"], what="initdb", user=user, cwd=root)
        pwfile.unlink()
    if not log.exists():
        log.touch()
    if user is not None:
        shutil.chown(log, user=user, group=None)
    _link_log(settings, log)
    if settings.node:
        allow_node_pods(data)
    if not _server_running(bindir, data, user, root):
        # pg_ctl hands -o to /bin/sh: a path with spaces must be quoted there.
        processes.run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                       "-o", f"-p {settings.pg_port} -k {shlex.quote(str(sockets))} "
                             f"-c listen_addresses={listen_addresses(settings)} "
                             "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                             "-c max_connections=200 "
                             # Debezium reads the system-of-record database by logical decoding.
                             f"-c wal_level={WAL_LEVEL} -c max_replication_slots=20 "
                             "-c max_wal_senders=20",
                       "start"], what="pg_ctl start", user=user, cwd=root)
    wait_for(lambda: _connect(settings, "postgres"), timeout=60,
             what="PostgreSQL to accept connections",
             on_timeout=lambda: processes.tail(log))
    with psycopg.connect(conninfo(settings, "postgres"), autocommit=True) as conn:
        level = conn.execute("SHOW wal_level").fetchone()
        if level is not None and level[0] != WAL_LEVEL:
            # A server started before CDC joined the stack: wal_level needs a restart.
            print(f"PostgreSQL runs with wal_level={level[0]}; restarting it with "
                  f"wal_level={WAL_LEVEL} for change data capture", flush=True)
            conn.close()
            stop_postgres(settings)
            start_postgres(settings)
            return
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def _discard_orphan(bindir: Path, root: Path, user: str | None) -> None:
    """A cluster under our key while the state directory has no password for it belongs to a
    checkout that was deleted and cloned again at the same path: its superuser password is
    lost with the old state directory, so it is stopped and removed (a new one is made)."""
    data = root / "data"
    if not (data / "PG_VERSION").is_file():
        return
    if _server_running(bindir, data, user, root):
        processes.run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                      what="pg_ctl stop (orphaned cluster)", user=user, cwd=root)
    shutil.rmtree(root)


def _connect(settings: Settings, database: str) -> bool:
    with psycopg.connect(conninfo(settings, database), connect_timeout=2) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def _can_enter(user: str, path: Path) -> bool:
    """Whether `user` may traverse `path` (asked as that user: groups and ACLs count)."""
    argv = ["runuser", "-u", user, "--", "test", "-x", str(path)]
    return subprocess.run(argv, capture_output=True, check=False, cwd="/").returncode == 0


def _server_running(bindir: Path, data: Path, user: str | None, cwd: Path) -> bool:
    argv = [str(bindir / "pg_ctl"), "-D", str(data), "status"]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, check=False, cwd=cwd).returncode == 0


def stop_postgres(settings: Settings) -> None:
    root = cluster_dir(settings)
    data = root / "data"
    if not (data / "PG_VERSION").is_file():
        return
    bindir = postgres_bindir()
    user = _run_as()
    if _server_running(bindir, data, user, root):
        processes.run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                      what="pg_ctl stop", user=user, cwd=root)
