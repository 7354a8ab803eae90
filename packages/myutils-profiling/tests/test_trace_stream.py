"""The trace stream's batch path (orjson over whole seams) gives exactly the event-by-event result."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.read import stream as trace_stream
from my_utils.profiling.kineto.read.stream import TraceStream

pytest.importorskip("orjson", reason="the batch path needs orjson (a dependency of myutils-profiling)")


def _tricky_events(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(n):
        ev: dict[str, Any] = {"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 2,
                              "ts": 1_700_000_000_000 + i, "dur": i % 13}
        if i % 97 == 0:
            ev["name"] = 'seam inside a string: }, {"not": "an event"}'
        if i % 101 == 0:
            ev["args"] = {"inputs": [{"shape": [2, 3]}, {"shape": [4]}], "Ev Idx": i}  # a seam inside an event
        events.append(ev)
    return events


def _write(path: Path, events: list[dict[str, Any]], *, indent: int | None, nan_at: int | None = None) -> Path:
    doc = {"schemaVersion": 1, "traceEvents": events, "deviceProperties": [{"id": 0}, {"id": 1}],
           "distributedInfo": {"rank": 3}}
    text = json.dumps(doc, indent=indent)
    if nan_at is not None:  # a NaN literal: valid for Python's json, refused by orjson
        text = text.replace(f'"dur": {nan_at % 13}', "\"dur\": NaN", 1)
    path.write_text(text)
    return path


def _read(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    stream = TraceStream(path)
    events = list(stream.events())
    return events, stream.metadata


@pytest.mark.parametrize("indent", [None, 2])
def test_batches_equal_event_by_event(tmp_path: Path, indent: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "t.json", _tricky_events(30_000), indent=indent)
    assert path.stat().st_size > 2 * trace_stream._CHUNK  # several chunks, many batches
    real_batch = TraceStream._batch
    batched_events: list[int] = []

    def spy(self: TraceStream) -> list[Any] | None:
        out = real_batch(self)
        batched_events.append(len(out) if out is not None else 0)
        return out

    monkeypatch.setattr(TraceStream, "_batch", spy)
    batched = _read(path)
    assert sum(batched_events) > 20_000  # most events really went through the batch path
    monkeypatch.undo()
    monkeypatch.setattr(trace_stream, "_orjson", None)
    assert batched == _read(path)
    assert batched[0] == json.loads(path.read_text())["traceEvents"]
    assert batched[1]["distributedInfo"] == {"rank": 3} and len(batched[1]["deviceProperties"]) == 2


def test_orjson_refusal_falls_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "nan.json", _tricky_events(20_000), indent=None, nan_at=15_000)
    events, _ = _read(path)
    assert len(events) == 20_000
    assert sum(1 for e in events if e["dur"] != e["dur"]) == 1  # the NaN survived, via the fallback


def test_truncated_large_gzip_names_the_file(tmp_path: Path) -> None:
    raw = _write(tmp_path / "t.json", _tricky_events(20_000), indent=2).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(raw[: len(raw) * 2 // 3]))
    with pytest.raises(InputError) as info:
        _read(cut)
    assert str(info.value).startswith(f"{cut}:") and "truncated" in str(info.value)


def test_non_object_item_inside_a_batch(tmp_path: Path) -> None:
    events: list[Any] = _tricky_events(10_000)
    events[6_000] = [1, 2]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(InputError, match=r"traceEvents\[6000\] to be an object; found list"):
        _read(path)
