"""One command for a run: ``myutils-profile analyze FOLDER`` against each file analysed alone, and ``open_run``.

    python bench/bench_run.py [--quick] [--samples N] [--json OUT] [--fixtures DIR]

Input: a run folder assembled in a temporary folder from the real fixtures (registry): two Kineto
ranks (the 54 MB control trace, rank 3, and its test trace, rank 1; ``--quick``: HTA's 2-rank
``trace_filter`` traces), six nsys exports (one NCCL ring of 6 ranks on 2 hosts), two NCCL logs,
a ``perf stat`` file and the MyTimer CSV the package ships. Every sample is a whole command in its
own process (start-up included), wall-clock seconds, taken in rounds, interleaved:

* ``analyze FOLDER``: the whole folder, each file read once, in one pool across files;
* ``analyze FILE`` for every file of the folder alone: per round, the slowest of them and the sum of
  them all divided by the cores (``os.sched_getaffinity``), whose larger is the anchor
  ``max(slowest, sum / cores)``;
* ``analyze --trace TRACE`` and a ``python -c`` that calls ``open_run(TRACE)`` on the 54 MB trace
  (``--quick``: the small one): the notebook API against the command.

Goals (issue 37): ``analyze FOLDER`` <= 1.2x the anchor; ``open_run`` <= 1.2x ``analyze --trace``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _fixtures import Unavailable, fetch, where
from _report import Report, at_most_times, common_args, interleave, interpreter_label, require, versions_label
from _temp import bench_tempdir

FULL_TRACES = ("kineto/hta/trace_diff__control.json.gz", "kineto/hta/trace_diff__test.json.gz")
QUICK_TRACES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")
OTHERS = (*(f"nsys/dsl_ring_6ranks/{n}.sqlite" for n in ("ault43.cscs.ch_485050", "ault43.cscs.ch_485052",
                                                          "ault43.cscs.ch_485055", "ault44.cscs.ch_739537",
                                                          "ault44.cscs.ch_739538", "ault44.cscs.ch_739541")),
          "nccl/dsl__example_2.502726.o.nccl2.22.3.log", "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log",
          "perf/two_sum__perf_stat.txt")
API = "import sys; from my_utils.profiling import open_run; open_run(sys.argv[1])"


def _profile_cli() -> list[str]:
    beside = Path(sys.executable).parent / "myutils-profile"
    return [str(beside)] if beside.is_file() else [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def _wall(cmd: list[str]) -> float:
    """Wall-clock seconds of one whole run of ``cmd`` (a failure raises, naming the command)."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {last[:200]}")
    return took


def _assemble(folder: Path, traces: tuple[str, ...], fixtures: Path | None) -> list[Path]:
    """The run folder's files, copied from the fixtures; ``Unavailable`` names the first one missing."""
    from my_utils.profiling.examples import example_config_path

    files = []
    for rel in (*traces, *OTHERS):
        target = folder / Path(rel).name
        shutil.copyfile(fetch(rel, fixtures), target)
        files.append(target)
    csv = folder / "profile_rank_0.csv"
    shutil.copyfile(example_config_path().parent / "data" / "profile_rank_0.csv", csv)
    return [*files, csv]


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_run")
    rounds = args.samples or (1 if args.quick else 3)
    cores = len(os.sched_getaffinity(0))
    report = Report("bench_run", "analyze FOLDER against each file alone; open_run against analyze --trace",
                    quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling"))
    report.label("fixtures", where(args.fixtures))
    report.label("cores", str(cores))
    cli = _profile_cli()
    report.label("command", " ".join(cli) + " analyze ...")
    traces = QUICK_TRACES if args.quick else FULL_TRACES
    with bench_tempdir("bench_run_") as tmp:
        run = tmp / "run"
        run.mkdir()
        try:
            files = _assemble(run, traces, args.fixtures)
        except Unavailable as exc:
            for name in ("analyze FOLDER", "max(slowest, sum/cores)", "open_run(trace)", "analyze --trace"):
                report.skip(name, str(exc))
            report.finish(args.json)
            return 0
        report.label("run folder", f"{len(files)} files: " + ", ".join(f.name for f in files))
        out = tmp / "out"

        def analyze(*paths: Path, trace: bool = False) -> Callable[[], float]:
            flags = [a for p in paths for a in ("--trace", str(p))] if trace else [str(p) for p in paths]
            return lambda: _wall([*cli, "analyze", *flags, "--output-dir", str(out), "-q", "--formats", "json"])

        alone = {f.name: analyze(f) for f in files}
        tools: dict[str, Callable[[], object]] = {"analyze FOLDER": analyze(run)}
        tools.update({f"alone {name}": sample for name, sample in alone.items()})
        big = run / Path(traces[0]).name
        tools["analyze --trace"] = analyze(big, trace=True)
        tools["open_run(trace)"] = lambda: _wall([sys.executable, "-c", API, str(big)])
        samples = interleave(tools, rounds=rounds)
    each = [[float(samples[f"alone {name}"][i]) for name in alone] for i in range(rounds)]  # type: ignore[arg-type]
    bound = [max(max(r), sum(r) / cores) for r in each]
    report.add("max(slowest, sum/cores)", bound, "s",
               note=f"slowest alone: {max(max(r) for r in each):.2f} s; sum: {min(sum(r) for r in each):.1f}–"
                    f"{max(sum(r) for r in each):.1f} s over {cores} cores")
    report.add("analyze FOLDER", [float(v) for v in samples["analyze FOLDER"]], "s",  # type: ignore[arg-type]
               anchor="max(slowest, sum/cores)", goals=[at_most_times(1.2, source="issue 37")])
    report.add("analyze --trace", [float(v) for v in samples["analyze --trace"]], "s")  # type: ignore[arg-type]
    report.add("open_run(trace)", [float(v) for v in samples["open_run(trace)"]], "s",  # type: ignore[arg-type]
               anchor="analyze --trace", goals=[at_most_times(1.2, source="issue 37")])
    report.note("each sample is a whole process, start-up included; the folder's anchor is computed per round")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
