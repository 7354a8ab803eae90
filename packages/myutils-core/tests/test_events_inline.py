"""The readers' inline path (common lines checked and built in the loop) accepts and refuses what the checked path does.

``iter_events`` and ``iter_event_rows`` test the common line (the 11 known fields, each of
its exact usual type) in the loop and build the event by filling its slots; every other line
goes through ``_fast_row``/``_exact``/``from_dict``. Here full lines with fields of any JSON
type are read both ways, with orjson and with the stdlib, and must give the same events,
rows and errors as ``MetricEvent.from_dict`` of the stdlib's reading of each line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core import events as events_module
from my_utils.core.errors import InputError
from my_utils.core.events import MetricEvent, iter_event_rows, iter_events, trusted_event

_scalar = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=4)
_any = _scalar | st.lists(_scalar, max_size=2) | st.dictionaries(st.text(max_size=3), _scalar, max_size=2)
# every known field present (the inline path's shape), each of a type the reader accepts...
_valid = st.fixed_dictionaries({
    "schema_version": st.integers(1, 2), "run_id": st.text(max_size=4), "source": st.sampled_from(["mytimer", ""]),
    "rank": st.none() | st.integers(0, 8), "step": st.none() | st.integers(0, 99),
    "name": st.sampled_from(["step_time", "x"]), "kind": st.sampled_from(["duration", "gauge", ""]),
    "value": st.floats(allow_nan=False) | st.integers(-(2**64), 2**64) | st.none(),
    "unit": st.sampled_from(["ms", ""]), "ts": st.none() | st.floats(0, 2e9) | st.integers(0, 2**31),
    "attrs": st.dictionaries(st.text(max_size=3), _any, max_size=3),
}, optional={"future": _any})
_KEYS = ("schema_version", "run_id", "source", "rank", "step", "name", "kind", "value", "unit", "ts", "attrs")


@st.composite
def _line(draw: st.DrawFn) -> dict[str, Any]:
    """...then, one time in two, one field of any JSON type, or missing."""
    row = draw(_valid)
    key = draw(st.sampled_from([None, *_KEYS]))
    if key is not None and draw(st.booleans()):
        row[key] = draw(_any)
    elif key is not None:
        row.pop(key)
    return row


def _expected(line: str, where: str, lineno: int) -> MetricEvent | str:
    """What the checked reader gives for one line: the event, or the InputError's message."""
    try:
        return MetricEvent.from_dict(json.loads(line), where, f"line {lineno}")
    except InputError as exc:
        return str(exc)


def _same(a: MetricEvent, b: MetricEvent) -> bool:
    nan = math.isnan(a.value) and math.isnan(b.value)
    return (type(a) is type(b) is MetricEvent and type(a.value) is float and (nan or a.value == b.value)
            and dataclasses.replace(a, value=0.0) == dataclasses.replace(b, value=0.0)
            and all(type(getattr(a, f)) is type(getattr(b, f)) for f in ("rank", "step", "ts", "schema_version")))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_line(), min_size=1, max_size=6))
def test_full_lines_read_as_the_checked_reader_reads_them(tmp_path_factory: pytest.TempPathFactory,
                                                          batch: list[dict[str, Any]]) -> None:
    for name in ("orjson", "stdlib"):
        with pytest.MonkeyPatch.context() as mp:
            if name == "stdlib":
                mp.setattr(events_module, "_orjson", None)
                mp.setattr(events_module, "_loads", json.loads)
            path = tmp_path_factory.mktemp("e") / "e.jsonl"
            lines = [json.dumps(r) for r in batch]
            path.write_text("".join(line + "\n" for line in lines))
            for lineno, line in enumerate(lines, 1):
                want = _expected(line, str(path), lineno)
                one = path.with_name(f"one{lineno}.jsonl")
                one.write_text("\n" * (lineno - 1) + line + "\n")  # the same line number, blank lines before
                if isinstance(want, str):
                    with pytest.raises(InputError) as got:
                        list(iter_events(one))
                    assert str(got.value) == want.replace(str(path), str(one))
                    with pytest.raises(InputError) as got_rows:
                        list(iter_event_rows(one))
                    assert str(got_rows.value) == str(got.value)
                    continue
                (event,) = iter_events(one)
                assert _same(event, want), (name, line)
                (row,) = iter_event_rows(one)
                assert {**row, "value": 0} == {**want.to_dict(), "value": 0}
                assert type(row["value"]) is float and (row["value"] == want.value or math.isnan(want.value))


def test_inline_events_are_ordinary_frozen_events(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "e.jsonl"
    rows = [{"schema_version": 1, "run_id": "r", "source": "mytimer", "rank": 0, "step": s, "name": "fwd",
             "kind": "duration", "value": 1.5 + s, "unit": "ms", "ts": 1.7e9, "attrs": {"depth": 0}} for s in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = list(iter_events(path))
    assert [type(e) for e in got] == [MetricEvent] * 3
    assert got == [MetricEvent.from_dict(r) for r in rows]
    assert got[0].extra is not got[1].extra and got[0].extra == {}  # a fresh dict each, as the checked path gives
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].value = 2.0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(got[2])) == got[2]
    assert dataclasses.replace(got[1], step=9).step == 9 and dataclasses.asdict(got[0])["attrs"] == {"depth": 0}


def test_trusted_events_fill_every_field_of_the_dataclass() -> None:
    event = trusted_event("n", 1.0, "gauge", "", "", None, None, None, "", {})
    assert type(event) is MetricEvent and event == MetricEvent("n", 1.0)
    # a field added to MetricEvent but not filled here would be an unset slot: AttributeError on read
    assert {f.name: getattr(event, f.name) for f in dataclasses.fields(MetricEvent)} == dataclasses.asdict(event)
    assert events_module._EventSlots.__slots__ == MetricEvent.__slots__  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.name = "m"  # type: ignore[misc]
