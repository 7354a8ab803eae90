"""A throwaway PostgreSQL server for tests: a new cluster in a temporary folder, on 127.0.0.1 and a free port.

    with PostgresServer() as pg:              # needs initdb/pg_ctl (Debian: postgresql)
        store = RunStore(pg.create_database("runs"))

The binaries are found on ``PATH``, else in ``/usr/lib/postgresql/<version>/bin`` (Debian keeps them
there). PostgreSQL refuses to run as root: as root, the cluster belongs to the ``postgres`` user the
Debian package creates. Durability is off (``fsync=off``): the data is thrown away. ``close()`` stops
the server (immediate shutdown) and removes the folder; nothing waits unbounded.
:func:`missing_reason` says why no server can be started here (None when one can).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from my_utils.core.errors import UsageError

__all__ = ["PostgresServer", "missing_reason"]
_USER = "myutils"


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                      key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def _owner() -> tuple[int, int] | None:
    """The (uid, gid) the server runs as: ours, or the ``postgres`` user's when we are root (None: no such user)."""
    if os.name != "posix" or os.geteuid() != 0:
        return (os.getuid(), os.getgid()) if os.name == "posix" else None
    import pwd

    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def missing_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None when it can."""
    if _bin_dir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql"
    if os.name == "posix" and os.geteuid() == 0 and _owner() is None:
        return "running as root and there is no 'postgres' user for the server to run as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'myutils-profiling[postgresql]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A PostgreSQL cluster of its own, listening on 127.0.0.1 only (user ``myutils``, trust authentication)."""

    def __init__(self, ready_timeout: float = 60.0) -> None:
        reason = missing_reason()
        if reason is not None:
            raise UsageError(f"PostgresServer: {reason}")
        self.bin = _bin_dir()
        self.owner = _owner()
        self.ready_timeout = ready_timeout
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="myutils-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.started = False

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        kwargs: dict[str, Any] = {}
        if self.owner is not None and os.geteuid() == 0:
            kwargs.update(user=self.owner[0], group=self.owner[1], extra_groups=[])
        return subprocess.run([str(self.bin / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout,
                              check=False, cwd=self.dir, **kwargs)

    def start(self) -> None:
        """Create the cluster and start the server; returns once it accepts connections."""
        if self.owner is not None and os.geteuid() == 0:
            os.chown(self.dir, *self.owner)
        out = self._run("initdb", "-D", str(self.data), "-U", _USER, "--auth=trust", "-E", "UTF8", "--no-sync",
                        "--no-instructions", timeout=self.ready_timeout)
        if out.returncode != 0:
            raise UsageError(f"PostgresServer: initdb failed: {(out.stderr or out.stdout)[-800:]}")
        options = f"-h 127.0.0.1 -p {self.port} -k {self.dir} -F -c max_connections=100"
        out = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                        "-t", str(int(self.ready_timeout)), "start", timeout=self.ready_timeout + 10)
        if out.returncode != 0:
            tail = self.log.read_text(errors="replace")[-800:] if self.log.exists() else out.stderr[-800:]
            raise UsageError(f"PostgresServer: the server did not start: {tail}")
        self.started = True
        deadline = time.monotonic() + self.ready_timeout
        while True:  # pg_ctl -w waited for the socket; a first query proves it serves
            try:
                import psycopg

                with psycopg.connect(self.url_for("postgres", driver=False), connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def url_for(self, database: str, driver: bool = True) -> str:
        """The URL of ``database`` on this server (``postgresql+psycopg://`` for SQLAlchemy, else libpq's)."""
        scheme = "postgresql+psycopg" if driver else "postgresql"
        return f"{scheme}://{_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database (a unique name when none is given); its SQLAlchemy URL."""
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url_for("postgres", driver=False), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def close(self) -> None:
        """Stop the server at once and remove its folder."""
        if self.started:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "20", "stop", timeout=40)
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)
