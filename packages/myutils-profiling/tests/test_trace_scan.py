"""The compiled scanner (``_kineto_scan``) reads a trace exactly as the typed decoder and the dict path do.

Compared on generated JSON that varies what the other tests keep plain: whitespace, escapes in
every string (keys and categories included), numbers in every JSON spelling (exponents,
``-0``, 19-digit integers, values beyond a double), literals and nesting in the fields it
skips. Every run it declines must leave no interned name behind, every run it takes must give
the columns the typed reading gives, and it must take the runs of a plain real trace.
"""

from __future__ import annotations

import json
import math
import struct
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.read import events as trace_events
from my_utils.profiling.kineto.read import scan as trace_scan
from my_utils.profiling.kineto.read import stream as trace_stream
from my_utils.profiling.kineto.read.aggregate import TraceAggregator
from my_utils.profiling.kineto.read.provider import read_trace
from my_utils.profiling.kineto.read.scan import ScannedRun


@pytest.fixture(autouse=True)
def _scanner_installed(real_fixtures: Any) -> None:
    """Skip without the compiled scanner (no C compiler at install), but fail where CI requires every input.

    Function-scoped (it holds nothing): a module-scoped fixture would keep this module on one xdist worker.
    """
    if not trace_scan.compiled():
        real_fixtures.unavailable("the C scanner (_kineto_scan) was not built at install (no C compiler or "
                                  "Python.h, or built from another version: see test_trace_scan_build.py)")


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _read(path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, scan: str) -> Any:
    """The provider's events and context, or the InputError's text, under the two switches."""
    monkeypatch.setenv(trace_events.ENV_SWITCH, typed)
    monkeypatch.setenv(trace_scan.ENV_SWITCH, scan)
    try:
        got = read_trace(path)
        return got.events, got.context
    except InputError as exc:
        return f"InputError: {exc}"


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Event counts of the scanned runs the aggregator receives."""
    seen: list[int] = []
    real = TraceAggregator.add_batch

    def spy(self: TraceAggregator, events: Any) -> None:
        if isinstance(events, ScannedRun):
            seen.append(len(events))
        real(self, events)

    monkeypatch.setattr(TraceAggregator, "add_batch", spy)
    return seen


# -- JSON spelled every way ------------------------------------------------------------------

_WS = st.sampled_from(["", "", " ", "\n", "\t ", "\r\n  "])


class _Exact(int):
    """An integer field (correlation, device type): spelled as an integer, as the schema asks."""


@st.composite
def _number(draw: st.DrawFn, value: float | int) -> str:
    """``value`` in one of its JSON spellings (all equal as numbers)."""
    if isinstance(value, int):
        return draw(st.sampled_from([str(value), str(value), f"{value}.0", f"{value}e0", f"{value}E+0"]))
    if not math.isfinite(value):
        return repr(value)
    text = repr(value)
    spellings = [text, f"{value:.17g}", f"{value:.17e}", f"{value:E}"] if value == float(f"{value:E}") \
        else [text, f"{value:.17g}", f"{value:.17e}"]
    out = draw(st.sampled_from(spellings))
    return out.replace("inf", "1e999").replace("nan", "0")


def _escape(text: str, how: int) -> str:
    """``text`` as a JSON string: plain, every non-ASCII escaped, or every character escaped."""
    if how == 0:
        return json.dumps(text, ensure_ascii=False)
    if how == 1:
        return json.dumps(text, ensure_ascii=True)
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in text) + '"'


@st.composite
def _text(draw: st.DrawFn, value: str, escapes: bool = True) -> str:
    return _escape(value, draw(st.sampled_from([0, 0, 0, 0, 1, 2])) if escapes else 0)


@st.composite
def _value(draw: st.DrawFn, value: Any, escapes: bool = True) -> str:
    """Any JSON value, spelled with random whitespace, escapes (``escapes``: in keys too) and number forms."""
    ws = draw(_WS)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, _Exact):
        return str(int(value))
    if isinstance(value, (int, float)):
        return draw(_number(value))
    if isinstance(value, str):
        return draw(_text(value))
    if isinstance(value, list):
        return "[" + ws + ("," + ws).join(draw(_value(v, escapes)) for v in value) + ws + "]"
    return "{" + ws + ("," + ws).join(f"{draw(_text(k, escapes))}{ws}:{ws}{draw(_value(v, escapes))}"
                                      for k, v in value.items()) + ws + "}"


_TIMES = st.one_of(st.integers(min_value=0, max_value=2**53), st.floats(min_value=0, max_value=1e16),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([10**18 - 1, -(10**18 - 1), 0.1, 5e-324, 1e308, 1.7976931348623157e308]))
_TIMES_ODD = st.sampled_from([10**18, 10**19, 2**63, -(2**63), 10**30])  # read by the typed decoder only
_CATS = st.sampled_from(["kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation", "cuda_runtime",
                         "cuda_driver", "cpu_instant_event", "ac2g", "python_function", "kérnel", None])
_NAMES = st.sampled_from(["aten::mm", "ncclKernel_AllReduce", "ProfilerStep#3", "ProfilerStep#12", "ProfilerStep#",
                          "ProfilerStep#4x", "ProfilerStep#4x", "ProfilerStep#3", "ProfilerStep#12x", "ProfilerStep#" + "9" * 18, "[memory]", 'quote " and \\ slash',
                          "tab\there", "été", "日本", "", "P"])
_NAMES_ODD = st.sampled_from(["ProfilerStep#" + "9" * 19, "ProfilerStep#5\n", "emoji 😀"])
_ODD = st.sampled_from([None, True, [], {}, "7", 1.5, [[[[[]]]]], {"a": {"b": [1, {"c": None}]}}])


@st.composite
def _event(draw: st.DrawFn, odd: bool) -> str:
    """One event; ``odd``: it may also have what the scanner declines (fields off the schema, a key
    twice, escaped keys and categories); names and skipped values are escaped either way."""
    fields: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        fields["ph"] = draw(st.sampled_from(["X", "X", "X", "i", "s", "f", None]))
    if draw(st.integers(0, 9)):
        fields["cat"] = draw(_CATS)
    if draw(st.integers(0, 9)):
        fields["name"] = draw(st.one_of(_NAMES, _NAMES_ODD) if odd else _NAMES)
    times = st.one_of(_TIMES, _TIMES_ODD) if odd else _TIMES
    for key in ("ts", "dur"):
        if draw(st.integers(0, 15)):
            fields[key] = draw(times)
    if draw(st.booleans()):
        args: dict[str, Any] = {}
        if draw(st.booleans()):
            args["correlation"] = _Exact(draw(st.one_of(st.integers(-3, 2**40), st.sampled_from(
                [10**18 - 1, -(10**18 - 1), *([2**63 - 1, -(2**63), 10**18, 2**63] if odd else [])]))))
        if draw(st.integers(0, 3)) == 0:
            args["Total Allocated"] = draw(times)
            if draw(st.booleans()):
                args["Total Reserved"] = draw(st.one_of(times, st.none()))
            if draw(st.booleans()):
                args["Device Type"] = _Exact(draw(st.integers(-130, 130) if odd else st.integers(-128, 127)))
        if draw(st.booleans()):
            args["Input Dims"] = draw(_ODD)
        fields["args"] = args
    if draw(st.booleans()):
        fields[draw(st.sampled_from(["pid", "tid", "id", "bp", "s"]))] = draw(_ODD)
    if odd and draw(st.integers(0, 10)) == 0:  # a field off the schema
        fields[draw(st.sampled_from(["ph", "cat", "name", "ts", "dur", "args"]))] = draw(_ODD)
    keys = list(fields)
    ws = draw(_WS)
    plain = ("ph", "cat", "args")  # escaped, these are declined
    parts = [f"{draw(_text(k, odd))}{ws}:{ws}"
             f"{draw(_text(fields[k], odd)) if k in plain and isinstance(fields[k], str) else draw(_value(fields[k], odd))}"
             for k in keys]
    if odd and keys and draw(st.integers(0, 10)) == 0:  # a key written twice
        parts.append(parts[0])
    return "{" + ws + ("," + ws).join(parts) + ws + "}"


@_SETTINGS
@given(events=st.sampled_from([False, False, False, True]).flatmap(
    lambda odd: st.lists(_event(odd), min_size=1, max_size=40)), ws=_WS)
def test_scan_reads_generated_json_as_the_typed_and_dict_paths(events: list[str], ws: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)  # runs from the first event on
    text = '{"traceEvents": [' + ws + ("," + ws).join(events) + ws + '], "baseTimeNanoseconds": 1}'
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    scanned = _read(path, monkeypatch, "1", "1")
    assert scanned == _read(path, monkeypatch, "1", "0")
    assert scanned == _read(path, monkeypatch, "0", "1")


def _block_edge_trace(width: int) -> str:
    """Events whose strings, numbers and whitespace take ``width`` bytes, so that across widths 0..40
    every stop (a quote, a backslash, a digit's end) falls at every place of the scanner's 16-byte
    string blocks and 8-digit number words."""
    name = "n" * width
    escaped = "e" * width + "\\u00e9\\" + '"'  # an escape at every offset, then more text
    ws = (" \n\t\r" * 11)[:width]
    digits = int("7" * min(max(width, 1), 15))
    events = [
        f'{{"ph":{ws}"X",{ws}"cat":"cpu_op","name":"{name}","ts":{digits},"dur":{digits}.{"5" * min(width, 9) or "0"},'
        f'"args":{{"Input Dims":[[{digits},{ws}{width}]],"s":"{escaped}"}}}}',
        f'{{"ph":"X","cat":"kernel","name":"{name}{escaped}","ts":{digits}{ws},"dur":1e{width % 20},'
        f'"args":{{"correlation":{digits}}}}}',
        f'{{"ph":"f","cat":"ac2g","name":"ac2g","id":{digits},"ts":{width},"bp":"e"}}',
        '{"ph":"M","name":"process_name","pid":1,"args":{"name":"last"}}',  # the seam, read alone
    ]
    return ",".join(events)


def _assert_block_edges_read_as_typed(width: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      scanner: str) -> None:
    """The ``_block_edge_trace(width)`` runs are taken by the installed scan and read as the typed path reads them."""
    monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + _block_edge_trace(width) + "]}", encoding="utf-8")
    runs = _runs(monkeypatch)
    scanned = _read(path, monkeypatch, "1", "1")
    assert sum(runs) >= 3, f"the {scanner} declined a run it must take: {runs}"
    assert scanned == _read(path, monkeypatch, "1", "0")


@pytest.mark.parametrize("width", range(41))
def test_scan_reads_across_its_blocks_as_the_typed_path(width: int, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_block_edges_read_as_typed(width, tmp_path, monkeypatch, "scanner")


@pytest.fixture(scope="module")
def portable_scanner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The scanner built with ``MYUTILS_SCAN_PORTABLE``: the byte-word fallbacks a machine without SSE2
    or a big-endian one compiles (this one takes the SSE2 and word-digit paths)."""
    import importlib.util
    import subprocess
    import sys
    import sysconfig

    root = Path(trace_scan.__file__).resolve().parents[5]  # packages/myutils-profiling
    if not (root / "hatch_build.py").is_file():
        pytest.skip(f"the package's source tree (hatch_build.py) is not at {root}: an installed wheel")
    sys.path.insert(0, str(root))
    try:
        import hatch_build
    finally:
        sys.path.remove(str(root))
    target = tmp_path_factory.mktemp("portable") / ("_kineto_scan" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    command = hatch_build._compile_command(root / hatch_build.SOURCE, target)
    if isinstance(command, str):
        pytest.skip(f"the scanner cannot be compiled here: {command}")
    done = subprocess.run([command[0], "-DMYUTILS_SCAN_PORTABLE", *command[1:]], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    spec = importlib.util.spec_from_file_location("myutils_portable_scan._kineto_scan", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ABI == trace_scan.ABI
    return module


@pytest.mark.parametrize("width", range(0, 41, 3))
def test_the_portable_scanner_reads_across_its_words_as_the_typed_path(width: int, portable_scanner: Any,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_scan, "_compiled", portable_scanner)
    monkeypatch.setattr(trace_scan, "_scan", portable_scanner.scan)
    _assert_block_edges_read_as_typed(width, tmp_path, monkeypatch, "portable scanner")


def test_the_portable_scanner_declines_non_ascii_bytes(portable_scanner: Any) -> None:
    # an escaped name is ASCII and read; the same name as UTF-8 bytes is declined where it is met
    escaped = r'{"ph":"X","cat":"cpu_op","name":"caf\u00e9 and more text","ts":1,"dur":2}'
    raw = json.dumps(json.loads(escaped), ensure_ascii=False)
    assert "\\" in escaped and "\\" not in raw
    for text, taken in ((escaped.encode("ascii"), True), (raw.encode("utf-8"), False)):
        got = portable_scanner.scan(bytearray(text), 0, len(text), {}, lambda cat: 4, {}, [])
        assert (got is not None) == taken, text


# -- the runs it takes ---------------------------------------------------------------------------

def test_scan_takes_the_runs_of_a_real_trace(real_fixtures: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    runs = _runs(monkeypatch)
    monkeypatch.setattr(trace_stream, "_BATCH_MIN", 0)
    scanned = _read(path, monkeypatch, "1", "1")
    n = sum(int(e.value) for e in scanned[0] if e.name == "trace.events")
    assert n == 4855 and sum(runs) >= n - 1 - n // 1000, (sum(runs), n)  # a seam event per chunk is read alone
    runs.clear()
    assert _read(path, monkeypatch, "1", "0") == scanned and runs == []  # the switch turns it off


def _alone_and_a_fresh_scan(events: str) -> tuple[ScannedRun, Any]:
    """``events`` scanned on their own, and the scan of a new aggregator (to scan them again inside a buffer)."""
    alone, _ = _scan(events)
    scan = TraceAggregator(Path("t.json")).scanner()
    assert scan is not None and alone is not None
    return alone, scan


def _scan(text: str, agg: TraceAggregator | None = None) -> tuple[ScannedRun | None, TraceAggregator]:
    agg = agg or TraceAggregator(Path("t.json"))
    scan = agg.scanner()
    assert scan is not None
    return scan(text, 0, len(text)), agg


@pytest.mark.parametrize("text", [
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "ts": 3}',  # a key twice
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": "1"}',  # ts of another type
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e999}',  # beyond a double
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1234567890123456789}',  # 19 digits
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": -0}',  # -0 as an integer
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 01}',  # not JSON
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.}',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN}',
    '{"ph": "X", "cat": "kernel", "name": null, "ts": 1}',
    '{"ph": "X", "cat": "k\\u0065rnel", "name": "k", "ts": 1}',  # an escaped category
    '{"ph": "X", "cat": "kernel", "n\\u0061me": "k", "ts": 1}',  # an escaped key
    '{"ph": "X", "cat": "kernel", "name": "\\ud83d\\ude00", "ts": 1}',  # a surrogate pair
    '{"ph": "X", "cat": "kernel", "name": "k\\q", "ts": 1}',  # a bad escape
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": null}',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"correlation": 1.0}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"correlation": true}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "x": ' + "[" * 70 + "]" * 70 + ', "ts": 1}',  # deep
    '{"ph": "X", "cat": "kernel", "name": "k"}',  # no ts on a complete event: the error path words it
    '{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 1, "args": {"Total Allocated": 1,'
    ' "Device Type": 300}}',
    '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1234567890123456789", "ts": 1}',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1} 7',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1},',
    "[]",
    "",
])
def test_scan_declines_what_the_typed_decoder_must_decide(text: str) -> None:
    agg = TraceAggregator(Path("t.json"))
    agg._nid("before")
    first, _ = _scan('{"ph": "X", "cat": "kernel", "name": "new name", "ts": 1}, ' + text, agg)
    assert first is None
    assert agg.name_list == ["before"] and agg.names == {"before": 0}  # the run's names went with it


