"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _run(block: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", block], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_readme_has_its_examples() -> None:
    assert len(BLOCKS) == 3


def test_timer_csv_trace_example(tmp_path: Path) -> None:
    lines = _run(BLOCKS[0], tmp_path).splitlines()
    assert lines == ["18 iter START 0", "['backward', 'forward', 'iter']"]  # 3 steps x 3 regions x 2 rows
    assert (tmp_path / "logs" / "train" / "rank_0.log").is_file()


def test_listener_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[1], tmp_path).strip() == "7 [('iter', 0, None), ('data', 1, 0)]"


def test_metric_names_example(tmp_path: Path) -> None:
    lines = _run(BLOCKS[2], tmp_path).splitlines()
    assert lines[:3] == ["gpu.sm_active % 100.0", "gpu.sm_active", "gpu.utilization"]
    assert lines[3] == "['cupti', 'dcgm', 'dcgm_dmon', 'nsys', 'nvml']"
