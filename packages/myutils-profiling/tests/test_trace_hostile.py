"""Kineto traces with hostile content, on all three reading paths (issue 35, items 8, 9, 10).

The paths: the compiled scanner (default), the typed decoder (``MYUTILS_TRACE_SCAN=0``) and the dicts
(``MYUTILS_TYPED_TRACE=0``). Each trace is large enough (over 64 KiB of events) that runs are scanned or
decoded typed, with the hostile event in the middle of a run, and small enough variants go event by event.

- item 8: a lone surrogate in a name (``"k\\ud800x"``, valid JSON, from a truncated C++ string) keeps its
  event; the code point is written as text, never a provider failure (exit 1);
- item 9: a byte that is not UTF-8 is placed at its offset in the file (in the decompressed data of a
  ``.gz``), wherever the read buffers start, found independently by ``bytes.decode``;
- item 10: a correlation beyond 64 bits, a ``Device Type`` of 1e300... name the field that is wrong, not
  ``'ts'/'dur'``, and a file is read the same whether the event falls in a batch or is read alone.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.profiling.kineto.read import events as trace_events
from my_utils.profiling.kineto.read import scan as trace_scan
from my_utils.profiling.kineto.read import stream as trace_stream
from my_utils.profiling.kineto.read.provider import read_trace

PATHS = {"scanner": ("1", "1"), "typed": ("1", "0"), "dicts": ("0", "0")}


def _use(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    if path == "scanner" and not trace_scan.compiled():
        pytest.skip("the C scanner was not built at install (no C compiler or Python.h)")
    typed, scan = PATHS[path]
    monkeypatch.setenv(trace_events.ENV_SWITCH, typed)
    monkeypatch.setenv(trace_scan.ENV_SWITCH, scan)


def _trace(odd: dict[int, str], count: int = 3000) -> str:
    """A trace of ``count`` kernels and ops in one step; event ``i`` of ``odd`` is that JSON text instead."""
    events = ['{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 990.0, '
              f'"dur": {count + 100}.0}}']
    for i in range(count):
        events.append(odd.get(i) or (f'{{"ph": "X", "cat": "kernel", "name": "kern_{i % 7}", "pid": 0, "tid": 7, '
                                     f'"ts": {1000.0 + i}, "dur": 0.5, "args": {{"correlation": {i}}}}}'))
    return '{"traceEvents": [' + ", ".join(events) + "]}"


def _read(path: Path) -> Any:
    try:
        return read_trace(path).events
    except InputError as exc:
        return f"InputError: {exc}"


# -- item 8: lone surrogates ---------------------------------------------------------------------------------


SURROGATE_NAMES = ["k\\ud800x", "op\\udce9", "\\udfff", "a\\ud83d", "\\udc80\\udcff"]  # JSON escapes, all lone


def _surrogate_trace(count: int) -> str:
    odd = {}
    for i in range(0, count, max(1, count // 40)):
        name = SURROGATE_NAMES[i % len(SURROGATE_NAMES)]
        cat = "kernel" if i % 2 else "cpu_op"
        odd[i] = (f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": 7, "ts": {1000.0 + i}, '
                  f'"dur": 0.5, "args": {{"correlation": {i}}}}}')
    return _trace(odd, count)


def _as_text(name: str) -> str:
    """A name with lone surrogates as the project writes text: a byte os.fsdecode escaped (U+DC80-U+DCFF) as
    ``\\xNN``, any other surrogate as ``\\udNNN``."""
    out = []
    for c in name:
        code = ord(c)
        out.append(c if not 0xD800 <= code <= 0xDFFF else f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF
                   and all(0xDC80 <= ord(d) <= 0xDCFF for d in name if 0xD800 <= ord(d) <= 0xDFFF) else f"\\u{code:04x}")
    return "".join(out)


@pytest.mark.parametrize("count", [3000, 10])
def test_a_lone_surrogate_keeps_its_event_on_every_path(count: int, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.json"
    text = _surrogate_trace(count)
    path.write_text(text, encoding="ascii")
    raw = json.loads(text)["traceEvents"]  # the standard library's reading: the names with their surrogates
    expected = {f"{e['cat']}:{_as_text(e['name'])}" for e in raw if e["cat"] in ("kernel", "cpu_op")}
    outputs = {}
    for name in PATHS:
        if name == "scanner" and not trace_scan.compiled():
            continue
        _use(monkeypatch, name)
        events = _read(path)
        assert not isinstance(events, str), events
        got = {e.name for e in events if e.name.startswith(("kernel:", "cpu_op:"))}
        assert got == expected, name
        for e in events:
            e.name.encode("utf-8")  # every name is writable as UTF-8
        outputs[name] = events
    assert len({repr(v) for v in outputs.values()}) == 1  # every path reads the same events


def test_plugins_run_writes_them_on_every_path(tmp_path: Path) -> None:
    """The issue's command: exit 0 and the events written, never 'provider failed' (exit 1)."""
    path = tmp_path / "trace.json"
    path.write_text(_surrogate_trace(3000), encoding="ascii")
    written = {}
    for name, (typed, scan) in PATHS.items():
        out = tmp_path / name
        res = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "torch_profiler", "--input",
                              str(path), "--output-dir", str(out), "-q"], capture_output=True, text=True,
                             timeout=300, env={**os.environ, trace_events.ENV_SWITCH: typed,
                                               trace_scan.ENV_SWITCH: scan})
        assert res.returncode == 0, res.stderr
        written[name] = (out / "metrics_events.jsonl").read_bytes()
        assert b"kernel:k\\\\ud800x" in written[name]  # the code point as text, in valid UTF-8 JSON
        written[name].decode("utf-8")
    assert len(set(written.values())) == 1