def test_scan_gives_the_typed_columns() -> None:
    events = [
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 10.5, "dur": 2, "args": {"correlation": 7, "stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#4", "ts": 1, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 2, "dur": 3e1},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4x", "ts": 2.5, "dur": 1},  # no step: rows
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#", "ts": 2.5, "dur": 1},
        {"ph": "X", "cat": "user_annotation", "name": "\u0050rofilerStep#\u0035", "ts": 8, "dur": 9},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 3, "dur": 1, "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "ts": 4, "dur": 1},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5,
         "args": {"Total Allocated": 1024, "Total Reserved": None, "Device Type": 1}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 6, "dur": 0.25},
        {"ph": "X", "cat": "ac2g", "name": "flow", "ts": 7},
        {"ph": "f"},
    ]
    run, agg = _scan(",".join(json.dumps(e) for e in events).replace("\\\\u", "\\u"))
    assert run is not None and len(run) == len(events)
    agg.add_batch(run)
    typed = TraceAggregator(Path("t.json"))
    typed.add_batch(trace_events.typed_decoder()(json.dumps(events).replace("\\\\u", "\\u")))
    for mine, theirs in ((agg.dev, typed.dev), (agg.host, typed.host), (agg.mem, typed.mem),
                         ((agg.rt_corr, agg.rt_ts), (typed.rt_corr, typed.rt_ts))):
        assert [list(c) for c in mine] == [list(c) for c in theirs]
    assert agg.steps == typed.steps == [(1.0, 100.0, 4), (8.0, 9.0, 5)]  # the second one spelled with escapes
    assert agg.name_list == typed.name_list == ["k1", "aten::mm", "ProfilerStep#4x", "ProfilerStep#", "Memcpy HtoD"]
    assert agg.cats == typed.cats and agg.count == typed.count == len(events)


