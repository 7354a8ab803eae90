"""Metric events: schema, append-only writer, atomic writer, torn-line tolerant reader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import (
    SCHEMA_VERSION,
    EventLogWriter,
    MetricEvent,
    events_path,
    iter_events,
    read_events,
    write_events,
)

names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=10))
events = st.builds(
    MetricEvent,
    name=names,
    value=st.floats(allow_nan=False, allow_infinity=False),
    kind=st.sampled_from(["duration", "counter", "gauge", "ratio", "info"]),
    unit=st.sampled_from(["", "ms", "bytes", "%"]),
    source=st.text(max_size=10),
    rank=st.none() | st.integers(0, 4096),
    step=st.none() | st.integers(0, 10**9),
    ts=st.none() | st.floats(0, 2e9),
    run_id=st.text(max_size=8),
    attrs=st.dictionaries(st.text(max_size=8), json_scalars, max_size=4),
)


@given(st.lists(events, max_size=20))
@settings(max_examples=60, deadline=None)
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, batch: list[MetricEvent]) -> None:
    path = tmp_path_factory.mktemp("ev") / "metrics_events.jsonl"
    assert write_events(path, batch) == len(batch)
    assert read_events(path) == batch


def test_unknown_fields_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    record = {"schema_version": 2, "name": "x", "value": 1, "future_field": {"a": [1, 2]}, "attrs": {}}
    path.write_text(json.dumps(record) + "\n")
    (event,) = read_events(path)
    assert event.schema_version == 2 and event.extra == {"future_field": {"a": [1, 2]}}
    out = tmp_path / "again.jsonl"
    write_events(out, [event])
    assert json.loads(out.read_text())["future_field"] == {"a": [1, 2]}


def test_appender_flushes_each_batch(tmp_path: Path) -> None:
    path = events_path(tmp_path / "run")
    writer = EventLogWriter(path)
    writer.append([MetricEvent("a", 1.0), MetricEvent("b", 2.0)])
    # visible to a reader before close: a killed process keeps every finished batch
    assert [e.name for e in read_events(path)] == ["a", "b"]
    assert writer.append([]) == 0
    writer.append([MetricEvent("c", 3.0, step=7)])
    writer.close()
    with EventLogWriter(path) as again:
        again.append([MetricEvent("d", 4.0)])
    assert [(e.name, e.step) for e in read_events(path)] == [("a", None), ("b", None), ("c", 7), ("d", None)]


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    write_events(path, [MetricEvent("a", 1.0), MetricEvent("b", 2.0)])
    full = path.read_bytes()
    path.write_bytes(full + full.splitlines(keepends=True)[0][:17])
    assert [e.name for e in read_events(path)] == ["a", "b"]


def test_garbage_in_the_middle_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"name": "a", "value": 1}\nnot json\n{"name": "b", "value": 2}\n')
    with pytest.raises(InputError) as info:
        read_events(path)
    assert str(info.value) == f"{path}:line 2: expected one JSON object per line (a metric event)"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"value": 1}, "field 'name' must be a non-empty string, got None"),
        ({"name": "x", "value": "fast"}, "field 'value' must be a number or null, got 'fast'"),
        ({"name": "x", "value": 1, "rank": 1.5}, "field 'rank' must be an integer or null, got 1.5"),
        ({"name": "x", "value": 1, "attrs": [1]}, "field 'attrs' must be an object, got [1]"),
        ([1, 2], "expected a JSON object (a metric event), got list"),
    ],
)
def test_invalid_fields_are_named(tmp_path: Path, record: object, message: str) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError) as info:
        read_events(path)
    assert str(info.value) == f"{path}:line 1: {message}"


def test_null_value_reads_as_nan(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"name": "x", "value": null}\n')
    (event,) = read_events(path)
    assert math.isnan(event.value) and event.schema_version == SCHEMA_VERSION


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open the events file"):
        list(iter_events(tmp_path / "absent.jsonl"))


@given(st.binary(max_size=300))
@settings(max_examples=150, deadline=None)
def test_arbitrary_bytes_never_crash(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "e.jsonl"
    path.write_bytes(data)
    try:
        read_events(path)
    except InputError as exc:
        assert str(exc).startswith(f"{path}:")


class _Scalar:
    """A foreign number (like a numpy scalar): converts through __float__/__index__."""

    def __float__(self) -> float:
        return 2.5

    def __index__(self) -> int:
        return 3


@pytest.mark.parametrize(("field", "bad"), [
    ("unit", 5), ("kind", 7), ("rank", "x"), ("step", 1.5), ("rank", True), ("value", "3"),
    ("value", None), ("ts", "now"), ("source", None), ("run_id", 1), ("attrs", [1]), ("name", ""),
])
def test_fields_are_checked_when_built(tmp_path: Path, field: str, bad: object) -> None:
    kwargs: dict = {"name": "x", "value": 1.0, field: bad}
    with pytest.raises(UsageError, match=f"field '{field}' must be"):
        MetricEvent(**kwargs)
    # the same value in a file is refused by the reader: the two sides agree
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps({"name": "x", "value": 1.0, **({field: bad} if field != "value" or bad is not None
                                                              else {"value": "3"})}) + "\n")
    with pytest.raises(InputError):
        read_events(path)


def test_foreign_numbers_are_converted() -> None:
    event = MetricEvent(name="x", value=_Scalar(), rank=_Scalar(), step=_Scalar(), ts=_Scalar())  # type: ignore[arg-type]
    assert (event.value, event.rank, event.step, event.ts) == (2.5, 3, 3, 2.5)
    assert type(event.value) is float and type(event.rank) is int


def test_no_bare_nan_or_infinity_in_the_file(tmp_path: Path) -> None:
    evs = [
        MetricEvent(name="text", value=math.nan, kind="info", attrs={"text": "n/a", "raw": math.nan}),
        MetricEvent(name="big", value=math.inf, ts=math.nan, attrs={"nested": [1.0, -math.inf]}),
        MetricEvent(name="fine", value=1.5),
    ]
    path = tmp_path / "e.jsonl"
    write_events(path, evs)
    with EventLogWriter(path) as writer:
        writer.append(evs[:1])

    def refuse(token: str) -> None:
        raise AssertionError(f"bare {token} in a JSON line")

    lines = path.read_text().splitlines()
    decoded = [json.loads(line, parse_constant=refuse) for line in lines]  # strict JSON parse
    assert decoded[0]["value"] is None and decoded[0]["attrs"] == {"text": "n/a", "raw": None}
    assert decoded[1]["value"] is None and decoded[1]["attrs"]["value_text"] == "inf"
    assert decoded[1]["ts"] is None and decoded[1]["attrs"]["nested"] == [1.0, None]
    back = read_events(path)
    assert math.isnan(back[0].value) and math.isnan(back[1].value) and back[2].value == 1.5
    assert len(back) == 4


# -- the fast paths: orjson when installed, one type test per field, rows without MetricEvents --

import datetime  # noqa: E402 - grouped with the tests that need them
import enum  # noqa: E402

from my_utils.core import events as events_module  # noqa: E402
from my_utils.core.events import iter_event_rows, trusted_event  # noqa: E402


def _written(path: Path, evs: list[MetricEvent], monkeypatch: pytest.MonkeyPatch, fast: bool) -> list[str]:
    """The lines ``write_events`` writes with orjson (``fast``) or with the stdlib alone."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(events_module, "_orjson", None)
        write_events(path, evs)
    return path.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: \x85 is inside a line


