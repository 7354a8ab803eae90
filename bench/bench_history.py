"""The run history: change points found in generated histories, and the speed of ``trend`` and ``gate``.

    python bench/bench_history.py [--quick] [--samples N] [--seeds N] [--json OUT]

**Detection** (issue 41): one generated history per seed, ``--runs`` runs (default 5,000) of a step
time with planted step changes every 40-150 runs, their sizes cycling 5%, 10%, 20% (up or down at
random). Noise as CI runs show it: Gaussian with a coefficient of variation drawn per seed from
1-2.5%, plus 1% of runs slowed by 5-30% (a noisy neighbour). No change is planted in the last 15
runs. A planted change is *recovered* when a change point lies within 3 runs of its start (each
change point matches one planted change); every other change point is a *false alarm*. Per seed:
the recall of the 5% (and 10%, 20%) changes and the false alarms per 1,000 runs; goals: 5% recall
>= 95%, <= 1 false alarm per 1,000 runs. The anchor is ``ruptures``' PELT (L2 cost, penalty
``2 σ² ln n`` with σ estimated from first differences), on the same series, when installed
(``pip install ruptures``): its recall, false alarms and time per series beside ours.

**Speed** (issue 41): a SQLite store of 100,000 runs (20 series: 10 workloads x 2 GPUs, 5,000 runs
each, 6 metrics per run; ``--quick``: 4,000), kept in ``bench/out/`` and remade when its size
differs. Timed as the commands a user runs, each in its own interpreter: ``history trend`` of one
metric of one series (5,000 points, change points, the page written) and ``history gate`` of the
newest run, against the start-up of ``myutils-profile history --help``; goals: trend <= 200 ms and
gate <= 300 ms above that start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _report import (
    Report,
    at_least,
    at_most,
    at_most_above,
    common_args,
    interleave,
    interpreter_label,
    require,
)
from _temp import bench_tempdir

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SIZES = (5.0, 10.0, 20.0)
TOLERANCE = 3


def generate(seed: int, n: int) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """A history of ``n`` runs with planted changes (start, size %) in realistic noise (module docstring)."""
    rng = np.random.default_rng(seed)
    level, levels, planted = 100.0, np.empty(n), []
    pos, k = int(rng.integers(40, 150)), 0
    levels[:] = level
    while pos < n - 15:
        size = SIZES[k % len(SIZES)]
        k += 1
        level *= 1 + float(rng.choice([-1.0, 1.0])) * size / 100
        levels[pos:] = level
        planted.append((pos, size))
        pos += int(rng.integers(40, 150))
    noise = rng.normal(0.0, rng.uniform(0.01, 0.025), n)
    slow = rng.random(n) < 0.01
    noise[slow] += rng.uniform(0.05, 0.3, int(slow.sum()))
    return levels * (1 + noise), planted


def score(found: list[int], planted: list[tuple[int, float]]) -> tuple[dict[float, tuple[int, int]], int]:
    """Per size (recovered, planted), and the false alarms."""
    free = sorted(found)
    hits: dict[float, list[int]] = {s: [0, 0] for s in SIZES}
    for start, size in planted:
        hits[size][1] += 1
        near = [f for f in free if abs(f - start) <= TOLERANCE]
        if near:
            free.remove(min(near, key=lambda f: abs(f - start)))
            hits[size][0] += 1
    return {s: (h[0], h[1]) for s, h in hits.items()}, len(free)


def ours(x: np.ndarray) -> list[int]:
    from my_utils.profiling.history.changepoints import change_points

    return [c.index for c in change_points(x)]


def pelt(x: np.ndarray) -> list[int]:
    import ruptures

    sigma = float(np.median(np.abs(np.diff(x)))) / (0.6745 * np.sqrt(2))
    return [int(b) for b in ruptures.Pelt(model="l2", min_size=5, jump=1).fit(x).predict(
        pen=2 * sigma ** 2 * np.log(len(x)))[:-1]]


def detection(report: Report, seeds: int, runs: int) -> None:
    detectors: dict[str, Callable[[np.ndarray], list[int]]] = {"history": ours}
    try:
        import ruptures

        detectors["ruptures PELT"] = pelt
        report.label("anchor", f"ruptures {ruptures.__version__} PELT (l2, pen = 2 sigma^2 ln n)")
    except ImportError:
        report.skip("ruptures PELT", "ruptures is not installed (pip install ruptures)")
    for name, detect in detectors.items():
        recall: dict[float, list[float]] = {s: [] for s in SIZES}
        alarms, seconds = [], []
        pooled = [0, 0, 0]  # 5% changes recovered, 5% changes planted, false alarms
        for seed in range(seeds):
            x, planted = generate(seed, runs)
            t0 = time.perf_counter()
            found = detect(x)
            seconds.append(time.perf_counter() - t0)
            hits, false = score(found, planted)
            for size, (got, total) in hits.items():
                recall[size].append(100.0 * got / total if total else 100.0)
            alarms.append(1000.0 * false / runs)
            pooled[0] += hits[5.0][0]
            pooled[1] += hits[5.0][1]
            pooled[2] += false
        goal = name == "history"
        report.add(f"{name}: recall of 5% changes within {TOLERANCE} runs", recall[5.0], "%",
                   goals=[at_least(95, "issue 41")] if goal else [])
        for size in SIZES[1:]:
            report.add(f"{name}: recall of {size:g}% changes", recall[size], "%")
        report.add(f"{name}: false alarms per 1,000 runs", alarms, "", goals=[at_most(1, "issue 41")] if goal else [])
        report.add(f"{name}: time per {runs:,}-run series", [s * 1e3 for s in seconds], "ms")
        report.note(f"{name}, all seeds pooled: {pooled[0]} of {pooled[1]} 5% changes recovered "
                    f"({100.0 * pooled[0] / max(1, pooled[1]):.1f}%), {pooled[2]} false alarm(s) in {seeds * runs:,} runs")


def build_store(path: Path, series_runs: int) -> None:
    """20 series x ``series_runs`` runs, 6 metrics each, with a few planted changes (added in one transaction each)."""
    from my_utils.profiling.history.context import RunContext
    from my_utils.profiling.history.store import RunStore
    from my_utils.profiling.model.report import REPORT_SCHEMA_VERSION, AnalysisReport, Fact

    rng = np.random.default_rng(0)
    with RunStore(path) as store:
        for w in range(10):
            for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"):
                x, _ = generate(w, series_runs)
                items = []
                for i, v in enumerate(x):
                    facts = [Fact("step_time.median", "s", float(v), "ms"),
                             Fact("step_time.p90", "s", float(v) * 1.05, "ms"),
                             Fact("gpu.idle", "i", float(10 + rng.normal(0, 0.5)), "%"),
                             Fact("gpu.busy", "b", float(90 + rng.normal(0, 0.5)), "%"),
                             Fact("comm.exposed", "c", float(5 + rng.normal(0, 0.2)), "ms"),
                             Fact("mfu", "m", float(40 + rng.normal(0, 0.5)), "%")]
                    report = AnalysisReport(REPORT_SCHEMA_VERSION, f"w{w}", {}, [], {"i": i, "gpu": gpu}, facts=facts)
                    items.append((report, RunContext(f"w{w}", 1.6e9 + 600 * i, git_commit=f"{i:08x}",
                                                     gpu_model=gpu, gpu_count=8, world_size=64), None))
                store.add_many(items)


def command() -> list[str]:
    script = Path(sys.executable).with_name("myutils-profile")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def speed(report: Report, samples: int, quick: bool) -> None:
    series_runs = 200 if quick else 5000
    with bench_tempdir("bench_history_") as tmp:
        # the full store is kept in bench/out for the next run; a quick run's lives in its temp folder
        store = (Path(tmp) if quick else OUT) / f"history_{20 * series_runs}.sqlite"
        if not store.exists():
            store.parent.mkdir(exist_ok=True)
            partial = store.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            t0 = time.perf_counter()
            build_store(partial, series_runs)
            for suffix in ("-wal", "-shm"):
                Path(str(partial) + suffix).unlink(missing_ok=True)
            partial.rename(store)
            report.note(f"built {store.name} ({20 * series_runs:,} runs) in {time.perf_counter() - t0:.0f} s")
        report.label("store", f"{store} ({store.stat().st_size / 2**20:.0f} MB, {20 * series_runs:,} runs)")
        cmd = command()
        report.label("command", " ".join(cmd))

        def run(*args: str) -> Callable[[], tuple[float, float]]:
            def timed() -> tuple[float, float]:
                t0 = time.perf_counter()
                proc = subprocess.Popen([*cmd, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                _, status, usage = os.wait4(proc.pid, 0)
                took = (time.perf_counter() - t0) * 1e3
                code = os.waitstatus_to_exitcode(status)
                if code not in (0, 2):
                    raise SystemExit(f"{' '.join(args)} failed ({code}): {proc.stderr.read()[-500:]!r}"
                                     if proc.stderr else f"{' '.join(args)} failed ({code})")
                if proc.stderr:
                    proc.stderr.close()
                return took, (usage.ru_utime + usage.ru_stime) * 1e3
            return timed

        where = ["--store", str(store), "--workload", "w3", "--hardware", "H100"]
        got = interleave({"start-up": run("history", "--help"),
                          "trend": run("history", "trend", "step_time.median", *where, "--output",
                                       str(Path(tmp) / "t.html")),
                          "gate": run("history", "gate", *where),
                          "work": lambda: in_process(where, Path(tmp) / "w.html")}, rounds=samples, warmup=1)
    anchor = "start-up (history --help)"
    report.add(anchor, [w for w, _ in got["start-up"]], "ms")
    report.add(f"history trend of one metric ({series_runs:,} runs of one series)", [w for w, _ in got["trend"]], "ms",
               anchor=anchor, goals=[at_most_above(200, "issue 41")])
    report.add("history gate of the newest run", [w for w, _ in got["gate"]], "ms", anchor=anchor,
               goals=[at_most_above(300, "issue 41")])
    cpu_anchor = "start-up CPU (user + system)"
    report.add(cpu_anchor, [c for _, c in got["start-up"]], "ms")
    report.add("history trend CPU", [c for _, c in got["trend"]], "ms", anchor=cpu_anchor,
               goals=[at_most_above(200, "issue 41, as CPU time: steadier on a busy machine")])
    report.add("history gate CPU", [c for _, c in got["gate"]], "ms", anchor=cpu_anchor,
               goals=[at_most_above(300, "issue 41, as CPU time")])
    report.add("trend work once its modules are imported (in one process)", [t for t, _ in got["work"]], "ms")
    report.add("gate work once its modules are imported (in one process)", [g for _, g in got["work"]], "ms")


IN_PROCESS = """
import sys, time
from my_utils.profiling.cli import main
import my_utils.profiling.history.judge, my_utils.profiling.history.pages, my_utils.profiling.history.text
import my_utils.profiling.history.trend_model, numpy, jinja2, markupsafe
def timed(args):
    sys.argv[1:] = args
    t0 = time.perf_counter()
    try:
        main()
    except SystemExit:
        pass
    return (time.perf_counter() - t0) * 1e3
