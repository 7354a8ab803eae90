"""Every Python example in the package README runs (in a fresh interpreter, in a scratch folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) == 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if index == 0:
        # no tool attached here: the no-op path, and the reason
        assert proc.stdout.startswith("DormantNvtxLabeler False no NVTX tool is attached")
    if index == 1:
        # the loader's iterator once, then the optimizer after each of the two batches; originals back
        assert proc.stdout.splitlines() == ["0 ['loader.iter', 'optimizer.step', 'optimizer.step']", "True"]
    if index == 2:
        assert "iteration=5, microbatch=0" in proc.stdout and "iteration=5, microbatch=3" in proc.stdout
    if index == 3:
        names = proc.stdout.strip()
        assert names == ("['trace_rank0_steps26-27_anomaly_step25.pt.trace.json.gz', "
                         "'trace_rank0_steps6-7_now.pt.trace.json.gz']")
    if index == 4:
        assert proc.stdout.splitlines() == [
            "VLLM_WORKER_MULTIPROC_METHOD=spawn nsys profile --trace=cuda,nvtx,osrt --output=vllm_%p "
            "--force-overwrite=true --capture-range=none --cuda-graph-trace=node --trace-fork-before-exec=true "
            "-- vllm serve my-model",
            "2024.7 False ['--pytorch=autograd-nvtx'] []", "2026.2 True [] []"]