@given(st.lists(events, max_size=10))
@settings(max_examples=40, deadline=None)
def test_orjson_writes_what_the_stdlib_writes(tmp_path_factory: pytest.TempPathFactory,
                                              batch: list[MetricEvent]) -> None:
    pytest.importorskip("orjson", reason="orjson not installed: only the stdlib writes")
    folder = tmp_path_factory.mktemp("w")
    with pytest.MonkeyPatch.context() as mp:
        fast = _written(folder / "fast.jsonl", batch, mp, fast=True)
        slow = _written(folder / "slow.jsonl", batch, mp, fast=False)
    assert [json.loads(line) for line in fast] == [json.loads(line) for line in slow]


class _Colour(enum.Enum):
    RED = "red"


def test_values_the_encoders_disagree_on_are_written_by_the_stdlib(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson writes an Enum by value and a datetime with a 'T'; the stdlib's ``str()`` is the contract."""
    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    evs = [MetricEvent(name="x", value=1.0, attrs={"colour": _Colour.RED, "when": when, 3: "int key"}),  # type: ignore[dict-item]
           MetricEvent(name="y", value=-math.inf, attrs={"nested": {"a": math.nan}})]
    fast = _written(tmp_path / "fast.jsonl", evs, monkeypatch, fast=True)
    slow = _written(tmp_path / "slow.jsonl", evs, monkeypatch, fast=False)
    assert fast == slow
    assert json.loads(fast[0])["attrs"] == {"colour": "_Colour.RED", "when": "2026-01-02 03:04:05", "3": "int key"}
    assert json.loads(fast[1])["attrs"] == {"nested": {"a": None}, "value_text": "-inf"}


@pytest.mark.parametrize(("line", "value", "extra"), [
    (b'{"name":"a","value":NaN}', math.nan, {}),  # the stdlib reads a bare NaN; orjson refuses it
    # orjson reads an integer beyond 64 bits as a float: exact with the stdlib
    (b'{"name":"a","value":1,"big":123456789012345678901234567890}', 1.0, {"big": 123456789012345678901234567890}),
    (b'{"name":"a","value":1,"low":-9223372036854775809}', 1.0, {"low": -9223372036854775809}),
    (b'\xef\xbb\xbf{"name":"a","value":2}', 2.0, {}),  # a UTF-8 BOM
    (b'  {"name":"a","value":3}  ', 3.0, {}),
])
def test_lines_orjson_refuses_are_read_as_the_stdlib_reads_them(tmp_path: Path, backend: str, line: bytes,
                                                                value: float, extra: dict[str, object]) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"\n" + line + b"\n\n")
    (event,) = read_events(path)
    assert event.name == "a" and event.extra == extra
    assert math.isnan(event.value) if math.isnan(value) else event.value == value


