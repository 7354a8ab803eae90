"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_collector_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in BLOCKS if "MetricsCollector" in b]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["20", "True"]  # every step's region, collected exactly once
    assert (tmp_path / "profiling_results" / "metrics_events.jsonl").is_file()


def test_operations_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in BLOCKS if "op_frames" in b]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tables, memory = proc.stdout.splitlines()[-2:]
    assert tables == str(sorted(["op_categories", "op_operators", "op_shapes", "op_coverage", "op_memory",
                                 "memory_peaks"]))
    assert memory == "True"  # the linear's output is allocated under aten::addmm
    done = subprocess.run([sys.executable, "replay.py", "--device", "cpu", "--iters", "2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and '"shape": [64, 256]' in done.stdout, done.stderr[-2000:]


def test_open_run_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in BLOCKS if "open_run" in b]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kinds, shown = proc.stdout.splitlines()
    # the shipped data folder: a Kineto trace, a MyTimer CSV, and a table CSV analyze names but does not read
    assert kinds == "['kineto_trace', 'profile_csv', 'unknown']"
    assert shown == "Figure True"


def test_every_block_is_run() -> None:
    assert len(BLOCKS) == 3  # the collector, open_run and the operation model: a new block needs its test
