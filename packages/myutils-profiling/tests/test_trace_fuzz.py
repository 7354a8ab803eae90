"""Seeded fuzz of ``myutils-profile trace``: 200 deterministic mutations of each input it reads.

The harness of ``test_corpus_fuzz.py`` (truncation, flipped bytes, garbled lines and tokens;
one fixed seed per format) applied to what ``trace`` reads: a metric events file (MyTimer
regions and clock records, from the shipped profile CSV) and real Kineto traces, plain and
gzipped. Every mutation must either merge (exit 0, a strict-JSON trace that passes the
structural checker) or be refused the way every bad input is: exit 2, one line on stderr naming
the file, no traceback, no output file and no temporary left. The counts per format are printed.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path

MUTATIONS = 200
_DATA = example_config_path().parent / "data"
_JUNK = (b",", b'"', b"{", b"}", b"[", b"]", b"\n", b"\x00", b"NaN", b"-1", b"1e999", b"\xff\xfe", b":", b"\\",
         b'"ph":"X"', b";", b"=", b"\r", b'"s":"g"', b"9" * 400, b'"dur":-5', b'"ts":', b"[" * 2000)


@dataclass(frozen=True)
class Format:
    """One input of trace: its real sample, the name the mutated copy gets, how it is passed."""

    name: str
    sample: Callable[[Any, Path], bytes]
    filename: str
    flag: str  # --events or --torch-trace
    gzip_inner: bool = False


def _events(_real_fixtures: Any, work: Path) -> bytes:
    from my_utils.profiling.formats.mytimer import read_profile_csv_events

    events = list(read_profile_csv_events(_DATA / "profile_rank_0.csv"))
    # a second rank on a measured clock, so that the clock records and --auto-align-ranks are fuzzed too
    t0 = min(e.ts for e in events if e.ts is not None)
    events += [MetricEvent(name="clock_sync", value=0.5, kind="info", unit="s", source="mytimer", rank=r, step=0,
                           ts=t0, attrs={"offset_s": 0.5 * r, "uncertainty_s": 1e-4, "reference_rank": 0,
                                         "applied": 0, "host": f"node{r}"}) for r in (0, 1)]
    events += [MetricEvent(name="iter", value=2.0, kind="duration", unit="ms", source="mytimer", rank=1, step=s,
                           ts=t0 + s * 0.01, attrs={"depth": 0}) for s in range(20)]
    write_events(work / "base.jsonl", events)
    return (work / "base.jsonl").read_bytes()


def _real(rel: str) -> Callable[[Any, Path], bytes]:
    return lambda real_fixtures, _work: (real_fixtures / rel).read_bytes()


FORMATS = [
    Format("events_jsonl", _events, "metrics_events.jsonl", "--events"),
    Format("kineto_json", _real("kineto/kineto_repo/after_fix_trace.json"), "trace_rank_0.json", "--torch-trace"),
    Format("kineto_json_gz", _real("kineto/hta/critical_path__alexnet_trace.json.gz"), "trace_rank_0.json.gz",
           "--torch-trace", gzip_inner=True),
]


def _garble_text(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n") if data.count(b"\n") > 4 else data.split(b"},")  # one-line JSON: by event
    sep = b"\n" if data.count(b"\n") > 4 else b"},"
    op = rng.randrange(5)
    if op == 0 and len(lines) > 1:  # drop a line
        del lines[rng.randrange(len(lines))]
    elif op == 1:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif op == 2 and len(lines) > 2:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:  # structural characters where they break the most
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(lines))
            at = rng.randrange(len(lines[i]) + 1)
            cut = rng.randrange(0, 4) if op == 3 else 0
            lines[i] = lines[i][:at] + rng.choice(_JUNK) + lines[i][at + cut:]
    return sep.join(lines)


def mutate(fmt: Format, data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One deterministic mutation of ``data``: its kind and the bytes."""
    kind = ("truncate", "flip", "garble")[rng.randrange(3)]
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data))]
    if kind == "flip":
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return kind, bytes(buf)
    if fmt.gzip_inner:
        return kind, gzip.compress(_garble_text(gzip.decompress(data), rng), mtime=0)
    return kind, _garble_text(data, rng)


def run_case(fmt: Format, runner: CliRunner, work: Path, path: Path, data: bytes, index: int) -> str:
    """Write ``data`` to ``path`` and merge it; 'parsed' or 'refused' (anything else fails the test)."""
    path.write_bytes(data)
    out_dir = work / "out"
    out = out_dir / "merged.json"
    result = runner.invoke(app, ["trace", fmt.flag, str(path), "--output", str(out), "--auto-align-ranks",
                                 "--executor", "serial", "-q"])
    context = f"{fmt.name} mutation {index}: exit {result.exit_code}, stderr {result.stderr!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(context) from result.exception
    if result.exit_code == 0:
        text = out.read_text(encoding="utf-8")
        doc = json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in output: {context}"))
        assert check_trace(doc) == [], context
        for p in out_dir.iterdir():
            p.unlink()
        return "parsed"
    assert result.exit_code == 2, context
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), context
    assert str(path) in lines[0], context  # names the file at fault
    assert "Traceback" not in result.stderr, context
    assert not out_dir.exists() or list(out_dir.iterdir()) == [], context  # no output, no temporary
    return "refused"


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_seeded_mutations_merge_or_are_refused_on_one_line(fmt: Format, real_fixtures: Any, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = fmt.sample(real_fixtures, tmp_path)
    path = tmp_path / fmt.filename
    runner = CliRunner()
    assert run_case(fmt, runner, tmp_path, path, base, -1) == "parsed"  # the real input itself merges
    rng = random.Random(zlib.crc32(f"trace {fmt.name}".encode()))  # one fixed seed per format
    counts = {"parsed": 0, "refused": 0}
    kinds: dict[str, int] = {}
    for index in range(MUTATIONS):
        kind, data = mutate(fmt, base, rng)
        kinds[kind] = kinds.get(kind, 0) + 1
        counts[run_case(fmt, runner, tmp_path, path, data, index)] += 1
    line = (f"trace fuzz {fmt.name:<16} {MUTATIONS} mutations ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"
            f": parsed {counts['parsed']}, refused {counts['refused']}")
    with capsys.disabled():  # the counts belong in the CI log (the closing note reports them)
        print(f"\n{line}")
    assert sum(counts.values()) == MUTATIONS and counts["refused"] > 0


def test_a_refused_mutation_in_a_real_process(real_fixtures: Any, tmp_path: Path) -> None:
    """The first refused gzip mutation, run as a real process: exit 2, one line, nothing written."""
    fmt = FORMATS[2]
    base = fmt.sample(real_fixtures, tmp_path)
    path = tmp_path / fmt.filename
    rng = random.Random(zlib.crc32(f"trace {fmt.name}".encode()))
    runner = CliRunner()
    for index in range(MUTATIONS):
        _, data = mutate(fmt, base, rng)
        if run_case(fmt, runner, tmp_path, path, data, index) == "refused":
            break
    else:
        pytest.fail("no refused mutation")
    out = tmp_path / "subprocess_out" / "t.json"
    proc = subprocess.run([sys.executable, "-c", "from my_utils.profiling.cli import main; main()", "trace",
                           "--torch-trace", str(path), "--output", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert proc.stdout == "" and not out.parent.exists()
