"""stragglers on Dask: a local cluster, ``$DASK_SCHEDULER_ADDRESS`` and a real ``dask scheduler`` + ``dask worker``
cluster joined by address all give the serial report; without Dask it is one line naming the extra.

The commands run as a user runs them (``python -m my_utils.core stragglers ...``) in fresh interpreters
in which ``my_utils.profiling`` cannot be imported: this distribution needs myutils-core and, for these
executors, dask.distributed, nothing else.
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

import pytest

from my_utils.core.safe_io import strict_json
from my_utils.distributed.stragglers import analyze_stragglers
from my_utils.distributed.testing import write_synthetic_run

RANKS = 40  # batches of 5 ranks on 2 workers: 8 tasks, 4 in flight at most
# the CLI with myutils-profiling hidden (and the modules it would bring): an import of it fails
CLI = [sys.executable, "-c", "import sys; sys.modules['my_utils.profiling'] = None; sys.argv[0] = 'myutils'; "
       "from my_utils.core.cli import main; main()"]


def _dask_cli() -> str:
    pytest.importorskip("distributed")
    found = shutil.which("dask", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("the dask command line is not installed beside this Python")
    return found


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return {**env, **extra}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """40 ranks x 12 steps, one slow, clock offsets to apply; and the serial report as the command prints it."""
    folder = tmp_path_factory.mktemp("wide")
    write_synthetic_run(folder, RANKS, 12, slow=(23, "forward", 1.8), clock_offsets={3: (0.002, False)})
    return folder, strict_json(analyze_stragglers(folder, executor="serial").to_dict(), indent=2) + "\n"


def _stragglers(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "stragglers", str(folder), "--json", *args], capture_output=True, text=True,
                          timeout=300, env=env or _env())


def _scheduler(dask: str, folder: Path, *workers: list[str]) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A ``dask scheduler`` on 127.0.0.1 and one process per ``workers`` entry (a command after the address)."""
    sched_file = folder / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    deadline = time.monotonic() + 120
    while not sched_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.1)
    address = str(json.loads(sched_file.read_text())["address"])
    for command in workers:
        procs.append(subprocess.Popen([part.replace("ADDRESS", address) for part in command], start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(len(workers), timeout=120)
    return address, procs


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A real cluster: ``dask scheduler`` and two ``dask worker --nthreads 1`` processes, joined by address."""
    dask = _dask_cli()
    address, procs = _scheduler(dask, tmp_path, *[[dask, "worker", "ADDRESS", "--nthreads", "1", "--host",
                                                   "127.0.0.1", "--no-dashboard", "--local-directory",
                                                   str(tmp_path / f"w{n}")] for n in range(2)])
    try:
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.mark.slow
def test_a_local_cluster_gives_the_serial_report(wide_run: tuple[Path, str]) -> None:
    pytest.importorskip("distributed")
    folder, serial = wide_run
    res = _stragglers(folder, "--executor", "dask", "--workers", "2")
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]
    assert res.stdout == serial and '"rank": 23' in serial


@pytest.mark.slow
def test_a_cluster_joined_by_address_gives_the_serial_report(wide_run: tuple[Path, str], cluster: str) -> None:
    folder, serial = wide_run
    res = _stragglers(folder, "--executor", cluster)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout == serial
    # "dask" joins the scheduler named in the environment (no local cluster is started: it would print nothing
    # different, so the scheduler's own count of tasks says where they ran)
    from distributed import Client

    with Client(cluster, timeout=60) as client:
        before = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
        res = _stragglers(folder, "--executor", "dask", env=_env(DASK_SCHEDULER_ADDRESS=cluster))
        after = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
    assert res.returncode == 0 and res.stdout == serial, res.stderr[-3000:]
    assert after - before >= 3 * 8  # 40 ranks in 8 tasks, each through several states


@pytest.mark.slow
def test_a_bad_rank_on_a_local_cluster_is_the_serial_line(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    write_synthetic_run(tmp_path, 4, 3)
    bad = tmp_path / "profile_rank_2.csv"
    bad.write_text(bad.read_text() + "1.0,x,h,notastep,forward,END,1.0,\n")
    res = _stragglers(tmp_path, "--executor", "dask", "--workers", "2")
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"error: {bad}:line 20: expected an integer in column 'step', got 'notastep'"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"profile_rank_{r}.csv" for r in range(4)]


@pytest.mark.slow
def test_a_worker_that_cannot_see_a_rank_file_is_named(tmp_path: Path) -> None:
    """The worker runs in a mount namespace where the run's folder is an empty tmpfs (a machine without the share)."""
    dask = _dask_cli()
    shared = tmp_path / "shared"
    shared.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs tmpfs {shared} && ls -A {shared}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"a private mount namespace is not allowed here (unshare -m needs root): {probe.stderr.strip()}")
    write_synthetic_run(shared, 3, 2)
    address, procs = _scheduler(dask, tmp_path, ["unshare", "-m", "--propagation", "private", "sh", "-c",
                                                 f'mount -t tmpfs tmpfs "{shared}" && exec "{dask}" worker --nthreads 1 '
                                                 f'--no-nanny --host 127.0.0.1 --name blind ADDRESS'])
    try:
        res = _stragglers(shared, "--executor", address)
    finally:
        for proc in reversed(procs):
            _stop(proc)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {shared / 'profile_rank_0.csv'}: a rank file Dask worker tcp://127.0.0.1:"), lines
    assert f"(host {socket.gethostname()}) can read (No such file or directory)" in lines[0], lines
    assert lines[0].endswith("every worker must see the rank files at the same paths"), lines


def test_a_task_given_spool_files_writes_them_and_sends_back_no_bytes(tmp_path: Path) -> None:
    """A local cluster's workers see our scratch folder: the spools are written there, only the clocks come back."""
    from my_utils.distributed.stragglers.dask_spool import _spool_batch
    from my_utils.distributed.stragglers.spool import spool_bytes

    write_synthetic_run(tmp_path, 2, 9, clock_offsets={1: (0.002, False)})
    ranks = [str(tmp_path / f"profile_rank_{r}.csv") for r in range(2)]
    spools = [tmp_path / f"rank_{r}.spool" for r in range(2)]
    written = _spool_batch([(r, ranks[r], str(spools[r])) for r in range(2)], 4, False)
    sent = _spool_batch([(r, ranks[r], None) for r in range(2)], 4, False)
    for r in range(2):
        data, clocks = spool_bytes(ranks[r], 4)
        assert written[r] == (r, None, clocks) and sent[r] == (r, data, clocks)
        assert spools[r].read_bytes() == data
    assert [len(w[2]) for w in written] == [0, 1] and written[1][2][0].offset_s == 0.002  # rank 1's offset came back


def test_without_dask_it_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 2)
    hidden = [sys.executable, "-c", "import sys; sys.modules['distributed'] = None; sys.argv[0] = 'myutils'; "
              "from my_utils.core.cli import main; main()"]
    for executor in ("dask", "tcp://127.0.0.1:8786"):
        res = subprocess.run([*hidden, "stragglers", str(tmp_path), "--executor", executor], capture_output=True,
                             text=True, timeout=120, env=_env())
        assert res.returncode == 2
        assert res.stderr.splitlines() == [f"error: stragglers --executor {executor}: needs dask.distributed, which "
                                           "is not installed; install it with `pip install "
                                           "'myutils-distributed[dask]'`, or use --executor process"]


