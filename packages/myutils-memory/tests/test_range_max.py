"""RangeMax against Python's max over the same slice, and the summary of a file of many overlapping regions."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.memory.range_max import BLOCK, RangeMax
from my_utils.memory.snapshot import REGIONS_KEY


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=5 * BLOCK), st.data())
def test_every_range_matches_max_of_the_slice(values: list[int], data: st.DataObject) -> None:
    rm = RangeMax(values)
    for _ in range(20):
        lo = data.draw(st.integers(0, len(values) - 1))
        hi = data.draw(st.integers(lo + 1, len(values)))
        assert rm.max(lo, hi) == max(values[lo:hi])


def test_block_edges() -> None:
    values = list(range(4 * BLOCK)) + list(range(4 * BLOCK, 0, -1))
    rm = RangeMax(values)
    for lo in (0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 4 * BLOCK - 1, 4 * BLOCK, 4 * BLOCK + 1):
        for hi in (lo + 1, lo + BLOCK, lo + 2 * BLOCK + 1, len(values)):
            if lo < hi <= len(values):
                assert rm.max(lo, hi) == max(values[lo:hi]), (lo, hi)


def test_many_overlapping_regions_are_summarised_in_bounded_time(tmp_path: Path) -> None:
    """40,000 regions spanning a 200,000-entry trace (8 MB): slicing the levels per region was 8e9 steps."""
    n, regions = 200_000, 40_000
    trace = [{"action": "alloc" if i % 2 == 0 else "free_completed", "addr": i // 2, "size": 1 + i % 7,
              "time_us": i} for i in range(n)]
    marked = [{"name": f"r{k}", "start_us": k % 10, "stop_us": n - k % 10} for k in range(regions)]
    path = tmp_path / "regions.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace], REGIONS_KEY: marked}, protocol=4))
    exe = Path(sys.executable).with_name("myutils")
    proc = subprocess.run([str(exe), "memory", "summarize", str(path)], capture_output=True, text=True, timeout=150,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("  r")]
    # every region spans allocations of 1..7 B, each freed at the next entry: the peak is 7 B
    assert len(lines) == regions and all(line.endswith("peak          7 B") for line in lines), lines[:3]
