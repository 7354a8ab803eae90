"""The raw memory timeline (``kineto.memory_timeline``): HTA's ``test_process_raw_events`` value on its file, a timeline
torch exports on this machine's CPU, and bad input."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.memory_timeline import (
    CATEGORIES,
    memory_timeline_rows,
    read_memory_timeline,
)


def test_htas_point_744(real_fixtures: Any) -> None:
    """HTA: 8 categories per point, and point 744 holds these bytes."""
    t = read_memory_timeline(real_fixtures / "kineto" / "hta/memory_analysis__memory_timeline.raw.gz")
    assert len(t.times) == len(t.sizes) and len(t.sizes[0]) == len(CATEGORIES) == 8
    assert list(t.sizes[744]) == [102440608.0, 102228128.0, 19395584.0, 0.0, 2618160128.0, 58417152.0, 41811968.0,
                                  25494440.0]
    assert min(t.times) > 0  # the pre-existing rows (time -1) moved to the first real time


def test_peaks_recomputed_from_the_rows(real_fixtures: Any) -> None:
    path = real_fixtures / "kineto" / "hta/memory_analysis__memory_timeline.raw.gz"
    with gzip.open(path, "rt") as fh:
        raw = json.load(fh)
    held = [0] * 8
    by_time: dict[int, list[int]] = {}
    for t, _action, nbytes, category in raw:
        held[category] += nbytes
        by_time[t] = list(held)  # the state after the last row at each time
    peak_total = max(sum(v) for v in by_time.values())
    rows = {r["category"]: r for r in memory_timeline_rows(read_memory_timeline(path))}
    assert rows["total"]["peak_bytes"] == peak_total
    assert rows["Activation"]["peak_bytes"] == max(v[4] for v in by_time.values())
    assert rows["total"]["final_bytes"] == sum(held)


def test_a_timeline_torch_exports_here(tmp_path: Path) -> None:
    """torch.profiler on this CPU: a small training step's timeline, read back: every category's final bytes are the
    sum of its rows, and the parameters are there."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            loss = model(torch.randn(32, 64)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
    out = tmp_path / "mem.raw.json.gz"
    with warnings.catch_warnings():  # torch 2.13 marks the export deprecated (it still writes the file)
        warnings.simplefilter("ignore", FutureWarning)
        prof.export_memory_timeline(str(out), device="cpu")
    with gzip.open(out, "rt") as fh:
        raw = json.load(fh)
    t = read_memory_timeline(out)
    assert t.rows == len(raw) > 0
    for i in range(len(CATEGORIES)):
        assert t.sizes[-1][i] == sum(r[2] for r in raw if r[3] == i)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert max(s[CATEGORIES.index("Parameter")] for s in t.sizes) >= params
    assert t.to_frame().shape == (len(t.times), 2 + len(CATEGORIES))


@pytest.mark.parametrize(("content", "message"), [
    ('{"a": 1}', "found a JSON dict"),
    ('[[1, 2, 3]]', "row 0"),
    ('[[1, 2, 3, 9]]', "row 0"),
    ("not json", "it is not JSON"),
])
def test_bad_input_names_the_file_and_row(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "bad.raw.json"
    p.write_text(content)
    with pytest.raises(InputError, match=message) as err:
        read_memory_timeline(p)
    assert "bad.raw.json" in str(err.value)