def test_a_malformed_address_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    write_synthetic_run(tmp_path, 2, 2)
    res = _stragglers(tmp_path, "--executor", "dask", env=_env(DASK_SCHEDULER_ADDRESS="localhost:8786"))
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["error: stragglers: $DASK_SCHEDULER_ADDRESS='localhost:8786' is not "
                                       "understood; use 'dask' (a local cluster, or the scheduler in "
                                       "$DASK_SCHEDULER_ADDRESS) or a Dask scheduler address such as "
                                       "'tcp://127.0.0.1:8786'"]


@pytest.mark.slow
def test_a_local_cluster_leaves_distributed_logging_at_error_after_its_import(tmp_path: Path) -> None:
    # importing distributed sets its logger to Dask's configured INFO; silence_logs quiets only the handlers,
    # only while the cluster lives: the INFO lines of a failed run's shutdown came after, with a traceback
    pytest.importorskip("distributed")
    write_synthetic_run(tmp_path, 4, 3)
    code = ("import logging, sys\n"
            "from my_utils.distributed.stragglers import analyze_stragglers\n"
            "assert 'distributed' not in sys.modules\n"
            f"analyze_stragglers({str(tmp_path)!r}, executor='dask', max_workers=2)\n"
            "print(logging.getLogger('distributed.batched').getEffectiveLevel())\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env())
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.split() == ["40"]
