"""Run every ``bench/bench_*.py`` in its own interpreter, then list every goal with met/missed.

    python bench/run_all.py                  # all benches, full size: what a reviewer reruns
    python bench/run_all.py timer nvtx       # only bench_timer.py and bench_nvtx.py
    python bench/run_all.py --quick          # every bench in seconds (a smoke run)
    python bench/run_all.py --json all.json  # also every figure, goal and verdict as JSON

Each bench prints its own figures beside their goals; this script adds what ran (interpreter,
commit, load average before and after: read the figures of a busy machine as ratios to the
anchors measured in the same run) and a closing table of every goal of every bench.
Missed goals do not fail the run; a bench that crashes does (exit 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _report import common_args, interpreter_label, write_json
from _temp import bench_tempdir

HERE = Path(__file__).resolve().parent


def _commit() -> str:
    """The commit the benches ran at, ``+dirty`` when the tree has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git not available)"
    return (head or "unknown (not a git checkout)") + ("+dirty" if dirty else "")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min)"


def _takes_json(script: Path) -> bool:
    """Whether a bench takes ``--json`` (those built on ``_report.common_args`` do)."""
    text = script.read_text(encoding="utf-8")
    return "common_args(" in text or '"--json"' in text


def _summary(results: list[dict[str, Any]]) -> list[str]:
    rows: list[tuple[str, str, str, str, str]] = []
    for res in results:
        for fig in res["figures"]:
            for goal in fig["goals"]:
                verdict = "not judged" if goal["met"] is None else ("met" if goal["met"] else "MISSED")
                value = "-" if goal["value"] is None else f"{goal['value']:.4g}"
                rows.append((res["bench"], fig["name"], goal["goal"], value, verdict))
        for skip in res["skipped"]:
            rows.append((res["bench"], skip["name"], "-", "-", f"skipped: {skip['reason']}"))
    if not rows:
        return ["(no goals reported)"]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"{'bench':<{widths[0]}}  {'figure':<{widths[1]}}  {'goal':<{widths[2]}}  "
             f"{'median':>{widths[3]}}  verdict"]
    lines += [f"{b:<{widths[0]}}  {f:<{widths[1]}}  {g:<{widths[2]}}  {v:>{widths[3]}}  {x}"
              for b, f, g, v, x in rows]
    met = sum(1 for r in rows if r[4] == "met")
    missed = sum(1 for r in rows if r[4] == "MISSED")
    skipped = sum(1 for r in rows if r[4].startswith("skipped"))
    lines.append(f"{met} goals met, {missed} missed, {skipped} figures skipped")
    return lines


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("names", nargs="*", help="benches to run by name (timer, nvtx, kineto, cli_startup, trace, ...)")
    args = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        known = {s.stem.removeprefix("bench_") for s in scripts}
        unknown = sorted(set(args.names) - known)
        if unknown:
            print(f"run_all: no bench named {', '.join(unknown)}; choose from {', '.join(sorted(known))}",
                  file=sys.stderr)
            return 2
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in args.names]
    started = time.time()
    print(f"run_all: {interpreter_label()}\nrun_all: commit {_commit()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, load average {_load()}"
          + (" [QUICK smoke run]" if args.quick else ""), flush=True)
    failed: list[str] = []
    results: list[dict[str, Any]] = []
    without_json: list[str] = []
    with bench_tempdir("bench_run_all_") as tmp:
        for script in scripts:
            print(f"\n=== {script.name} ===", flush=True)
            cmd = [sys.executable, str(script)]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--samples", str(args.samples)] if args.samples else []
            out = tmp / f"{script.stem}.json"
            if _takes_json(script):
                cmd += ["--json", str(out)]
            t0 = time.perf_counter()
            code = subprocess.run(cmd).returncode
            print(f"({script.name}: exit {code}, {time.perf_counter() - t0:.0f} s)", flush=True)
            if code != 0:
                failed.append(f"{script.name} (exit {code})")
            if out.is_file():
                results.append(json.loads(out.read_text(encoding="utf-8")))
            elif code == 0:
                without_json.append(script.name)
    print(f"\n=== every goal (load average now {_load()}, {time.time() - started:.0f} s in all) ===")
    print("\n".join(_summary(results)))
    if without_json:
        print(f"no JSON summary from {', '.join(without_json)}: its goals are only in its own output above")
    if failed:
        print(f"failed: {', '.join(failed)}")
    if args.json is not None:
        write_json(args.json, {"commit": _commit(), "interpreter": interpreter_label(), "started": started,
                               "quick": args.quick, "benches": results, "failed": failed,
                               "without_json": without_json})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