def test_bad_lines_name_the_place_with_either_backend(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "e.jsonl"
    good = json.dumps({"name": "a", "value": 1.0})
    path.write_text(f"{good}\n{{not json\n{good}\n")
    with pytest.raises(InputError, match=r"e\.jsonl.*line 2.*one JSON object per line"):
        read_events(path)
    path.write_text(f'{good}\n{{"name": "a", "value": "12"}}\n')
    with pytest.raises(InputError, match=r"line 2.*'value' must be a number or null"):
        list(iter_event_rows(path))
    path.write_text(f"{good}\n{good[:-3]}")  # torn last line
    assert len(read_events(path)) == 1 and len(list(iter_event_rows(path))) == 1


rows = st.fixed_dictionaries(
    {"name": names},
    optional={
        "value": st.none() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False),
        "kind": st.sampled_from(["", "gauge", "duration"]), "unit": st.sampled_from(["", "ms"]),
        "source": st.text(max_size=5), "rank": st.none() | st.integers(0, 64), "step": st.none() | st.integers(0, 99),
        "ts": st.none() | st.integers(0, 2**31) | st.floats(0, 2e9), "run_id": st.text(max_size=5),
        "attrs": st.none() | st.dictionaries(st.text(max_size=5), json_scalars, max_size=3),
        "schema_version": st.integers(1, 3), "future": json_scalars,
    },
)


@given(st.lists(rows, min_size=1, max_size=10))
@settings(max_examples=60, deadline=None)
def test_rows_and_events_agree(tmp_path_factory: pytest.TempPathFactory, batch: list[dict[str, object]]) -> None:
    """The fast path and the slow path (missing fields, ints, nulls) build the same events and rows."""
    path = tmp_path_factory.mktemp("r") / "e.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in batch))
    expected = [MetricEvent.from_dict(r) for r in batch]

    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or a == b

    got = read_events(path)
    assert [e.to_dict() | {"value": 0} for e in got] == [e.to_dict() | {"value": 0} for e in expected]
    assert all(same(a.value, b.value) and type(a.value) is float for a, b in zip(got, expected, strict=True))
    for row, event in zip(iter_event_rows(path), expected, strict=True):
        assert {**row, "value": 0} == event.to_dict() | {"value": 0}
        assert same(row["value"], event.value) and type(row["value"]) is float
        assert row["ts"] is None or type(row["ts"]) is float


def test_trusted_event_is_the_checked_event() -> None:
    args = ("n", 1.5, "duration", "ms", "mytimer", 2, 7, 1.7e9, "run", {"depth": 0})
    assert trusted_event(*args) == MetricEvent(*args)
    assert trusted_event(*args, 2, {"x": 1}) == MetricEvent(*args, 2, {"x": 1})
