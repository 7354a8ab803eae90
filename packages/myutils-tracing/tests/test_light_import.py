"""``import my_utils.tracing`` (and its plugin module) stays light: no torch, numpy, pandas, plotly, nvtx."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "numpy", "pandas", "plotly", "nvtx", "yaml")


def test_tracing_imports_stay_light() -> None:
    code = ("import sys\nimport my_utils.tracing, my_utils.tracing.plugin, my_utils.tracing.nvtx_utils\n"
            "import my_utils.tracing.capture\nfrom my_utils import create_labeler, ProfileManager\n"
            "create_labeler(enabled=False)\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
