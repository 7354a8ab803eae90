"""Every Python example in the package README runs in a fresh interpreter, in a scratch folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _run(code: str, cwd: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PROFILE_TASK_TYPES")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


def test_readme_has_two_examples() -> None:
    assert len(BLOCKS) == 2


def test_profiler_wrapper_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[0], tmp_path) == ["mt_trace.json mt_rank_0.log 10"]
    assert (tmp_path / "logs" / "profiler" / "mt_rank_0.log").stat().st_size > 0


def test_dit_profiler_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[1], tmp_path) == [str(sorted([
        "aten_linear_rank0_analysis.json", "prof_summary_rank0.txt", "tile_encoder_0_rank0_analysis.json",
        "tile_encoder_1_rank0_analysis.json", "torch_prof_rank0.json"]))]