@_SETTINGS
@given(value=st.floats(allow_nan=False, allow_infinity=False), spelling=st.integers(0, 3))
def test_scan_reads_every_double_as_python_does(value: float, spelling: int) -> None:
    text = [repr(value), f"{value:.17e}", f"{value:.25g}", f"{value:.3e}"][spelling]
    run, _ = _scan(f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": {text}, "dur": {text}}}')
    if math.isinf(float(text)):  # rounded beyond the largest double ('1.798e+308'): the typed decoder refuses it
        assert run is None
        return
    if text.lstrip("-").isdigit() and len(text.lstrip("-")) >= 19:
        # '%.25g' spells 1e18 as a 19-digit integer: the scanner declines those (an integer that may not fit its
        # int64 path; see the "19 digits" case above) and the typed decoder reads the run instead
        assert run is None
        return
    assert run is not None
    ts = struct.unpack("d", run.columns[4])[0]
    assert ts == float(text) and math.copysign(1, ts) == math.copysign(1, float(text))


@_SETTINGS
@given(mantissa=st.one_of(st.integers(0, 10**15), st.integers(0, 10**18)), shift=st.integers(0, 30),
       exponent=st.integers(-30, 30), negative=st.booleans(), form=st.integers(0, 2))
def test_scan_reads_decimal_spellings_as_python_does(mantissa: int, shift: int, exponent: int, negative: bool,
                                                      form: int) -> None:
    # Kineto writes times as "1669783687384.669": the decimal forms a compiled fast path reads itself
    digits = str(mantissa).rjust(shift + 1, "0")
    text = ("-" if negative else "") + (digits[:len(digits) - shift] + "." + digits[len(digits) - shift:] if shift
                                        else digits + ".0")
    if form == 1:
        text += f"e{exponent}"
    elif form == 2:
        text += f"E+{abs(exponent)}"
    run, _ = _scan(f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": {text}}}')
    assert run is not None
    ts = struct.unpack("d", run.columns[4])[0]
    assert ts == float(text) and math.copysign(1, ts) == math.copysign(1, float(text)), text


@pytest.mark.parametrize("prefix", ["", '{"x": 1}, ', '"été", {"名": "x"}, ', "\u00e9" * 3])
def test_scan_reads_its_slice_of_the_buffer(prefix: str) -> None:
    # the stream hands over its whole buffer with character offsets: ASCII is read in place, other
    # text through the slice (byte and character offsets differ there)
    events = '{"ph": "X", "cat": "kernel", "name": "k\u00e9", "ts": 1.5, "dur": 2}, ' \
             '{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 2, "dur": 1}'
    alone, scan = _alone_and_a_fresh_scan(events)
    buffer = prefix + events + ', {"ph": "X", "name": "tail, cut'
    got = scan(buffer, len(prefix), len(prefix) + len(events))
    assert got is not None and got.columns == alone.columns
    with pytest.raises(ValueError, match="start <= end"):
        scan(buffer, 5, 2)
    with pytest.raises(ValueError, match="len"):
        scan(buffer, 0, len(buffer) + 1)


def test_scan_holds_no_memory_after_a_run() -> None:
    text = ",".join(json.dumps({"ph": "X", "cat": c, "name": f"n{i % 50}", "ts": i, "dur": 1,
                                "args": {"correlation": i}}) for i, c in
                    zip(range(3000), ["kernel", "cpu_op", "cuda_runtime", "ac2g"] * 750, strict=True))
    agg = TraceAggregator(Path("t.json"))
    scan = agg.scanner()
    assert scan is not None
    scan(text, 0, len(text))  # names interned once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            assert scan(text, 0, len(text)) is not None
            assert scan(text + ", 1", 0, len(text) + 3) is None  # declined at the end
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 << 10, f"{after - before} bytes left after 400 scans"
    assert len(agg.name_list) == 50


def test_scan_off_without_the_typed_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trace_events.ENV_SWITCH, "0")
    assert TraceAggregator(Path("t.json")).scanner() is None
    monkeypatch.setenv(trace_events.ENV_SWITCH, "1")
    monkeypatch.setenv(trace_scan.ENV_SWITCH, "0")
    assert TraceAggregator(Path("t.json")).scanner() is None
    monkeypatch.delenv(trace_scan.ENV_SWITCH)
    assert TraceAggregator(Path("t.json")).scanner() is not None


def test_scan_columns_are_the_arrays_layout() -> None:
    # the scanner writes native int8/int32/double/int64: the typecodes TraceAggregator's arrays use
    assert [array(t).itemsize for t in "bidq"] == [1, 4, 8, 8]


def test_scan_reading_imports_no_msgspec(real_fixtures: Any) -> None:
    # the scanner reads every run of a real trace: msgspec (~6 ms of a start) is imported only for a declined one
    import subprocess
    import sys

    path = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    code = ("import sys\nfrom my_utils.profiling.kineto.read import stream as trace_stream\n"
            "from my_utils.profiling.kineto.read.provider import read_trace\ntrace_stream._BATCH_MIN = 0\n"
            "assert read_trace(sys.argv[1]).events\nprint('msgspec' in sys.modules)\n"
            "from my_utils.profiling.kineto.read import events as trace_events\n"
            "assert trace_events.typed_decoder() is not None\nprint('msgspec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.split() == ["False", "True"], out.stdout


def test_scan_module_of_another_version_is_ignored(tmp_path: Path) -> None:
    # an editable install not rebuilt after a pull keeps an older module: never called with new arguments
    import subprocess
    import sys

    code = ("import sys, types\n"
            "old = types.ModuleType('my_utils.profiling.kineto.read._kineto_scan')\n"
            "old.scan = lambda *a: 1 / 0\n"
            "sys.modules[old.__name__] = old\n"
            "from my_utils.profiling.kineto.read import scan as trace_scan\n"
            "print(trace_scan.compiled(), trace_scan.scan_function(), trace_scan.finish_helpers())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "None", "None"], out.stdout
    assert trace_scan._compiled.ABI == trace_scan.ABI  # the one built here is current


_PEAK_VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.0, 1e300, math.inf, -math.inf, math.nan])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(-1, 3), st.integers(-3, 2), _PEAK_VALUES, _PEAK_VALUES), max_size=60))
def test_peak_rows_are_the_python_loops(rows: list[tuple[int, int, float, float]]) -> None:
    """The compiled ``peak_rows`` keeps, per (step, device), what the Python loop keeps: the first value
    that no later one exceeds (-0.0 before 0.0, a NaN first stays), sorted by key."""
    from my_utils.profiling.kineto.read.aggregate import _peak_rows

    columns = (array("i", [r[0] for r in rows]), array("b", [r[1] for r in rows]),
               array("d", [r[2] for r in rows]), array("d", [r[3] for r in rows]))
    assert repr(trace_scan._compiled.peak_rows(*columns)) == repr(_peak_rows(*columns))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 700).flatmap(lambda keys: st.lists(
    st.tuples(st.integers(-1, 7), st.integers(0, keys), st.integers(-1, 3), _PEAK_VALUES), max_size=3000)))
