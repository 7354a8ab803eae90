"""Every listener of every process an ``--executor dask`` command starts is on loopback (issue 35, item 1).

Each command runs as a user runs it, in a fresh process; a watcher lists the listening TCP sockets of
that process and of everything it starts (the fork server, the workers) until it exits. A socket bound
to any address but 127.0.0.0/8 or ::1 (``0.0.0.0`` included) fails the test: the local cluster's
scheduler once served its HTTP routes (``/info``, ``/json/identity.json``: workers, folders, logs) on
every interface. The watcher must see at least the scheduler's own listener, else it watched nothing.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")


def _loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def _listeners(root: int) -> set[tuple[int, str, str, int]]:
    """(pid, process name, host, port) of every listening inet socket of ``root`` and its descendants now."""
    found: set[tuple[int, str, str, int]] = set()
    try:
        top = psutil.Process(root)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return found
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
            name = proc.name()
        except psutil.Error:  # gone meanwhile
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN and conn.laddr:
                found.add((proc.pid, name, conn.laddr.ip, conn.laddr.port))
    return found


def watch(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], set[tuple[int, str, str, int]]]:
    """Run ``command``, listing its process tree's listeners every few ms until it exits."""
    seen: set[tuple[int, str, str, int]] = set()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= _listeners(proc.pid)
        time.sleep(0.005)
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, out, err), seen


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}


def _stragglers(folder: Path, out: Path) -> list[str]:
    from my_utils.distributed.testing import write_synthetic_run

    write_synthetic_run(folder, 6, 4)
    return [sys.executable, "-m", "my_utils.core", "stragglers", str(folder), "--executor", "dask", "--workers", "2",
            "--json"]


def _profile(command: str, folder: Path, out: Path) -> list[str]:
    from my_utils.profiling.examples import example_config_path

    data = example_config_path().parent / "data"
    for rank in range(2):
        (folder / f"profile_rank_{rank}.csv").write_bytes((data / "profile_rank_0.csv").read_bytes())
    cli = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]
    if command == "trace":
        return [*cli, "trace", "--events", str(folder), "--output", str(out / "trace.json"), "--executor", "dask",
                "--workers", "2"]
    config = folder / "config.json"
    config.write_text(json.dumps({"run_id": "listeners", "providers": [{"provider": "mytimer", "input": "."}]}))
    return [*cli, "ingest", "--config", str(config), "--output-dir", str(out), "--executor", "dask", "--workers", "2",
            "--quiet"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["stragglers", "ingest", "trace"])
def test_every_listener_of_an_executor_dask_command_is_on_loopback(command: str, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    args = _stragglers(folder, out) if command == "stragglers" else _profile(command, folder, out)
    res, seen = watch(args, _env())
    assert res.returncode == 0, res.stderr[-3000:]
    assert seen, "no listener seen: the watcher missed the cluster"
    exposed = sorted(s for s in seen if not _loopback(s[2]))
    assert not exposed, f"{command} --executor dask listened beyond loopback: {exposed}"


@pytest.mark.parametrize("host,loop", [("127.0.0.1", True), ("127.3.0.1", True), ("::1", True),
                                       ("::ffff:127.0.0.1", True), ("0.0.0.0", False), ("::", False),
                                       ("10.0.0.5", False), ("fe80::1%eth0", False)])
def test_the_loopback_check_itself(host: str, loop: bool) -> None:
    assert _loopback(host) is loop