trend = timed(sys.argv[1].split("\\x1f"))
gate = timed(sys.argv[2].split("\\x1f"))
print(trend, gate, file=sys.stderr)
"""


def in_process(where: list[str], page: Path) -> tuple[float, float]:
    """The trend's and the gate's time in an interpreter that imported every module they use (the work alone)."""
    trend = "\x1f".join(["history", "trend", "step_time.median", *where, "--output", str(page)])
    gate = "\x1f".join(["history", "gate", *where])
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS, trend, gate], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"in-process timing failed: {proc.stderr[-500:]}")
    t, g = proc.stderr.split()[-2:]
    return float(t), float(g)


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--seeds", type=int, default=None, help="generated histories (default 10; --quick 2)")
    parser.add_argument("--runs", type=int, default=None, help="runs per history (default 5,000; --quick 1,000)")
    args = parser.parse_args()
    require("my_utils.profiling.history", "bench_history")
    report = Report("bench_history", "run history: change points and the speed of trend and gate", quick=args.quick)
    report.label("interpreter", interpreter_label())
    detection(report, args.seeds or (2 if args.quick else 10), args.runs or (1000 if args.quick else 5000))
    speed(report, args.samples or (2 if args.quick else 7), args.quick)
    report.finish(args.json)


if __name__ == "__main__":
    main()
