"""The README's integration examples (``py`` blocks) run in fresh interpreters beside its ``profiling.yaml``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = README.read_text(encoding="utf-8").split("## Integrations", 1)[1].split("\n## ", 1)[0]
CONFIG = re.findall(r"```yaml\n(.*?)```", SECTION, flags=re.S)
EXAMPLES = re.findall(r"```py\n(.*?)```", SECTION, flags=re.S)
NEEDS = {0: None, 1: "lightning", 2: "transformers"}


def test_section_has_a_config_and_three_examples() -> None:
    assert len(CONFIG) == 1 and len(EXAMPLES) == 3


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=["plain", "lightning", "transformers"])
def test_integration_example_runs(index: int, tmp_path: Path) -> None:
    needed = NEEDS[index]
    if needed is not None:
        pytest.importorskip(needed, reason=f"the example needs {needed} (requirements-test.txt)")
    (tmp_path / "profiling.yaml").write_text(CONFIG[0], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "ENABLE_NVTX")}
    env["PYTHONWARNINGS"] = "ignore"  # the libraries' own deprecation notes are not the example's output
    proc = subprocess.run([sys.executable, "-c", EXAMPLES[index]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "captured 1 1"
    out = tmp_path / "prof_out"
    assert len(list((out / "captures").glob("*.pt.trace.json.gz"))) == 1
    assert (out / "profile_rank_0.csv").read_text(encoding="utf-8").count(",train_step,END,") == 3
    assert (out / "module_summary_rank0.csv").read_text(encoding="utf-8").startswith("module_name,mean_ms")
