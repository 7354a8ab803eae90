"""Rank order in the nsys timeline trace: every rank's process says its place (``process_sort_index``) and name.

chrome://tracing sorts processes by ``process_sort_index``; the Perfetto UI ignores it in JSON
and lists processes by activity (its ``dev.perfetto.ProcessThreadGroups`` plugin), so the name
must say the rank too (README, "Nsight Systems timelines").
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py

from my_utils.profiling.nsys.timeline import write_timeline


def test_each_rank_sorts_at_its_rank_and_is_named_by_it(real_fixtures: Any, tmp_path: Path) -> None:
    ring = H.ring_by_rank(real_fixtures)  # rank order: the PMI_RANK each export recorded, not the sorted names
    out = tmp_path / "t.json.gz"
    write_timeline([str(ring[0].parent)], out, compress=True)
    doc = json.loads(gzip.decompress(out.read_bytes()))
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    sort = {e["pid"]: e["args"]["sort_index"] for e in meta if e["name"] == "process_sort_index"}
    names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert sort == {i: i for i in range(6)}  # ranks 0..5 in order, by the launch environment here
    assert names == {i: f"rank {i} ({p.name})" for i, p in enumerate(ring)}
