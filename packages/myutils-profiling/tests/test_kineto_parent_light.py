"""The parent process of a many-rank Kineto analysis merges rows only: it never imports numpy.

Each worker imports numpy for its rank; the parent holding it too cost ~16 MB of the process
tree's peak (8 ranks on 2 workers: 37 of ~185 MB), which the memory goal of issue 20 counts.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from my_utils.core.lazy import lazy_module

CHILD = """
import json, sys
from my_utils.profiling.kineto import analyze_traces
a = analyze_traces(sys.argv[1], executor="process")
print(json.dumps({"numpy": "numpy" in sys.modules, "ranks": list(a.ranks),
                  "tables": sorted(a.tables), "launches": sum(r.launches for r in a.launch)}))
"""


def test_many_ranks_parent_never_imports_numpy(real_fixtures: Any, tmp_path: Path) -> None:
    src = real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    for r in range(2):
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": r, "world_size": 2}
        (tmp_path / f"trace_rank_{r}.json").write_text(json.dumps(doc), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ranks"] == [0, 1]
    assert got["launches"] > 0 and "critical_path" in got["tables"]  # the workers did the numpy work
    assert got["numpy"] is False


def test_lazy_module_imports_on_first_use_and_steps_aside() -> None:
    """The stand-in imports its module on first attribute access and puts the module in its owner's globals."""
    owner = sys.modules[__name__]
    stand_in = lazy_module("colorsys", __name__, "_colorsys_for_test")
    owner._colorsys_for_test = stand_in  # type: ignore[attr-defined]
    try:
        assert "imported on first use" in repr(stand_in)
        assert stand_in.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
        import colorsys

        assert owner._colorsys_for_test is colorsys  # type: ignore[attr-defined]
    finally:
        del owner._colorsys_for_test  # type: ignore[attr-defined]