def test_group_rows_are_the_python_loops(rows: list[tuple[int, int, int, float]]) -> None:
    """The compiled ``group_rows`` (a hash table of keys, grown past 128 and 256 of them) gives what the
    Python twin gives: per key sorted, the durations summed in file order, their count, max and min."""
    from my_utils.profiling.kineto.read.aggregate import _group_rows

    columns = (array("b", [r[0] for r in rows]), array("i", [r[1] for r in rows]),
               array("i", [r[2] for r in rows]), array("d", [r[3] for r in rows]))
    assert repr(trace_scan._compiled.group_rows(*columns)) == repr(_group_rows(*columns))


def test_group_rows_sums_each_keys_durations_in_file_order() -> None:
    # the first plus the sum of the rest, in file order: 0.3 + (0.2 + 0.1) is 0.6000000000000001,
    # where the values in another order (0.1 + (0.2 + 0.3)) give 0.6
    g, n, si = array("b", [0, 4, 0, 0]), array("i", [9, 1, 9, 9]), array("i", [0, 0, 0, 0])
    rows = trace_scan._compiled.group_rows(g, n, si, array("d", [0.3, 5.0, 0.2, 0.1]))
    assert rows == [(0, 9, 0, 0.6000000000000001, 3, 0.3, 0.1), (4, 1, 0, 5.0, 1, 5.0, 5.0)]


