"""Every command that takes a ``tcp://`` scheduler address gives up in bounded time (issue 35, item 5).

Two hostile peers, both real sockets on 127.0.0.1: a server that accepts and never answers (Dask's own
``Client(timeout=)`` bounds the TCP connection but not its handshake: a command once waited until the
peer hung up), and a port where nothing listens (Dask retried it for its whole connect timeout, then said
"Timed out"). Each command runs as a real process: ``stragglers`` (myutils-distributed), ``ingest`` and
``trace`` (myutils-profiling). The silent one must end with "no Dask scheduler answered at ADDRESS within
N s" once Dask's connect timeout (here 3 s) has passed; the refused one at once, with the connect timeout
set to 10 minutes, so that waiting for it would fail the test at the process timeout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")

TIMEOUT_ENV = "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """``tcp://127.0.0.1:PORT`` of a server that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def refused_address() -> str:
    """``tcp://127.0.0.1:PORT`` where nothing listens (a port just freed)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"tcp://127.0.0.1:{port}"


def _command(name: str, folder: Path, address: str) -> list[str]:
    if name == "stragglers":
        from my_utils.distributed.testing import write_synthetic_run

        write_synthetic_run(folder, 2, 2)
        return [sys.executable, "-m", "my_utils.core", "stragglers", str(folder), "--executor", address]
    from my_utils.profiling.examples import example_config_path

    data = example_config_path().parent / "data"
    for rank in range(2):
        (folder / f"profile_rank_{rank}.csv").write_bytes((data / "profile_rank_0.csv").read_bytes())
    cli = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]
    if name == "trace":
        return [*cli, "trace", "--events", str(folder), "--output", str(folder / "out" / "t.json"), "--executor",
                address]
    config = folder / "config.json"
    config.write_text(json.dumps({"run_id": "connect", "providers": [{"provider": "mytimer", "input": "."}]}))
    return [*cli, "ingest", "--config", str(config), "--output-dir", str(folder / "out"), "--executor", address]


def _run(args: list[str], connect: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env={**env, TIMEOUT_ENV: connect})


COMMANDS = ["stragglers", "ingest", "trace"]


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout(name: str, silent_server: str,
                                                                           tmp_path: Path) -> None:
    res = _run(_command(name, tmp_path, silent_server), "3s")
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"error: no Dask scheduler answered at {silent_server} within 3 s"), line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_a_refused_address_fails_at_once(name: str, refused_address: str, tmp_path: Path) -> None:
    res = _run(_command(name, tmp_path, refused_address), "600s")  # waiting for it would pass the 120 s timeout
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"error: no Dask scheduler answered at {refused_address} (Connection refused)"), line
    assert not (tmp_path / "out").exists()


def test_a_scheduler_that_answers_is_joined(tmp_path: Path) -> None:
    """The probe does not stand in the way of a real scheduler (one started here, on 127.0.0.1)."""
    from distributed import LocalCluster

    from my_utils.core.dask_local import join_scheduler

    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40,
                      local_directory=str(tmp_path)) as cluster, \
            join_scheduler(cluster.scheduler_address, "a test") as client:
        assert client.scheduler_info()["address"] == cluster.scheduler_address
