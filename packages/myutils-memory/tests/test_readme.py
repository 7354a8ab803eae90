"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) == 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    if index == 4:
        pytest.importorskip("matplotlib", reason="the monitor example draws its PNG (the [charts] extra)")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "MYUTILS_OOM_RECORDER")}
    proc = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    if index == 0:
        assert lines == ["None"]
        assert "CUDA memory history is unavailable" in proc.stderr and list(tmp_path.iterdir()) == []
    elif index == 1:
        assert lines == ["True", "True"] and (tmp_path / "cpu_profile.pt").read_bytes()[:2] == b"PK"
        assert (tmp_path / "cpu_profile.pickle").read_bytes()[:2] == b"\x80\x04"
    elif index == 2:
        assert lines == ["12 12 11 ('train_step (me/train.py:12)',)", "[('churn', 'warning')]"]
    elif index == 3:
        assert lines == ["OutOfMemoryError True"]
        assert len(list((tmp_path / "oom_reports").iterdir())) == 1
    else:
        assert lines == ["True experiment_1_rank0_performance_profile.png", "['monitor/host_cpu_pct', "
                         "'monitor/host_rss_bytes']"]


def test_readme_analysis_block_runs_on_a_saved_snapshot(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    """The README's analysis block (the seed's torch.load line, then trace_plot) on a snapshotter .pt."""
    from my_utils.memory.snapshot import save_snapshot

    (block,) = [b for b in re.findall(r"```text\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
                if "torch.load(" in b]
    save_snapshot(tmp_path / "forward__20260303_120000__rank0.pt", hand_snapshot)
    proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "const local_files" in (tmp_path / "memory_viz.html").read_text(encoding="utf-8")
