"""Many ranks on Dask: 200 generated ranks through ingest, trace and stragglers, a local Dask cluster against the
process pool, and 8 ranks on a real ``dask scheduler`` + ``dask worker`` cluster joined by address.

The reduced form of issue 22's 1,000-rank goal (the full figure is ``bench/bench_scale.py``): outputs
byte-identical to the pool's; memory independent of the rank count, i.e. at 200 ranks the main process's
peak and the largest worker's peak at most 1.25x those at 20 ranks. Each command runs as a user runs it,
in a fresh interpreter that measures itself: its own peak is the kernel's ``VmHWM`` read at its end;
a worker's is the ``VmHWM`` of each descendant process (multiprocessing's resource tracker and the fork
server left out), read from ``/proc`` every 20 ms while it lives. Timing ratios stay in the bench.

Inputs: per rank, the first 1,200 events of a real sampled Kineto trace (the bench uses all 4,855) whose
``distributedInfo`` says that rank, and a MyTimer profile CSV of 30 steps, so that 200 ranks stay a
test of a minute or two on 2 cores.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

SOURCES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")
EVENTS_PER_RANK = 1200
STEPS = 30
FEW, MANY = 20, 200
COMMANDS = ("ingest", "trace", "stragglers")

CHILD = r"""
import contextlib, json, os, sys, threading

