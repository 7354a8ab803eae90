"""ingest, trace and stragglers over 100 and 1,000 generated ranks: process pool, local Dask cluster, real Dask cluster.

    python bench/bench_scale.py [--quick] [--samples N] [--json OUT] [--fixtures DIR] [--ranks 100,1000]
                                [--workers 2] [--commands ingest,trace,stragglers]
                                [--executors process,dask,cluster]

Inputs: ``bench/make_scale_run.py`` runs of N ranks (a real sampled Kineto trace per rank, 4,855
events, and a MyTimer profile CSV of 200 steps), cached in ``bench/out/scale_<N>x200``
(``--quick``: 2 and 4 ranks, made in the temporary folder). Commands, as a user types them:

- ``myutils-profile ingest --config RUN/ingest.json --output-dir OUT --executor X --workers W``
- ``myutils-profile trace --events RUN/csv --torch-trace RUN/traces/rank_<r>.json.gz ... --output OUT.json
  --auto-align-ranks --executor X --workers W``
- ``myutils stragglers RUN/csv --json --executor X --workers W``

Executors, same worker count (``--workers``, default 2): ``process`` (the process pool, the anchor),
``dask`` (a LocalCluster started by the command) and ``cluster``: ``dask scheduler`` and W ``dask
worker --nthreads 1`` processes started by this bench for each sample (outside the timed part: a
cluster is a service) and joined by address (``--executor tcp://127.0.0.1:PORT``); their Dask
config is the one the profiling README's cluster recipe gives (``DASK_CONFIG``).

Each sample runs the command in a fresh interpreter (``main()`` of the CLI, in that process), after
``os.sync()`` (what earlier samples left for the disk is written first), and measures: wall time
(imports included); the main process's peak RSS, the kernel's ``VmHWM`` of that process read at its
end (not ``ru_maxrss``: Linux carries it across ``exec``); each worker's peak RSS, the ``VmHWM`` of
each worker process read from ``/proc/<pid>/status`` every 50 ms while it lives (pool and
local-cluster workers: the command's descendants, found every 0.2 s, without multiprocessing's
resource tracker and fork server; a real cluster's workers: read once by this bench at the end of
the sample, while they still run); and the sha256 of the output (the events file, the merged trace,
the JSON report).

Goals (issue 22 goal 2, issue 24): for each command and executor, the main-process peak and the
largest worker peak at the most ranks at most 1.25x those at the fewest; at the most ranks, the
Dask wall time (local cluster, and the real cluster) within 15 % of the pool's, per round; every
executor's output identical to the pool's. The tools alternate round by round.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from _child import child_sample
from _fixtures import Unavailable, where
from _report import (
    Report,
    at_most,
    at_most_times,
    common_args,
    interleave,
    interpreter_label,
    require,
    versions_label,
)
from _temp import bench_tempdir
from make_scale_run import STEPS, scale_run

COMMANDS = ("ingest", "trace", "stragglers")
EXECUTORS = ("process", "dask", "cluster")

README = Path(__file__).resolve().parents[1] / "packages" / "myutils-profiling" / "README.md"


def cluster_config() -> str:
    """The workers' Dask config of the README's cluster recipe ("On a real cluster"): what is measured is what it says."""
    text = README.read_text(encoding="utf-8")
    found = re.search(r"^### On a real cluster$.*?^```yaml\n(.*?)^```", text, re.M | re.S)
    if found is None:
        raise SystemExit(f"bench_scale: {README} has no yaml block under '### On a real cluster'")
    return found[1]


CHILD = r"""
import contextlib, json, os, sys, threading, time

