"""PostgreSQL from Debian's packages, in a cluster of our own.

initdb'd inside the state directory and started with pg_ctl (never the
system service).  The server refuses to run as root, so when we are root it
runs as the `postgres` user the Debian package creates.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import psycopg

from dvstack import processes
from dvstack.artefacts import postgres_bindir
from dvstack.settings import Settings
from dvstack.waiting import wait_for

SUPERUSER = "postgres"
DATABASE = "derived_views"


def pg_dir(settings: Settings) -> Path:
    return settings.state_dir / "postgres"


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
    return (f"host=127.0.0.1 port={settings.pg_port} dbname={database} user={SUPERUSER} "
            f"password={password(settings)}")


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user=user, group=None)
        for p in path.rglob("*"):
            shutil.chown(p, user=user, group=None)


def start(settings: Settings) -> None:
    bindir = postgres_bindir()
    user = _run_as()
    root = pg_dir(settings)
    data = root / "data"
    sockets = root / "sockets"
    log = processes.log_file(settings, "postgres")
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    pw = password(settings)
    if not (data / "PG_VERSION").is_file():
        root.mkdir(parents=True, exist_ok=True)
        pwfile = root / "pwfile"
        pwfile.write_text(pw + "\n")
        sockets.mkdir(exist_ok=True)
        _chown(root, user)
        # Parents must be traversable by the server's user.
        for parent in root.parents:
            if parent == Path("/"):
                break
            if user is not None and not os.access(parent, os.X_OK):
                raise SystemExit(f"{parent} is not traversable by user {user}")
        processes.run([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                       f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                       "--encoding=UTF8", "--no-sync"], what="initdb", user=user)
        pwfile.unlink()
    if not log.exists():
        log.touch()
    if user is not None:
        shutil.chown(log, user=user, group=None)
    if not _server_running(bindir, data, user):
        processes.run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                       "-o", f"-p {settings.pg_port} -k {sockets} -c listen_addresses=127.0.0.1 "
                             "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                             "-c max_connections=200",
                       "start"], what="pg_ctl start", user=user)
    wait_for(lambda: _connect(settings, "postgres"), timeout=60,
             what="PostgreSQL to accept connections",
             on_timeout=lambda: processes.tail(log))
    with psycopg.connect(conninfo(settings, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def _connect(settings: Settings, database: str) -> bool:
    with psycopg.connect(conninfo(settings, database), connect_timeout=2) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def _server_running(bindir: Path, data: Path, user: str | None) -> bool:
    import subprocess

    argv = [str(bindir / "pg_ctl"), "-D", str(data), "status"]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def stop(settings: Settings) -> None:
    data = pg_dir(settings) / "data"
    if not (data / "PG_VERSION").is_file():
        return
    bindir = postgres_bindir()
    user = _run_as()
    if _server_running(bindir, data, user):
        processes.run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                      what="pg_ctl stop", user=user)
