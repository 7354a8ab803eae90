"""Start-up cost of ``myutils --help`` against ``python -c pass``, measured in the same run.

    python bench/bench_cli_startup.py [--quick] [--samples N] [--json OUT]

Goal (issue 2): ``myutils --help`` < 150 ms above a bare interpreter start. Every command
runs once per round, rounds interleaved, after one warm-up round for the file cache; the
difference to the anchor is taken per round, then the median. The ``myutils`` script used is
the one beside this interpreter (the venv's); when there is none, the bench says so and runs
``python -m my_utils.core --help`` instead, which is what it then reports.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _report import Report, at_most_above, common_args, interleave, interpreter_label, require, versions_label

DEFAULT_SAMPLES, QUICK_SAMPLES = 15, 3


def _myutils_command() -> tuple[list[str], str]:
    """The ``myutils`` command to time, and a label saying which one it is and why."""
    beside = Path(sys.executable).parent / "myutils"
    if beside.is_file():
        return [str(beside)], f"myutils = {beside} (beside the interpreter)"
    on_path = shutil.which("myutils")
    if on_path:
        return [on_path], f"myutils = {on_path} (from PATH: not this interpreter's; check it is the same install)"
    return ([sys.executable, "-m", "my_utils.core"],
            "myutils = python -m my_utils.core (no myutils script beside the interpreter or on PATH)")


def _timer(cmd: list[str]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {last[:160]}")
        return elapsed * 1e3
    return run


def main(argv: list[str]) -> int:
    args = common_args(__doc__ or "").parse_args(argv)
    require("my_utils.core", "bench_cli_startup")
    rounds = args.samples or (QUICK_SAMPLES if args.quick else DEFAULT_SAMPLES)
    myutils, which = _myutils_command()
    shown = "myutils" if myutils[0].endswith("myutils") else "python -m my_utils.core"
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import my_utils.core'": [sys.executable, "-c", "import my_utils.core"],
        f"{shown} --help": [*myutils, "--help"],
        f"{shown} plugins list": [*myutils, "plugins", "list"],
    }
    report = Report("bench_cli_startup", "CLI start-up against a bare interpreter", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("ran", which)
    report.label("versions", versions_label("myutils-core", "typer", "click"))
    try:
        samples = interleave({name: _timer(cmd) for name, cmd in commands.items()}, rounds, warmup=1)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        report.skip("all commands", f"a command failed, no figures: {exc}")
        report.finish(args.json)
        return 0
    anchor = "python -c pass"
    report.add(anchor, samples[anchor], "ms", note="anchor")
    for name in list(commands)[1:]:
        goals = [at_most_above(150, "issue 2")] if name.endswith("--help") else []
        report.add(name, samples[name], "ms", anchor=anchor, goals=goals)
    report.note("time per command includes interpreter start; the goal is judged on the per-round difference")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
