"""Kineto trace ingestion: my_utils' streaming provider vs Holistic Trace Analysis (anchor).

    python bench/bench_kineto.py [--big PATH] [--skip-big]

Each measurement runs in its own subprocess so peak RSS (ru_maxrss) is that of one parse.
Inputs: the 54 MB / 216k-event real trace (shared fixtures), and the generated 433 MB /
2.16M-event trace (bench/make_big_trace.py, created on first run under bench/out/).
Goals from issue 5: real < 1.5 s and < 100 MB; big < 10 s and < 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REAL = HERE.parent.parent / "shared/fixtures/real/kineto/hta/df_index_resolver.json.gz"
BIG = HERE / "out" / "big_rank_1.json"

OURS = """
import json, resource, sys, time
t = time.perf_counter()
from my_utils.profiling.providers.kineto import parse_trace_file
events = parse_trace_file(sys.argv[1])
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "events": len(events)}))
"""

HTA = """
import json, logging, resource, sys, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
n = sum(len(tr) for tr in analysis.t.traces.values())
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "events": n}))
"""


def _run(code: str, arg: str, timeout: float = 900) -> dict | str:
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return f"failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:120]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _hta_available() -> bool:
    try:
        import hta  # noqa: F401
    except ImportError:
        return False
    return True


def _hta(trace: Path) -> dict | str:
    with tempfile.TemporaryDirectory() as tmp:
        # HTA reads a folder of rank files; a link keeps the input where it is
        os.symlink(trace.resolve(), Path(tmp) / trace.name)
        return _run(HTA, tmp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=Path, default=BIG)
    ap.add_argument("--skip-big", action="store_true")
    a = ap.parse_args()
    inputs = [("real 54 MB / 216k events", REAL, (1.5, 100))]
    if not a.skip_big:
        if not a.big.exists():
            subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), "--out", str(a.big)], check=True)
        inputs.append((f"generated {a.big.stat().st_size / 1e6:.0f} MB", a.big, (10.0, 300)))
    have_hta = _hta_available()
    if not have_hta:
        print("anchor holistictraceanalysis not installed")
    print(f"{'input':28} {'tool':10} {'time s':>8} {'peak MB':>8} {'goal':>14} {'time vs HTA':>12} {'RSS vs HTA':>11}")
    for label, path, (goal_s, goal_mb) in inputs:
        ours = _run(OURS, str(path))
        anchor = _hta(path) if have_hta else "not installed"
        for tool, res in (("my_utils", ours), ("HTA", anchor)):
            if isinstance(res, str):
                print(f"{label:28} {tool:10} {res}")
                continue
            goal = f"<{goal_s}s <{goal_mb}MB" if tool == "my_utils" else ""
            ratio_t = ratio_m = ""
            if tool == "my_utils" and isinstance(anchor, dict):
                ratio_t = f"{anchor['s'] / res['s']:.1f}x faster"
                ratio_m = f"{anchor['rss_mb'] / res['rss_mb']:.1f}x less"
            print(f"{label:28} {tool:10} {res['s']:8.2f} {res['rss_mb']:8.0f} {goal:>14} {ratio_t:>12} {ratio_m:>11}")
    if shutil.which("nproc"):
        print(f"(cpus: {os.cpu_count()}; python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
