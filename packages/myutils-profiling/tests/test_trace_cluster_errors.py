"""``trace`` on a Dask cluster whose worker cannot see the files: the one line names the file and the worker.

A real scheduler and a real worker (``dask scheduler`` / ``dask worker``, separate processes); the
worker runs in a mount namespace of its own where the folder holding the inputs and ``$TMPDIR`` is
an empty tmpfs, as on a machine without the shared filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]
TRACE = "kineto/hta/trace_filter__sampled_rank-0.json.gz"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    proc.wait(timeout=30)


@pytest.fixture
def blind_cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(scheduler address, the shared folder its one worker cannot see)."""
    pytest.importorskip("distributed")
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    if dask is None:
        pytest.skip("the dask command line is not installed beside this Python")
    shared = tmp_path / "shared"
    shared.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs tmpfs {shared} && ls -A {shared}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"a private mount namespace is not allowed here (unshare -m needs root): {probe.stderr.strip()}")
    sched_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(sched_file)], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.monotonic() + 120
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        worker = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                   f'mount -t tmpfs tmpfs "{shared}" && exec "{dask}" worker --nthreads 1 '
                                   f'--no-nanny --host 127.0.0.1 --name blind "{address}"'],
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
        yield address, shared
    finally:
        if worker is not None:
            _stop(worker)
        _stop(scheduler)


def _inputs(shared: Path, real_fixtures: Any, regions: bool) -> Path:
    (shared / "tmp").mkdir()
    events = shared / "metrics_events.jsonl"
    write_events(events, [MetricEvent(name="iter", value=1.0, kind="duration", unit="ms", source="mytimer",
                                      rank=r, step=0, ts=1.7e9, attrs={"depth": 0}) for r in range(2)] if regions
                 else [])
    shutil.copy(real_fixtures / TRACE, shared / "rank_0.json.gz")
    return events


@pytest.mark.parametrize("unseen", ["torch trace", "scratch file"])
def test_a_worker_that_cannot_see_the_files_is_named(blind_cluster: tuple[str, Path], real_fixtures: Any,
                                                     unseen: str) -> None:
    address, shared = blind_cluster
    events = _inputs(shared, real_fixtures, regions=unseen == "scratch file")
    out = shared / "out" / "t.json"
    args = ["--torch-trace", str(shared / "rank_0.json.gz")] if unseen == "torch trace" else []
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    res = subprocess.run([*CLI, "trace", "--events", str(events), *args, "--output", str(out), "--executor", address,
                          "-q"], capture_output=True, text=True, timeout=600, env={**env, "TMPDIR": str(shared / "tmp")})
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    # the file the worker could not open (the torch trace, or a spill file in $TMPDIR), and that worker
    missing = str(shared / "rank_0.json.gz") if unseen == "torch trace" else f"{shared / 'tmp'}/myutils-trace-"
    assert lines[0].startswith(f"error: {missing}") and "No such file or directory" in lines[0], lines
    assert "Dask worker tcp://127.0.0.1:" in lines[0] and f"(host {socket.gethostname()})" in lines[0], lines
    assert not out.parent.exists() and list((shared / "tmp").iterdir()) == []


def test_ingest_on_workers_that_cannot_see_tmpdir_sends_the_lines_back(blind_cluster: tuple[str, Path],
                                                                       real_fixtures: Any, tmp_path: Path) -> None:
    # the inputs are seen by the worker, $TMPDIR (where the spill folder is made) is not
    from distributed import Client

    from my_utils.profiling.formats.dask_run import DaskSession

    address, shared = blind_cluster
    (shared / "tmp").mkdir()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for rank in (0, 1):
        shutil.copy(real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{rank}.json.gz", inputs)
    config = tmp_path / "ingest.json"
    config.write_text(json.dumps({"run_id": "blind", "providers": [{"provider": "torch_profiler",
                                                                     "input": str(inputs)}]}))
    with Client(address, timeout=60) as client:
        session = DaskSession(client, 1, named=True)
        assert session.sees(str(inputs)) and not session.sees(str(shared / "tmp"))
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    outputs = {}
    for executor in (address, "serial"):
        out = tmp_path / f"out-{len(outputs)}"
        res = subprocess.run([*CLI, "ingest", "--config", str(config), "--output-dir", str(out), "--executor",
                              executor, "-q"], capture_output=True, text=True, timeout=600,
                             env={**env, "TMPDIR": str(shared / "tmp")})
        assert res.returncode == 0 and res.stderr == "", res.stderr
        outputs[executor] = (out / "metrics_events.jsonl").read_bytes()
    assert outputs[address] == outputs["serial"] and outputs[address].count(b"\n") > 1000
    assert list((shared / "tmp").iterdir()) == []
