"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_collector_example_runs(tmp_path: Path) -> None:
    block = BLOCKS[0]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["20", "True"]  # every step's region, collected exactly once
    assert (tmp_path / "profiling_results" / "metrics_events.jsonl").is_file()


def test_open_run_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in BLOCKS if "open_run" in b]
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kinds, shown = proc.stdout.splitlines()
    # the shipped data folder: a Kineto trace, a MyTimer CSV, and a table CSV analyze names but does not read
    assert kinds == "['kineto_trace', 'profile_csv', 'unknown']"
    assert shown == "Figure True"
    assert len(BLOCKS) == 2
