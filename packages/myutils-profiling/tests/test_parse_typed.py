"""The typed decoding of Kineto traces (msgspec, ``myutils-profiling[fast]``) gives exactly what the dict path gives.

Compared on every real Kineto fixture, on generated events full of edge values (wrong types,
missing fields, huge numbers, seams inside strings, duplicate keys), and in the errors: the
same metric events, context and nesting, or the same one-line InputError naming the same event.
"""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.read import events as trace_events
from my_utils.profiling.kineto.read import stream as trace_stream
from my_utils.profiling.kineto.read.aggregate import TraceAggregator
from my_utils.profiling.kineto.read.nesting import NestingPass
from my_utils.profiling.kineto.read.provider import TraceRead, read_trace
from my_utils.profiling.kineto.read.stream import TraceStream

pytest.importorskip("msgspec", reason="the typed path needs msgspec (myutils-profiling[fast], in requirements-dev)")

_BIG = 500_000  # stored bytes above which a real trace is a slow test (it is read three times)


def _read(path: Path, typed: bool, monkeypatch: pytest.MonkeyPatch, nesting: bool = True) -> TraceRead | str:
    """read_trace with the provider's events (and the nesting pass): the result, or the InputError's line."""
    monkeypatch.setenv(trace_events.ENV_SWITCH, "1" if typed else "0")
    try:
        return read_trace(path, passes=(NestingPass,) if nesting else ())
    except InputError as exc:
        return f"InputError: {exc}"
    finally:
        monkeypatch.delenv(trace_events.ENV_SWITCH)


