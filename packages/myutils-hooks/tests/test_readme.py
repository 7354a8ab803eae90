"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) == 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "ENABLE_NVTX")}
    proc = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    if index == 0:
        assert lines[0].split() == ["module_name", "run_count"]
        assert sorted(line.split()[0] for line in lines[1:4]) == ["0", "1", "2"]
        assert all(line.split()[1] == "20" for line in lines[1:4])
        assert lines[4] == "cpu"
        assert (tmp_path / "module_profile.csv").read_text().startswith("module_name,mean_ms,")
    if index == 1:
        assert lines == ["False ['trace_rank0_steps3-5_model_forward.pt.trace.json.gz']"]
        assert [p.name for p in (tmp_path / "captures").iterdir()] == [
            "trace_rank0_steps3-5_model_forward.pt.trace.json.gz"]
    if index == 2:
        assert lines[:2] == ["run_a 3 None", "run_b 3 None"]
        module, kind, status, diff = lines[2].split()
        assert (module, kind, status) == ("1", "GELU", "diverges_here") and 0 < float(diff) < 1e-2