def _hwm(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""

_peaks, _skip, _stop = {}, set(), threading.Event()

def _watch(me):
    import psutil
    root, tick = psutil.Process(me), 0
    while True:
        if tick % 4 == 0:  # finding the descendants reads every process of the machine: every 0.2 s
            try:
                kids = root.children(recursive=True)
            except psutil.Error:
                kids = []
            for p in kids:
                if p.pid in _peaks or p.pid in _skip:
                    continue
                cmd = _cmdline(p.pid)
                try:
                    parent = p.ppid()
                except psutil.Error:
                    continue
                # helpers, not workers: multiprocessing's resource tracker, the fork server our local cluster forks from
                if "resource_tracker" in cmd or ("forkserver" in cmd and parent == me):
                    _skip.add(p.pid)
                else:
                    _peaks[p.pid] = 0
        for pid in list(_peaks):
            _peaks[pid] = max(_peaks[pid], _hwm(pid))
        tick += 1
        if _stop.wait(0.05):
            return

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:  # a file: 1,000 trace paths are near the 128 KiB of one argument
        spec = json.load(fh)
    os.environ.pop("DASK_SCHEDULER_ADDRESS", None)  # "dask" means a local cluster here
    os.environ.update(spec["env"])  # before any import: tempfile reads TMPDIR once
    watcher = threading.Thread(target=_watch, args=(os.getpid(),), daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    code = 0
    with open(spec["stdout"], "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
        sys.argv = [spec["prog"], *spec["argv"]]
        try:
            if spec["prog"] == "myutils":
                from my_utils.core.cli import main
            else:
                from my_utils.profiling.cli import main
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    wall = time.perf_counter() - t0
    _stop.set()
    watcher.join()
    if code:
        sys.exit(f"{spec['prog']} {spec['argv'][0]} exited {code}")
    print(json.dumps({"s": wall, "main_mb": _hwm("self") / 2**20,
                      "workers_mb": [v / 2**20 for v in _peaks.values() if v]}))
"""

Sample = dict[str, Any]


def _vmhwm(pid: int) -> float:
    """The peak RSS (MB) the kernel recorded for ``pid``, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


@contextmanager
def real_cluster(dask_cli: str, workers: int, folder: Path, env: dict[str, str]) -> Iterator[tuple[str, list[int]]]:
    """``dask scheduler`` + ``workers`` ``dask worker`` processes on 127.0.0.1: (address, the worker processes' pids)."""
    import psutil
    from distributed import Client

    folder.mkdir(parents=True, exist_ok=True)
    sched_file = folder / "scheduler.json"
    sched_file.unlink(missing_ok=True)
    procs = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], start_new_session=True, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 120
        while not sched_file.exists():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError("the dask scheduler did not start within 120 s")
            time.sleep(0.1)
        time.sleep(0.1)  # the file is written whole, but give its writer the moment to close it
        address = json.loads(sched_file.read_text())["address"]
        for n in range(workers):
            procs.append(subprocess.Popen([dask_cli, "worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                           "--no-dashboard", "--name", f"bench-{n}", "--local-directory",
                                           str(folder / f"worker-{n}")], start_new_session=True, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        # each `dask worker` is a nanny; the worker is the process it started
        pids = [child.pid for nanny in procs[1:] for child in psutil.Process(nanny.pid).children()
                if "resource_tracker" not in " ".join(child.cmdline())]
        yield address, pids
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


class Runs:
    """The samples: one command over one generated run with one executor, in a fresh interpreter."""

    def __init__(self, tmp: Path, workers: int, timeout: float, dask_cli: str | None) -> None:
        self.tmp = tmp
        self.workers = workers
        self.timeout = timeout
        self.dask_cli = dask_cli
        self.hashes: dict[str, list[str]] = {}
        # every temporary file of the commands (trace's spill folder, Dask's scratch) inside ours
        self.env = {"TMPDIR": str(tmp / "scratch")}
        (tmp / "scratch").mkdir(exist_ok=True)
        config = tmp / "dask-cluster.yaml"
        config.write_text(cluster_config(), encoding="utf-8")
        self.cluster_env = {**{k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}, **self.env,
                            "DASK_CONFIG": str(config)}

    def tool(self, command: str, run: Path, ranks: int, executor: str) -> Callable[[], Sample | str]:
        failure: list[str] = []
        key = f"{command} {ranks} ranks: {executor}"

        def sample() -> Sample | str:
            out = self.tmp / "outputs" / f"{command}-{ranks}-{executor}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            result: Sample | str
            if executor == "cluster":
                if self.dask_cli is None:
                    return "no dask command line beside this Python"
                with real_cluster(self.dask_cli, self.workers, self.tmp / "cluster", self.cluster_env) as (address,
                                                                                                          pids):
                    _settle_disk()
                    result = self._child(command, run, out, address, None, failure)
                    if isinstance(result, dict):
                        result["workers_mb"] = [_vmhwm(pid) for pid in pids]
            else:
                _settle_disk()
                result = self._child(command, run, out, executor, self.workers, failure)
            if isinstance(result, dict):
                result["sha256"] = _sha256(out / {"ingest": "events/metrics_events.jsonl", "trace": "trace.json",
                                                  "stragglers": "stdout.txt"}[command])
                self.hashes.setdefault(key, []).append(result["sha256"])
            shutil.rmtree(out, ignore_errors=True)  # a 1,000-rank trace is ~2 GB
            print(f"bench_scale: {key}: "
                  + (json.dumps({k: v for k, v in result.items() if k != "sha256"}) if isinstance(result, dict)
                     else result), file=sys.stderr, flush=True)
            return result

        return sample

    def _child(self, command: str, run: Path, out: Path, executor: str, workers: int | None,
               failure: list[str]) -> Sample | str:
        pool = ["--workers", str(workers)] if workers else []
        if command == "ingest":
            prog, argv = "myutils-profile", ["ingest", "--config", str(run / "ingest.json"), "--output-dir",
                                             str(out / "events"), "--executor", executor, *pool, "-q"]
        elif command == "trace":
            traces = sorted((run / "traces").glob("rank_*.json.gz"), key=lambda p: int(p.name.split("_")[1][:-8]))
            prog, argv = "myutils-profile", ["trace", "--events", str(run / "csv"),
                                             *(a for t in traces for a in ("--torch-trace", str(t))), "--output",
                                             str(out / "trace.json"), "--auto-align-ranks", "--executor", executor,
                                             *pool, "-q"]
        else:
            prog, argv = "myutils", ["stragglers", str(run / "csv"), "--json", "--executor", executor, *pool]
        spec = out / "spec.json"
        spec.write_text(json.dumps({"prog": prog, "argv": argv, "stdout": str(out / "stdout.txt"), "env": self.env}),
                        encoding="utf-8")
        # a failure is kept per tool (child_sample): one broken executor costs one run, not one per round
        got: Sample | str = child_sample(CHILD, [str(spec)], timeout=self.timeout, cwd=self.tmp, failure=failure)
        return got


def _settle_disk() -> None:
    """Write out what earlier samples left dirty before a sample starts (outside its timed part).

    A 1,000-rank ``trace`` writes ~2 GB of output and ~1.5 GB of spill files, which the kernel
    writes back during the *next* sample. In this bench's fixed order the pool's sample follows a
    100-rank one and each Dask sample a 1,000-rank one: with the same code, Dask took 1.19x and
    1.21x the pool's time in two rounds without this, 1.02-1.08x in three rounds with it.
    """
    if hasattr(os, "sync"):
        os.sync()


def _figures(report: Report, samples: dict[str, list[Sample | str]], runs: Runs, counts: list[int],
             commands: list[str], executors: list[str]) -> None:
    good: dict[str, list[Sample]] = {}
    for name, got in samples.items():
        errors = [s for s in got if isinstance(s, str)]
        if errors:
            report.skip(name, f"failed: {errors[0]}")
        else:
            good[name] = [s for s in got if isinstance(s, dict)]
    low, high = min(counts), max(counts)
    for command in commands:
        for n in counts:
            anchor = f"{command} {n} ranks: process"
            reference = runs.hashes.get(anchor, [None])[0]
            for executor in executors:
                key = f"{command} {n} ranks: {executor}"
                if key not in good:
                    continue
                is_anchor = executor == "process"
                timed = f"{anchor} time" if not is_anchor and anchor in good else None
                goals = [at_most_times(1.15, "issue 22: Dask within 15 % of the pool")] \
                    if timed and n == high and high > low else []
                report.add(f"{key} time", [s["s"] for s in good[key]], "s", anchor=timed, goals=goals,
                           note="anchor" if is_anchor else "")
                report.add(f"{key} main-process peak", [s["main_mb"] for s in good[key]], "MB")
                report.add(f"{key} worker peak", [max(s["workers_mb"] or [0.0]) for s in good[key]], "MB",
                           note=f"largest of {statistics.median(len(s['workers_mb']) for s in good[key]):.0f} "
                                "worker processes")
                report.label(f"{key} worker peaks (MB)",
                             "; ".join(", ".join(f"{v:.0f}" for v in sorted(s["workers_mb"])) for s in good[key]))
                if reference is not None and not is_anchor:
                    unlike = sum(h != reference for h in runs.hashes.get(key, []))
                    report.add(f"{key} outputs unlike the pool's", [unlike], "", goals=[
                        at_most(0, "issue 22: results equal to the process pool's")],
                        note=f"{len(runs.hashes.get(key, []))} compared, sha256 {reference[:12]}")
        if high == low:
            continue
        for executor in executors:
            base, top = f"{command} {low} ranks: {executor}", f"{command} {high} ranks: {executor}"
            if base not in good or top not in good:
                continue
            for what, value in (("main-process peak", lambda s: s["main_mb"]),
                                ("worker peak", lambda s: max(s["workers_mb"] or [0.0]))):
                floor = statistics.median(value(s) for s in good[base])
                if floor <= 0:
                    report.skip(f"{command} {executor}: {what}, {high} / {low} ranks", "no worker process seen")
                    continue
                report.add(f"{command} {executor}: {what}, {high} / {low} ranks",
                           [value(s) / floor for s in good[top]], "x",
                           goals=[at_most(1.25, "issue 22: memory independent of the rank count")])


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    parser.add_argument("--ranks", default=None, help="rank counts, comma-separated (default 100,1000; quick 2,4)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of every executor (default 2)")
    parser.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated, of " + ", ".join(COMMANDS))
    parser.add_argument("--executors", default=",".join(EXECUTORS), help="comma-separated, of " + ", ".join(EXECUTORS))
    args = parser.parse_args(argv)
    commands = [c for c in args.commands.split(",") if c]
    executors = [e for e in args.executors.split(",") if e]
    bad = sorted(set(commands) - set(COMMANDS)) + sorted(set(executors) - set(EXECUTORS))
    if bad or "process" not in executors:
        print(f"bench_scale: {', '.join(bad) or '--executors'}: expected commands from {', '.join(COMMANDS)} and "
              f"executors from {', '.join(EXECUTORS)}, 'process' (the anchor) among them", file=sys.stderr)
        return 2
    require("my_utils.profiling", "bench_scale")
    require("my_utils.distributed", "bench_scale")
    report = Report("bench_scale", "ingest, trace, stragglers over many generated ranks: process pool, local Dask "
                    "cluster, real Dask cluster", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "myutils-distributed", "distributed", "psutil"))
    report.label("fixtures", where(args.fixtures))
    counts = sorted({int(c) for c in (args.ranks or ("2,4" if args.quick else "100,1000")).split(",")})
    rounds = args.samples or (1 if args.quick else 2)
    if find_spec("distributed") is None:
        for executor in set(executors) - {"process"}:
            report.skip(f"executor {executor}", "dask.distributed not installed (pip install "
                                                "'myutils-profiling[dask]' 'myutils-distributed[dask]')")
        executors = ["process"]
    dask_cli = shutil.which("dask", path=str(Path(sys.executable).parent))
    if "cluster" in executors and dask_cli is None:
        report.skip("executor cluster", f"no dask command line beside {sys.executable}")
        executors.remove("cluster")
    with bench_tempdir("bench_scale_") as tmp:
        folders: dict[int, Path] = {}
        try:
            for n in counts:  # a quick run never touches bench/out
                folders[n] = scale_run(n, STEPS, tmp / f"scale_{n}" if args.quick else None, args.fixtures)
        except Unavailable as exc:
            report.skip("generated runs", str(exc))
            report.finish(args.json)
            return 0
        report.label("inputs", ", ".join(f"{n} ranks: {folders[n]}" for n in counts)
                     + f" ({STEPS} steps; a 4,855-event real trace per rank)")
        report.label("workers", f"{args.workers} for every executor; the cluster: dask scheduler + {args.workers} "
                                "dask worker --nthreads 1 (nannies), started for each sample, joined by address")
        runs = Runs(tmp, args.workers, 300.0 if args.quick else 3600.0, dask_cli)
        tools = {f"{command} {n} ranks: {executor}": runs.tool(command, folders[n], n, executor)
                 for n in counts for command in commands for executor in executors}
        load = os.getloadavg()
        samples = interleave(tools, rounds)
        report.label("load average", f"{load[0]:.1f} before, {os.getloadavg()[0]:.1f} after (1 min)")
        _figures(report, samples, runs, counts, commands, executors)
    report.note("each sample is a fresh interpreter running the command (imports, pool or cluster start-up "
                "included; the real cluster is started before the timed part)")
    report.note("peaks: VmHWM (the kernel's high-water mark of resident memory) of each process; a worker's "
                "is read every 50 ms while it runs, so a rise in its last 50 ms can be missed")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