def _hwm(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

def _descendants(root):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        found += [(k, pid) for k in kids]
        todo += kids
    return found

def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""

peaks, skip, stop = {}, set(), threading.Event()

def watch(me):
    tick = 0
    while True:
        # every tick (20 ms) for the first 2 s, then every 5th: a 20-rank pool's workers live ~0.3 s, and under
        # load a scan every 0.1 s missed them all once
        if tick < 100 or tick % 5 == 0:
            for pid, parent in _descendants(me):
                if pid in peaks or pid in skip:
                    continue
                cmd = _cmdline(pid)
                if "resource_tracker" in cmd or ("forkserver" in cmd and parent == me):
                    skip.add(pid)  # helpers, not workers
                else:
                    peaks[pid] = 0
        for pid in list(peaks):
            peaks[pid] = max(peaks[pid], _hwm(pid))
        tick += 1
        if stop.wait(0.02):
            return

if __name__ == "__main__":
    prog, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    threading.Thread(target=watch, args=(os.getpid(),), daemon=True).start()
    code = 0
    with open(out, "w", encoding="utf-8") as fh, contextlib.redirect_stdout(fh):
        sys.argv = [prog, *argv]
        try:
            if prog == "myutils":
                from my_utils.core.cli import main
            else:
                from my_utils.profiling.cli import main
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    stop.set()
    if code:
        sys.exit(f"exit {code}")
    print(json.dumps({"main": _hwm("self"), "workers": [v for v in peaks.values() if v]}))
"""


def _run_folder(folder: Path, ranks: int, real_fixtures: Any) -> Path:
    """``ranks`` ranks: ``traces/rank_<r>.json.gz`` (a real trace's first events) and ``csv/profile_rank_<r>.csv``."""
    from my_utils.distributed.testing import write_synthetic_run

    docs = []
    for rel in SOURCES:
        with gzip.open(real_fixtures / rel, "rb") as fh:
            doc = json.load(fh)
        doc["traceEvents"] = doc["traceEvents"][:EVENTS_PER_RANK]
        docs.append(doc)
    (folder / "traces").mkdir(parents=True)
    for r in range(ranks):
        doc = docs[r % 2]
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": r, "world_size": ranks}
        (folder / "traces" / f"rank_{r}.json.gz").write_bytes(
            gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=1, mtime=0))
    write_synthetic_run(folder / "csv", ranks, STEPS, slow=(ranks // 3, "forward", 1.5),
                        clock_offsets={r: (r * 1e-4, True) for r in range(ranks)})
    (folder / "ingest.json").write_text(json.dumps({
        "output_dir": "events", "run_id": f"scale-{ranks}",
        "providers": [{"provider": "torch_profiler", "input": "traces"}, {"provider": "mytimer", "input": "csv"}]}))
    return folder


def _command(command: str, run: Path, out: Path, executor: str) -> tuple[str, list[str], Path]:
    """(program, arguments, the output to compare) of ``command`` over ``run`` into ``out``."""
    workers = [] if executor.startswith("tcp://") else ["--workers", "2"]
    if command == "ingest":
        return "myutils-profile", ["ingest", "--config", str(run / "ingest.json"), "--output-dir", str(out / "ev"),
                                   "--executor", executor, *workers, "-q"], out / "ev" / "metrics_events.jsonl"
    if command == "trace":
        traces = sorted((run / "traces").iterdir(), key=lambda p: int(p.name.split("_")[1].split(".")[0]))
        return "myutils-profile", ["trace", "--events", str(run / "csv"),
                                   *(a for t in traces for a in ("--torch-trace", str(t))),
                                   "--output", str(out / "t.json"), "--auto-align-ranks", "--executor", executor,
                                   *workers, "-q"], out / "t.json"
    return "myutils", ["stragglers", str(run / "csv"), "--json", "--executor", executor, *workers], out / "stdout"


def _measured(command: str, run: Path, out: Path, executor: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``command`` in a fresh interpreter: its peaks (bytes) and the sha256 of its output."""
    out.mkdir(parents=True)
    prog, argv, result = _command(command, run, out, executor)
    proc = subprocess.run([sys.executable, "-c", CHILD, prog, str(out / "stdout"), *argv], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"{command} --executor {executor}: {proc.stderr[-3000:]}"
    measured: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    measured["sha256"] = hashlib.sha256(result.read_bytes()).hexdigest()
    shutil.rmtree(out)
    return measured


def _env(tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return {**env, "TMPDIR": str(scratch)}


@cache
def _why_not() -> str | None:
    if not Path("/proc/self/status").is_file():
        return "needs Linux's /proc to read each process's VmHWM"
    if find_spec("distributed") is None:
        return "dask.distributed is not installed (pip install 'myutils-profiling[dask]')"
    if find_spec("my_utils.distributed") is None:
        return "myutils-distributed (the stragglers command) is not installed"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, real_fixtures: Any) -> Iterator[dict[str, dict[str, Any]]]:
    """``{"<command> <ranks> <executor>": measured}`` for 20 and 200 ranks, the pool and a local Dask cluster."""
    if _why_not():
        pytest.skip(str(_why_not()))
    tmp = tmp_path_factory.mktemp("scale")
    env = _env(tmp)
    folders = {n: _run_folder(tmp / f"run_{n}", n, real_fixtures) for n in (FEW, MANY)}
    results = {f"{command} {n} {executor}": _measured(command, folders[n], tmp / "out", executor, env)
               for n in (FEW, MANY) for command in COMMANDS for executor in ("process", "dask")}
    assert os.listdir(tmp / "tmp") == []  # no spill or scratch folder left by any of them
    yield results


@pytest.mark.parametrize("command", COMMANDS)
def test_dask_output_is_the_pools(runs: dict[str, dict[str, Any]], command: str) -> None:
    for n in (FEW, MANY):
        assert runs[f"{command} {n} dask"]["sha256"] == runs[f"{command} {n} process"]["sha256"], n


@pytest.mark.parametrize("executor", ["process", "dask"])
@pytest.mark.parametrize("command", COMMANDS)
def test_memory_does_not_grow_with_the_ranks(runs: dict[str, dict[str, Any]], command: str, executor: str) -> None:
    few, many = runs[f"{command} {FEW} {executor}"], runs[f"{command} {MANY} {executor}"]
    assert many["main"] <= 1.25 * few["main"], (many["main"] >> 20, few["main"] >> 20)
    assert few["workers"] and many["workers"], "no worker process was seen"
    assert max(many["workers"]) <= 1.25 * max(few["workers"]), (max(many["workers"]) >> 20,
                                                                 max(few["workers"]) >> 20)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    proc.wait(timeout=30)


def _readme_worker_config() -> str:
    """The yaml block of the README's "On a real cluster": the Dask config it tells users to give their workers."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^### On a real cluster$.*?^```yaml\n(.*?)^```", text, re.M | re.S)
    assert found is not None, "the README's cluster recipe has no yaml block"
    return found[1]


def test_the_readme_cluster_config_has_every_setting_of_a_local_cluster() -> None:
    """A real cluster told to use the README's config runs as quietly as our local one: every setting
    the local cluster (``my_utils.core.dask_local``) gives its workers and scheduler is in the yaml block, with the
    same value."""
    import yaml

    from my_utils.core.dask_local import QUIET_LOOP, QUIET_WORKERS

    def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            if isinstance(value, dict):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    readme = flat(yaml.safe_load(_readme_worker_config()))
    wanted = {**QUIET_LOOP, **QUIET_WORKERS}
    assert {k: readme.get(k) for k in wanted} == wanted
    assert readme["distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"] is None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker --nthreads 1`` processes on 127.0.0.1, joined by address; the
    workers read the README's Dask config (``DASK_CONFIG``)."""
    if _why_not():
        pytest.skip(str(_why_not()))
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    if dask is None:
        pytest.skip("the dask command line is not installed beside this Python")
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 120
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        config = tmp_path / "dask.yaml"
        config.write_text(_readme_worker_config(), encoding="utf-8")
        # Dask's nannies (a local cluster an earlier test started in this process) leave
        # MALLOC_TRIM_THRESHOLD_=65536 in os.environ: a real cluster's worker does not inherit it
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
        env["DASK_CONFIG"] = str(config)
        for n in range(2):
            procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                           "--no-dashboard", "--local-directory", str(tmp_path / f"worker-{n}")],
                                          start_new_session=True, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, env=env))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            # the README's settings reached the workers: no malloc trimming, no per-task profiler
            # and its preload (my_utils.profiling.dask_worker) froze what Dask's imports left
            seen = client.run(lambda: (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                                       __import__("dask").config.get("distributed.worker.profile.enabled"),
                                       __import__("gc").get_freeze_count() > 10_000))
            assert sorted(seen.values()) == [(None, False, True), (None, False, True)], seen
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)