def test_peak_rows_refuses_columns_of_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="unequal lengths"):
        trace_scan._compiled.peak_rows(array("i", [0, 1]), array("b", [0]), array("d", [1.0, 2.0]),
                                       array("d", [1.0, 2.0]))


# -- runs read in the file's bytes ---------------------------------------------------------------

def _raw_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Event counts of the runs scanned in the file's bytes (``TraceStream._raw_runs``)."""
    seen: list[int] = []
    real = trace_stream.TraceStream._raw_runs

    def spy(self: trace_stream.TraceStream, scan: Any) -> Any:
        for run in real(self, scan):
            seen.append(len(run))
            yield run

    monkeypatch.setattr(trace_stream.TraceStream, "_raw_runs", spy)
    return seen


def _trace_bytes(count: int, odd: dict[int, str] | None = None, head: str = "") -> bytes:
    """``count`` ASCII events (about 150 bytes each), event i replaced by ``odd[i]`` (raw JSON text)."""
    odd = odd or {}
    events = (odd.get(i) or json.dumps({"ph": "X", "cat": "kernel" if i % 2 else "cpu_op", "name": f"op{i % 7}",
                                        "pid": i % 2, "tid": 7, "ts": 10 * i, "dur": 4,
                                        "args": {"correlation": i // 2, "External id": i}}) for i in range(count))
    return ('{' + head + '"traceEvents": [\n' + ",\n".join(events) + '\n], "baseTimeNanoseconds": 1}').encode()


@pytest.mark.parametrize("gz", [False, True])
def test_scan_reads_an_ascii_trace_in_its_bytes(gz: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    data = _trace_bytes(30_000)  # 4.5 MB: four chunks and more
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(data, 1) if gz else data)
    raw = _raw_runs(monkeypatch)
    scanned = _read(path, monkeypatch, "1", "1")
    assert len(raw) >= 4 and sum(raw) >= 30_000 - 2, raw  # all but the last event (no seam after it)
    raw.clear()
    assert scanned == _read(path, monkeypatch, "1", "0") == _read(path, monkeypatch, "0", "0") and raw == []


def test_an_event_longer_than_a_chunk_goes_to_the_text_path_and_is_read_whole(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    giant = json.dumps({"ph": "X", "cat": "cpu_op", "name": "big", "ts": 5, "dur": 1, "args": {"x": "y" * (3 << 20)}})
    path = tmp_path / "t.json"
    path.write_bytes(_trace_bytes(20_000, {8_000: giant}))
    raw = _raw_runs(monkeypatch)
    scanned = _read(path, monkeypatch, "1", "1")
    assert 4_000 < sum(raw) <= 8_000, sum(raw)  # the runs before it, in the bytes
    assert scanned == _read(path, monkeypatch, "1", "0") == _read(path, monkeypatch, "0", "0")


@pytest.mark.parametrize("where", ["a character cut by the first chunk's end", "an event's name"])
def test_scan_goes_back_to_decoded_text_where_the_bytes_are_not_ascii(where: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "an event's name":
        data = _trace_bytes(20_000, {14_000: json.dumps({"ph": "X", "cat": "kernel", "name": "k\u00e9\u540d",
                                                         "pid": 0, "tid": 7, "ts": 1, "dur": 2}, ensure_ascii=False)})
    else:  # an event's "é" (two bytes) is cut by the end of the first 1 MiB chunk, which holds the events' start
        odd = {3_000: json.dumps({"ph": "X", "cat": "kernel", "name": "k\u00e9", "ts": 1}, ensure_ascii=False)}
        at = _trace_bytes(20_000, odd).index("\u00e9".encode())
        pad = (1 << 20) - 1 - at - len('"note": "", ')
        data = _trace_bytes(20_000, odd, head='"note": "' + "x" * pad + '", ')
        assert data[(1 << 20) - 1:(1 << 20) + 1] == "\u00e9".encode() and data.index(b"[") < (1 << 20) - 1
    path = tmp_path / "t.json"
    path.write_bytes(data)
    raw = _raw_runs(monkeypatch)
    scanned = _read(path, monkeypatch, "1", "1")
    taken = sum(raw)
    assert scanned == _read(path, monkeypatch, "1", "0") == _read(path, monkeypatch, "0", "0")
    if where == "an event's name":  # the runs before it were read in the bytes, the rest as text
        assert 7_000 < taken < 14_000, taken


@pytest.mark.parametrize("damage", ["bytes that are not UTF-8", "an event that is not JSON", "the file cut short"])
def test_errors_after_runs_read_in_the_bytes_are_the_text_paths(damage: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if damage == "bytes that are not UTF-8":
        data = _trace_bytes(20_000, {15_000: '{"ph": "X", "cat": "kernel", "name": "k@@", "ts": 1}'})
        data = data.replace(b"k@@", b"k\xff")
    elif damage == "an event that is not JSON":
        data = _trace_bytes(20_000, {15_000: '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1,,}'})
    else:
        data = _trace_bytes(20_000)[:-(1 << 20)]
    path = tmp_path / "t.json"
    path.write_bytes(data)
    raw = _raw_runs(monkeypatch)
    scanned = _read(path, monkeypatch, "1", "1")
    assert isinstance(scanned, str) and sum(raw) > 5_000, (scanned, sum(raw))
    assert scanned == _read(path, monkeypatch, "1", "0") == _read(path, monkeypatch, "0", "0")
    assert "character" in scanned or "traceEvents[" in scanned or ":byte " in scanned, scanned


def test_scan_reads_a_buffer_of_bytes_in_place_and_declines_bytes_that_are_not_ascii() -> None:
    events = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2}, ' \
             '{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 2, "dur": 1}'
    alone, scan = _alone_and_a_fresh_scan(events)
    buffer = bytearray(b'{"x": 1}, ' + events.encode() + b', {"ph": "X", "name": "tail, cut')
    got = scan(buffer, 10, 10 + len(events))
    assert got is not None and got.columns == alone.columns
    buffer[10 + events.index("op")] = 0xC3  # a byte of a character that is not ASCII
    assert scan(buffer, 10, 10 + len(events)) is None
    with pytest.raises(ValueError, match="len"):
        scan(buffer, 0, len(buffer) + 1)