def _both(path: Path, typed: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[TraceRead | str, TraceRead | str]:
    """The provider's read alone (typed events without lanes) and with the nesting pass (with lanes)."""
    return _read(path, typed, monkeypatch, nesting=False), _read(path, typed, monkeypatch)


def _typed_events(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts of events that reached TraceAggregator.add_batch (typed runs), appended as they come."""
    seen: list[int] = []
    real = TraceAggregator.add_batch

    def spy(self: TraceAggregator, events: list[Any]) -> None:
        seen.append(len(events))
        real(self, events)

    monkeypatch.setattr(TraceAggregator, "add_batch", spy)
    return seen


def _kineto_names() -> list[Any]:
    """Every Kineto trace of the fixture registry (the big ones marked slow: each is read three times)."""
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    registry = Path(__file__).resolve().parents[3] / "fixtures" / "registry.toml"
    files = tomllib.loads(registry.read_text())["files"]
    out = []
    for name, entry in sorted(files.items()):
        if not name.startswith("kineto/") or name.endswith("memory_timeline.raw.gz"):  # that one is no trace
            continue
        out.append(pytest.param(name, marks=pytest.mark.slow) if entry["size"] > _BIG else name)
    return out


@pytest.mark.parametrize("batch_min", ["default", "0"])
@pytest.mark.parametrize("name", _kineto_names())
def test_parse_typed_equals_dict_path_on_every_real_trace(name: str, batch_min: str, real_fixtures: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # batch_min 0: even the small traces (below one 64 KiB batch) go through typed runs
    if batch_min == "0":
        monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)
    path = real_fixtures / name
    typed_counts = _typed_events(monkeypatch)
    alone, typed = _both(path, True, monkeypatch)
    plain = _read(path, False, monkeypatch)
    assert isinstance(typed, TraceRead) and isinstance(alone, TraceRead), typed
    assert typed == plain  # every metric event (exact floats, same order), the context, the nesting
    assert alone.events == plain.events and alone.context == plain.context
    typed_counts[:] = typed_counts[:len(typed_counts) // 2]  # the first read's runs
    counted = sum(int(e.value) for e in typed.events if e.name == "trace.events")
    if batch_min == "0" or counted > 5000:
        # one event per 4 MiB chunk seam (and the last one) is read alone, as a dict
        assert sum(typed_counts) >= counted - 1 - counted // 1000, "the typed path was not taken"


# -- generated events ------------------------------------------------------------------

_ABSENT = object()


_NUMBERS = st.one_of(st.integers(min_value=-5, max_value=3_000_000), st.floats(min_value=-1e6, max_value=1e7))
Pair = tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]
# each field: (values the typed schema takes: absent ones, large numbers..., values off the schema)
_TIME: Pair = (
    st.one_of(_NUMBERS, _NUMBERS, _NUMBERS, st.sampled_from(
        [_ABSENT, 0, -0.0, 2**53 + 1, 2**63, 2**64 + 1, 2**70, 1e308, 1.5e300, 10**30])),
    st.sampled_from([None, "12", True, False, [], {}, float("nan"), float("inf"), -float("inf")]),
)
_CATS: Pair = (
    st.sampled_from(["kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "cpu_op", "Operator",
                     "user_annotation", "cuda_runtime", "Runtime", "cuda_driver", "mtia_ccp_events",
                     "cpu_instant_event", "ac2g", "Trace", "cuda_sync", "KERNEL", "memory", "mtia_runtime",
                     "(none)", None, _ABSENT]),
    st.sampled_from([3, []]),
)
_NAMES: Pair = (
    st.sampled_from(["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3\n", "ProfilerStep#x", "aten::mm",
                     "ncclKernel_AllReduce", "[memory]", "cudaLaunchKernel", "\u00e9t\u00e9", "", _ABSENT,
                     'seam in a string: }, {"ph": "X"', "ProfilerStep#" + "9" * 5000]),
    st.sampled_from([7, None]),
)
_PH: Pair = (st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B", None, _ABSENT]), st.sampled_from([5, []]))
_SCALAR: Pair = (st.one_of(st.integers(min_value=0, max_value=2**40), st.sampled_from(["stream 7", 1.5, None, _ABSENT])),
                 st.sampled_from([True, 2**64 + 3, 2**70, []]))
_CORR: Pair = (st.one_of(st.integers(min_value=-2, max_value=10), st.sampled_from([2**63 - 1, -1, _ABSENT])),
               st.sampled_from([2**63, 2**70, None, True, 1.0, "3"]))
_DEVICE: Pair = (st.integers(min_value=-1, max_value=300), st.sampled_from([1.0, "1", None, 2**70]))


@st.composite
def _event(draw: st.DrawFn, odd_one_in: int) -> str:
    """One event as JSON text; a field is off the schema once in ``odd_one_in`` (never when 0), may be written twice."""
    def pick(pair: Pair) -> Any:
        odd = odd_one_in and draw(st.integers(min_value=0, max_value=odd_one_in - 1)) == 0
        return draw(pair[1] if odd else pair[0])

    args: Any = {k: pick(pair) for k, pair in (("correlation", _CORR), ("Total Allocated", _TIME),
                                                ("Total Reserved", _TIME), ("Device Type", _DEVICE))
                 if draw(st.booleans())}
    if draw(st.booleans()):
        args.update({"External id": 5, "Input Dims": [[2, 3], [4]], "big": 10**25})
    if odd_one_in and draw(st.integers(min_value=0, max_value=odd_one_in - 1)) == 0:
        args = draw(st.sampled_from([[], "args"]))
    elif draw(st.integers(min_value=0, max_value=3)) == 0:
        args = _ABSENT
    fields = {"ph": pick(_PH), "cat": pick(_CATS), "name": pick(_NAMES), "pid": pick(_SCALAR),
              "tid": pick(_SCALAR), "ts": pick(_TIME), "dur": pick(_TIME), "args": args}
    if isinstance(fields["args"], dict):
        fields["args"] = {k: v for k, v in fields["args"].items() if v is not _ABSENT}
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items() if v is not _ABSENT]
    if draw(st.integers(min_value=0, max_value=31)) == 0:  # a key written twice: the last one wins
        key = draw(st.sampled_from(["ph", "cat", "name", "ts", "dur", "args"]))
        first = draw(st.one_of(_TIME[0], _NAMES[0], _CATS[0]))
        parts.insert(0, f"{json.dumps(key)}: {json.dumps(0 if first is _ABSENT else first)}")
    if odd_one_in and draw(st.integers(min_value=0, max_value=20 * odd_one_in)) == 0:
        return draw(st.sampled_from(["1", "[]", '"text"', "null"]))  # not an event at all
    return "{" + ", ".join(parts) + "}"


_EVENTS = st.sampled_from([0, 0, 256, 16]).flatmap(lambda rate: st.lists(_event(rate), min_size=1, max_size=60))


_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@_SETTINGS
@given(events=_EVENTS, gz=st.booleans())
def test_parse_typed_equals_dict_path_on_generated_events(events: list[str], gz: bool, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)  # typed runs from the first event on
    text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + '\n], "distributedInfo": {"rank": 1}}'
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    assert _both(path, True, monkeypatch) == _both(path, False, monkeypatch)


# -- errors beyond the first typed run ----------------------------------------------------

def _kernels(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {"ph": "X", "cat": "cpu_op", "name": f"op{i % 5}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 3,
               "args": {"External id": i}}
        yield {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 10 * i + 2, "dur": 5,
               "args": {"correlation": i, "stream": 7}}


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("ts", _ABSENT, "'ts' on a 'kernel' event as a finite number (µs); found none"),
    ("ts", "12", "on a 'kernel' event"),
    ("dur", None, "on a 'kernel' event"),
    ("name", "ProfilerStep#" + "9" * 5000, "ValueError"),
    ("dur", float("nan"), "finite 'ts'/'dur'"),
    ("ts", float("inf"), "finite 'ts'/'dur'"),
])
def test_parse_typed_errors_are_the_dict_paths(field: str, value: Any, expected: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    events = list(_kernels(20_000))  # ~4 MB: the bad event sits in a later typed run
    bad = events[30_001 if field != "name" else 30_000]  # a step number is a cpu_op's
    target = bad
    if value is _ABSENT:
        del target[field]
    else:
        target[field] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    typed = _read(path, True, monkeypatch)
    assert (typed, typed) == _both(path, False, monkeypatch) == _both(path, True, monkeypatch)
    place = "traceEvents[30001]" if field != "name" else "traceEvents[30000]"
    assert isinstance(typed, str) and place in typed and expected in typed, typed
    assert str(path) in typed and "\n" not in typed


def test_parse_typed_correlation_beyond_64_bits_reads_as_the_dict_path(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # orjson (the dict path's batches) reads such an integer as a float, the event-by-event path as the
    # integer: both are refused, naming the field (issue 35), wherever the event sits; the typed schema
    # refuses it and the run goes that same way
    events = list(_kernels(20_000))
    events[30_001]["args"]["correlation"] = 2**70
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    typed = _read(path, True, monkeypatch)
    assert isinstance(typed, str) and typed == _read(path, False, monkeypatch)
    assert "traceEvents[30001]: 'args.correlation' on a 'kernel' event as an integer within 64 bits" in typed


def test_parse_typed_counts_missing_categories_as_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}] * 3000
    events += [{"ph": "i", "cat": None, "name": "n", "ts": 1}] * 3000 + [{"ph": "i", "cat": "(none)", "ts": 2}] * 10
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    typed = _read(path, True, monkeypatch)
    assert isinstance(typed, TraceRead) and typed == _read(path, False, monkeypatch)
    assert {e.attrs["category"]: e.value for e in typed.events if e.name == "trace.events"} == {"(none)": 6010}


def test_parse_typed_skips_what_it_does_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the one documented difference: an integer longer than Python's 4,300-digit limit in a field no
    # provider reads is skipped by the typed decoder (never converted), where the stdlib refuses the file
    events = list(_kernels(2000))
    events[500]["args"]["huge"] = 0  # placeholder, replaced by the digits below
    text = json.dumps({"traceEvents": events}).replace('"huge": 0', '"huge": ' + "9" * 5000)
    path = tmp_path / "t.json"
    path.write_text(text)
    typed = _read(path, True, monkeypatch)
    plain = _read(path, False, monkeypatch)
    assert isinstance(typed, TraceRead) and sum(e.value for e in typed.events if e.name == "gpu.kernel_count") == 2000
    assert isinstance(plain, str) and "4,300 digits" in plain


def test_parse_items_typed_runs_hold_the_events_fields(tmp_path: Path) -> None:
    events = list(_kernels(5000))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0}]}))
    assert all(not hasattr(ev, "pid") for item in TraceStream(path).items() if isinstance(item, list) for ev in item)
    stream = TraceStream(path)
    got: list[dict[str, Any]] = []
    runs = 0
    for item in stream.items(lanes=True):
        if isinstance(item, list):
            runs += 1
            got.extend(trace_events.as_dict(ev) for ev in item)
        else:
            got.append(item)
    assert runs >= 1 and stream.event_count == len(events) == len(got)
    assert stream.metadata == {"deviceProperties": [{"id": 0}]}
    keep = ("ph", "cat", "name", "ts", "dur", "pid", "tid")
    for mine, theirs in zip(got, events, strict=True):
        assert {k: mine[k] for k in keep} == {k: theirs[k] for k in keep}
        corr = (mine.get("args") or {}).get("correlation")
        assert corr == theirs["args"].get("correlation")


def test_parse_pure_python_path_without_msgspec(real_fixtures: Any, tmp_path: Path) -> None:
    # msgspec absent (an install without the [fast] extra): the same events, through dicts only
    path = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    code = (
        "import sys; sys.modules['msgspec'] = None\n"
        "from my_utils.profiling.kineto.read import events as trace_events, stream as trace_stream\n"
        "from my_utils.profiling.kineto.read.provider import read_trace\n"
        "assert trace_events.typed_decoder() is None and trace_events.REFUSED == ()\n"
        "import pickle; sys.stdout.buffer.write(pickle.dumps(read_trace(sys.argv[1]).events))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, check=True, timeout=300)
    import pickle

    without = pickle.loads(out.stdout)
    assert without == read_trace(path).events
    assert math.isclose(sum(e.value for e in without if e.name == "gpu.kernel_count"), 1154)


@pytest.mark.parametrize("typed", [True, False])
def test_parse_nesting_ignores_a_lane_that_is_no_thread_id(typed: bool, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # before: a list as "tid" (found by the generated-events test) raised TypeError (unhashable) out of diff
    events = [{"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
              {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
              {"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": [], "ts": 2, "dur": 3}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)
    read = _read(path, typed, monkeypatch)
    assert isinstance(read, TraceRead), read
    assert {k: (v.name, v.share) for k, v in read.results[0].items()} == {"cpu_op:inner": ("cpu_op:outer", 1.0)}


def test_parse_provider_pass_imports_no_numpy(real_fixtures: Any) -> None:
    # importing numpy cost a one-file `plugins run torch_profiler` ~0.1 s of CPU, more than its grouping
    path = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    code = ("import sys\nfrom my_utils.profiling.kineto.read.provider import read_trace\n"
            "assert read_trace(sys.argv[1]).events\nprint(sorted(m for m in ('numpy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.strip() == "[]", out.stdout