def test_a_cluster_joined_by_address_gives_the_pools_outputs(cluster: str, tmp_path: Path,
                                                             real_fixtures: Any) -> None:
    run = _run_folder(tmp_path / "run", 8, real_fixtures)
    env = _env(tmp_path)  # the workers run on this machine: they see the inputs and $TMPDIR at the same paths
    for command in COMMANDS:
        on_cluster = _measured(command, run, tmp_path / "out", cluster, env)
        pool = _measured(command, run, tmp_path / "out", "process", env)
        assert on_cluster["sha256"] == pool["sha256"], command


def test_a_worker_that_cannot_see_the_traces_is_named_with_the_fix(tmp_path: Path, real_fixtures: Any) -> None:
    """ingest on a real scheduler whose one worker runs in a mount namespace where the run's folder is an empty tmpfs.

    Before: ``...rank_0.json.gz: a readable file (No such file or directory) (on Dask worker ...)``, the
    reader's words, without what to do.
    """
    if _why_not():
        pytest.skip(str(_why_not()))
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    if dask is None:
        pytest.skip("the dask command line is not installed beside this Python")
    shared = tmp_path / "shared"
    shared.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs tmpfs {shared} && ls -A {shared}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"a private mount namespace is not allowed here (unshare -m needs root): {probe.stderr.strip()}")
    run = _run_folder(shared / "run", 2, real_fixtures)
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 120
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                       f'mount -t tmpfs tmpfs "{shared}" && exec "{dask}" worker --nthreads 1 '
                                       f'--no-nanny --host 127.0.0.1 --name blind {address}'],
                                      start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
        out = tmp_path / "events"
        res = subprocess.run([sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; "
                              "sys.argv[0] = 'myutils-profile'; main()", "ingest", "--config",
                              str(run / "ingest.json"), "--output-dir", str(out), "--executor", address, "-q"],
                             capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    finally:
        for proc in reversed(procs):
            _stop(proc)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {run / 'traces' / 'rank_0.json.gz'}: a file Dask worker tcp://127.0.0.1:")
    assert lines[0].endswith(" can read (No such file or directory); every worker must see the inputs and $TMPDIR "
                             "at the same paths"), lines
    assert not out.exists()
