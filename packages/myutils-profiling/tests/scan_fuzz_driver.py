"""Mutated runs of trace events through a given build of ``_kineto_scan``, compared with the pure path.

Run as a script by ``test_trace_scan_sanitized.py`` in a process that has AddressSanitizer preloaded:
``python scan_fuzz_driver.py MODULE_PATH TRACE_PATH COUNT SEED``. A sanitizer report aborts the process
(the test sees its exit status and stderr). Every run is read two ways:

- the scanner, through ``TraceAggregator.scanner()`` (a str, and the same text as bytes inside a larger
  buffer, so that slices and both reading modes are exercised), taken or declined;
- the pure path: ``json.loads`` and ``TraceAggregator.add`` per event, read or refused.

A run the scanner takes must be one the pure path reads into the same columns and the same metric events
(the compiled ``finish`` helpers against the Python ones, too). The last line printed is a JSON summary.
Not a test module: pytest does not collect it (no ``test_`` prefix).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

TOKENS = ["1e999", "-0", "00", "1.", ".5", "NaN", "Infinity", "-", "9" * 25, "null", "true", "false", '"\\ud800"',
          '"\\ud83d\\ude00"', '"\\u0000"', '"\\q"', "[" * 40 + "]" * 40, "4.9e-324", "1.7976931348623157e308",
          "2.2250738585072014e-308", "0.1e1", "123456789012345678", "-9223372036854775808", "9223372036854775808",
          '"ProfilerStep#99999999999999999999"', '"[memory]"', '"cuda_runtime"', '"kernel"', ",", ":", "{", "}", '"',
          "\\", " ", "\t", "\n", '"correlation"', '"Device Type"', '"Total Allocated"', "1e-7", "-1.5E+3"]
EDGE_NUMBERS = ["4.9e-324", "1.7976931348623157e308", "2.2250738585072014e-308", "0.1e1", "123456789012345678",
                "-9223372036854775808", "9223372036854775808", "0", "1", "1e308", "1e-320", "-0.0"]
CHARS = '{}[],:"\\0123456789.eE+-ntfu ' + "\x00\x7f"


def load(module_path: str) -> Any:
    spec = importlib.util.spec_from_file_location("myutils_sanitized._kineto_scan", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event_runs(trace: Path, rng: random.Random, count: int) -> list[str]:
    """``count`` runs of 1-40 consecutive events of ``trace``, each event spelled with random separators."""
    import gzip

    raw = trace.read_bytes()
    events = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]
    runs = []
    for _ in range(count):
        at = rng.randrange(len(events))
        window = events[at:at + rng.randint(1, 40)]
        seps = rng.choice([(",", ":"), (", ", ": "), (" ,\n", " :\t")])
        runs.append(seps[0].join(json.dumps(e, separators=seps) for e in window))
    return runs


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randrange(len(text) + 1)
        if op == 0:
            text = text[:at] + rng.choice(CHARS) + text[at + 1:]
        elif op == 1:
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif op == 2:
            text = text[:at] + text[at + rng.randint(1, 12):]
        elif op == 3:
            text = text[:at]
        elif op == 4:  # a number replaced by an edge spelling
            digits = [i for i, c in enumerate(text) if c.isdigit()]
            if digits:
                i = rng.choice(digits)
                j = i
                while j < len(text) and (text[j].isdigit() or text[j] in ".eE+-"):
                    j += 1
                text = text[:i] + rng.choice(EDGE_NUMBERS) + text[j:]
        else:  # a span duplicated (duplicate keys, events)
            j = min(len(text), at + rng.randint(1, 60))
            text = text[:j] + text[at:j] + text[j:]
    return text


def pure(text: str, agg: Any) -> bool:
    """Read ``text`` the dict way into ``agg``: True when read, False when the pure path refuses it."""
    from my_utils.core.errors import InputError

    try:
        events = json.loads("[" + text + "]")
    except (ValueError, RecursionError):
        return False
    try:
        for ev in events:
            if not isinstance(ev, dict):
                return False
            agg.add(ev)
    except InputError:
        return False
    return True


def columns(agg: Any) -> tuple[Any, ...]:
    return (tuple(c.tobytes() for c in (*agg.dev, *agg.host, agg.rt_corr, agg.rt_ts, *agg.mem)), tuple(agg.steps),
            tuple(agg.name_list), agg.count)


def finished(agg: Any, fast: bool) -> str:
    os.environ["MYUTILS_TRACE_SCAN"] = "1" if fast else "0"
    try:
        return repr(agg.finish({}, None, "fuzz"))
    finally:
        os.environ["MYUTILS_TRACE_SCAN"] = "1"


def main(module_path: str, trace: str, count: int, seed: int) -> int:
    from my_utils.profiling.kineto.read import scan as trace_scan
    from my_utils.profiling.kineto.read.aggregate import TraceAggregator

    module = load(module_path)
    assert module.ABI == trace_scan.ABI, (module.ABI, trace_scan.ABI)
    trace_scan._compiled = module  # the build under test serves the scan and the finish helpers
    trace_scan._scan = module.scan
    os.environ["MYUTILS_TRACE_SCAN"] = "1"
    os.environ["MYUTILS_TYPED_TRACE"] = "1"
    rng = random.Random(seed)
    stats = {"runs": 0, "taken": 0, "declined": 0, "pure_read": 0, "pure_refused": 0, "bytes_taken": 0}
    for base in event_runs(Path(trace), rng, count):
        text = base if rng.random() < 0.1 else mutate(base, rng)
        stats["runs"] += 1
        scanned = TraceAggregator(Path("t.json"))
        run = scanned.scanner()(text, 0, len(text))
        plain = TraceAggregator(Path("t.json"))
        read = pure(text, plain)
        stats["pure_read" if read else "pure_refused"] += 1
        if text.isascii():  # the file's bytes, read in place inside a larger buffer
            pad = rng.randint(0, 64)
            buf = bytearray(b"x" * pad + text.encode("ascii") + b"y" * rng.randint(0, 64))
            in_bytes = TraceAggregator(Path("t.json")).scanner()(buf, pad, pad + len(text))
            if (in_bytes is None) != (run is None):
                print(f"DISAGREE str/bytes taken: {text!r}", flush=True)
                return 1
            stats["bytes_taken"] += in_bytes is not None
        if run is None:
            stats["declined"] += 1
            continue
        stats["taken"] += 1
        if not read:
            print(f"DISAGREE taken by the scanner, refused by the pure path: {text!r}", flush=True)
            return 1
        scanned.add_batch(run)
        if columns(scanned) != columns(plain):
            print(f"DISAGREE columns: {text!r}", flush=True)
            return 1
        if finished(scanned, True) != finished(plain, False):
            print(f"DISAGREE finish (compiled helpers vs Python): {text!r}", flush=True)
            return 1
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
