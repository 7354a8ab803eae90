"""The critical path and counter tracks written back into a trace, loaded in the offline Perfetto UI.

HTA's ``overlay_critical_path_analysis`` output is meant for Perfetto / Chrome tracing; here the
offline Perfetto UI (headless Chromium) imports HTA's simple_add trace and our overlay of it: the
overlay adds no import error to the original's (Perfetto drops 7 overlapping events of the
original trace itself), adds exactly the 21 flows HTA's test counts for the default edge kinds,
each joining two slices, keeps the ``critical`` argument on the 159 events of the path, and the
queue-length and copy-bandwidth counters become counter tracks.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest
from perfetto_ui import PerfettoUI

from my_utils.profiling.kineto.overlay import write_overlay

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ALEXNET_FORWARD = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
FLOWS = "select count(*) as n from flow f join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id"


def test_overlay_draws_in_perfetto(perfetto: PerfettoUI, real_fixtures: Any, tmp_path: Path) -> None:
    src = real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz"
    original = tmp_path / "original.json"
    with gzip.open(src, "rb") as fh, open(original, "wb") as out:
        shutil.copyfileobj(fh, out)
    overlay = write_overlay(src, tmp_path / "overlaid.json", annotation=ALEXNET_FORWARD, instance=1)
    assert overlay.flows == 21 and overlay.marked_events == 159 and overlay.counter_events > 0
    with perfetto.open(original) as loaded:
        base_errors = loaded.import_errors()
        base_flows = loaded.query(FLOWS)[0]["n"]
    with perfetto.open(overlay.path) as loaded:
        errors = loaded.import_errors()
        flows = loaded.query(FLOWS)[0]["n"]
        marked = loaded.query("select count(*) as n from slice where extract_arg(arg_set_id, 'args.critical') = 1")
        counters = {r["name"] for r in loaded.query("select distinct name from counter_track")}
    assert errors == base_errors
    assert flows - base_flows == 21
    assert marked[0]["n"] == 159
    assert any("Queue Length" in (n or "") for n in counters), counters