# -- item 9: the offset of a byte that is not UTF-8 ----------------------------------------------------------


BAD = [b"\xff", b"\xc3(", b"\xe2\x82(", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0.0, 1.0), bad=st.sampled_from(BAD), gz=st.booleans(), path=st.sampled_from(sorted(PATHS)),
       chunk=st.sampled_from([4096, 65536, 1 << 20]))
def test_a_byte_that_is_not_utf8_is_placed_at_its_offset(where: float, bad: bytes, gz: bool, path: str, chunk: int,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch, path)
    monkeypatch.setattr(trace_stream, "_CHUNK", chunk)  # read buffers starting everywhere
    monkeypatch.setattr(trace_stream, "_DICT_CHUNK", chunk)
    data = _trace({}, 4000).encode()
    names = [m.start() + 1 for m in re.finditer(rb'"kern_', data)]  # inside a name: the JSON stays whole
    at = names[min(int(where * len(names)), len(names) - 1)]
    damaged = data[:at] + bad + data[at:]
    try:
        damaged.decode("utf-8")
    except UnicodeDecodeError as exc:
        expected = exc.start  # the first byte that is not UTF-8, by the standard library
    file = tmp_path / ("t.json.gz" if gz else "t.json")
    file.write_bytes(gzip.compress(damaged) if gz else damaged)
    got = _read(file)
    assert isinstance(got, str), "read a file that is not UTF-8"
    place = f"byte {expected:,}" + (" of the decompressed data" if gz else "")
    assert got.startswith(f"InputError: {file}:{place}: UTF-8 text (a JSON trace); found a byte that is not UTF-8"), got


# -- item 10: the field at fault --------------------------------------------------------------------------------


def _kernel(args: str) -> str:
    return f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000.5, "dur": 0.5, "args": {args}}}'


def _memory(args: str) -> str:
    return f'{{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2000.5, "s": "t", ' \
           f'"args": {args}}}'


FIELD_CASES = {
    "correlation beyond 64 bits": (_kernel('{"correlation": 1180591620717411303424}'), "'args.correlation'"),
    "correlation -2**63 - 1": (_kernel('{"correlation": -9223372036854775809}'), "'args.correlation'"),
    "float correlation": (_kernel('{"correlation": 5.0}'), "'args.correlation'"),
    "text correlation": (_kernel('{"correlation": "5"}'), "'args.correlation'"),
    "runtime correlation": (_kernel('{"correlation": 1e30}').replace('"kernel"', '"cuda_runtime"'),
                            "'args.correlation'"),
    "Device Type 1e300": (_memory('{"Device Type": 1e300, "Total Allocated": 5, "Total Reserved": 6}'),
                          "'args.Device Type'"),
    "Device Type 200": (_memory('{"Device Type": 200, "Total Allocated": 5, "Total Reserved": 6}'),
                        "'args.Device Type'"),
    "Total Allocated text": (_memory('{"Device Type": 0, "Total Allocated": "x", "Total Reserved": 6}'),
                             "'args.Total Allocated'"),
    "dur text": (_kernel("{}").replace('"dur": 0.5', '"dur": "long"'), "'dur'"),
}


@pytest.mark.parametrize("count", [3000, 4])
@pytest.mark.parametrize("case", sorted(FIELD_CASES))
def test_the_field_at_fault_is_named_on_every_path(case: str, count: int, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    event, field = FIELD_CASES[case]
    at = count // 2
    path = tmp_path / "trace.json"
    path.write_text(_trace({at: event}, count))
    seen = set()
    for name in PATHS:
        if name == "scanner" and not trace_scan.compiled():
            continue
        _use(monkeypatch, name)
        got = _read(path)
        assert isinstance(got, str), f"{name}: read {case}"
        assert got.startswith(f"InputError: {path}:traceEvents[{at + 1}]: {field} on a "), got
        assert "'ts'/'dur'" not in got
        seen.add(got)
    assert len(seen) == 1  # every path says the same
