"""Seeded corpus fuzz: 200 deterministic mutations of a real file per input format, through the real CLI.

Every mutation (truncation, flipped bytes, garbled structure; one fixed seed per format)
must either be read (exit 0, strict-JSON outputs) or be refused the way every bad input is:
exit 2, one line on stderr naming the file, no traceback, no output file. The inputs of
``ingest`` (every provider's format and the configs), of ``analyze`` (an events file) and of
``diff`` (a report, a plain and a gzip Kineto trace, each against its unmutated original)
are covered. The command runs in-process (typer's runner: 2,800 interpreter starts would
not fit in CI on two cores); ``test_subprocess_samples`` proves the same outcome for real
processes. Counts per format are printed in the test output.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from my_utils.core.errors import InputError
from my_utils.core.events import read_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path

MUTATIONS = 200
_DATA = example_config_path().parent / "data"
_JUNK = (b",", b'"', b"{", b"}", b"[", b"]", b"\n", b"\x00", b"NaN", b"-1", b"1e999", b"\xff\xfe", b":", b"\\",
         b'"ph":"X"', b";", b"=", b"\r",
         # hostile names: a formula after a carriage return, a lone surrogate (JSON escape and CESU bytes)
         b"\r=HYPERLINK(", b"@SUM(", b"\\ud800", b"\xed\xa0\x80")


@dataclass(frozen=True)
class Format:
    """One input format: where its real sample comes from, how to read it, how to mutate it."""

    name: str
    sample: Callable[[Path], Path]  # real_fixtures -> the real file
    filename: str  # name the mutated copy gets
    provider: str  # "" when the file itself is the config, "events" for the JSONL reader
    text: bool  # structure-aware garbling by lines and tokens
    gzip_inner: bool = False  # garble the decompressed text, then compress again


def _real(rel: str) -> Callable[[Path], Path]:
    return lambda real_fixtures: real_fixtures / rel


def _shipped(name: str) -> Callable[[Path], Path]:
    return lambda _real_fixtures: _DATA / name


def _test_data(name: str) -> Callable[[Path], Path]:
    """A hand-built sample in tests/data (no public real sample exists: tests/data/MANIFEST.md)."""
    return lambda _real_fixtures: Path(__file__).resolve().parent / "data" / name


def _example_config(_real_fixtures: Path) -> Path:
    return example_config_path()


FORMATS = [
    Format("profile_csv", _shipped("profile_rank_0.csv"), "profile_rank_0.csv", "mytimer", True),
    Format("events_jsonl", _shipped("profile_rank_0.csv"), "metrics_events.jsonl", "events", True),
    Format("kineto_json", _real("kineto/kineto_repo/after_fix_trace.json"), "trace.json", "torch_profiler", True),
    Format("kineto_json_gz", _real("kineto/hta/critical_path__alexnet_trace.json.gz"), "trace.json.gz",
           "torch_profiler", False, gzip_inner=True),
    Format("ncu_csv", _real("ncu/ai4mat__metrics_713_paddle_.csv"), "ncu.csv", "ncu_csv", True),
    Format("nsys_sqlite", _real("nsys/extrap__con_kernel.sqlite"), "nsys.sqlite", "nsys_sqlite", False),
    Format("cprofile_pstats", _real("cprofile/gprof2dot__print1.pstats"), "p.pstats", "cprofile", False),
    Format("table_csv", _shipped("op_summary.csv"), "table.csv", "table_csv", True),
    Format("nccl_log", _real("nccl/dsl__example_2.502726.o.nccl2.22.3.log"), "nccl.log", "nccl_log", True),
    Format("perf_stat", _real("perf/two_sum__perf_stat.txt"), "perf.txt", "perf_stat", True),
    Format("dcgm_dmon", _test_data("dcgmi_dmon_2gpu_h100.txt"), "dmon.txt", "dcgm_dmon", True),
    Format("nccl_inspector", _test_data("nccl_inspector/dgx-a07-pid48211.log"), "inspector.log", "nccl_inspector",
           True),
    Format("nccl_ras", _test_data("nccl_ras/status_problem_twice.txt"), "ras.txt", "nccl_ras", True),
    Format("config_json", _example_config, "config.json", "", True),
    Format("config_yaml", _example_config, "config.yaml", "", True),
    # the commands that read what ingest writes: analyze (events) and diff (reports and traces)
    Format("analyze_events", _shipped("profile_rank_0.csv"), "metrics_events.jsonl", "analyze", True),
    Format("diff_report", _shipped("profile_rank_0.csv"), "analysis_report.json", "diff_report", True),
    Format("diff_trace", _real("kineto/kineto_repo/after_fix_trace.json"), "trace.json", "diff_trace", True),
    Format("diff_trace_gz", _real("kineto/hta/critical_path__event_sync_multi_stream.json.gz"), "test.json.gz",
           "diff_trace", False, gzip_inner=True),
]


# -- mutations ---------------------------------------------------------------------------


def _garble_text(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
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
    return b"\n".join(lines)


def _garble_binary(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    block = 512 if len(buf) > 4096 else 16
    at = rng.randrange(0, max(1, len(buf) - block))
    if rng.random() < 0.5:
        buf[at:at + block] = bytes(block)  # a zeroed block (a lost page)
    else:
        src = rng.randrange(0, max(1, len(buf) - block))
        buf[at:at + block] = buf[src:src + block]  # a block copied over another
    return bytes(buf)


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
    return kind, (_garble_text if fmt.text else _garble_binary)(data, rng)


# -- running one case --------------------------------------------------------------------


def _base_bytes(fmt: Format, real_fixtures: Path, work: Path) -> bytes:
    """The unmutated input: the real file, or for configs and events a real file converted."""
    source = fmt.sample(real_fixtures)
    if fmt.name in ("events_jsonl", "analyze_events", "diff_report"):
        from my_utils.core.events import write_events
        from my_utils.profiling.formats.mytimer import read_profile_csv_events

        write_events(work / "base.jsonl", read_profile_csv_events(source))
        if fmt.name == "diff_report":  # the real analyzer's report of that run: the unmutated base side
            from my_utils.profiling.analysis import MetricsAnalyzer

            MetricsAnalyzer(work / "base.jsonl", "pretrain").analyze().write(work / "base_report.json")
            return (work / "base_report.json").read_bytes()
        return (work / "base.jsonl").read_bytes()
    if fmt.provider == "diff_trace":  # the unmutated trace is the base side of every diff
        shutil.copy(source, work / f"base_{fmt.filename}")
    if fmt.name.startswith("config_"):
        # the shipped example config, its inputs copied beside it so relative paths resolve
        shutil.copytree(source.parent / "data", work / "data", dirs_exist_ok=True)
        cfg = json.loads(source.read_text())
        if fmt.name == "config_yaml":
            return yaml.safe_dump(cfg, sort_keys=False).encode()
        return json.dumps(cfg, indent=2).encode()
    return source.read_bytes()


def _config_for(fmt: Format, work: Path, path: Path) -> Path:
    if not fmt.provider:
        return path
    cfg = work / f"{fmt.name}.config.json"
    if not cfg.exists():
        cfg.write_text(json.dumps({"run_id": "fuzz", "providers": [{"provider": fmt.provider,
                                                                      "input": path.name}]}))
    return cfg


def _command(fmt: Format, work: Path, path: Path, out: Path) -> tuple[list[str], list[Path]]:
    """The command line reading ``path`` and the files it writes into ``out``."""
    if fmt.provider == "analyze":
        return (["analyze", "--events", str(path), "--output-dir", str(out), "--formats", "json,markdown", "-q"],
                [out / "analysis_report.json", out / "analysis_report.md"])
    if fmt.provider in ("diff_report", "diff_trace"):
        flag = "report" if fmt.provider == "diff_report" else "trace"
        base = work / ("base_report.json" if flag == "report" else f"base_{fmt.filename}")
        written = [out / "diff.json", out / "diff.md"]
        return (["diff", f"--base-{flag}", str(base), f"--target-{flag}", str(path), "--output", str(written[0]),
                 "--markdown", str(written[1])], written)
    return (["ingest", "--config", str(_config_for(fmt, work, path)), "--output-dir", str(out), "--quiet"],
            [out / "metrics_events.jsonl"])


def run_case(fmt: Format, runner: CliRunner, work: Path, path: Path, data: bytes, index: int) -> str:
    """Write ``data`` to ``path``, read it like a user would; return 'parsed' or 'refused' (else fail)."""
    path.write_bytes(data)
    out = work / f"out{index}"
    if fmt.provider == "events":  # no command reads events files yet: the reader the CLIs will use
        try:
            events = read_events(path)
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc), exc
            return "refused"
        return "parsed" if events is not None else "?"
    args, written = _command(fmt, work, path, out)
    result = runner.invoke(app, args)
    context = f"{fmt.name} mutation {index}: exit {result.exit_code}, stderr {result.stderr!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(context) from result.exception
    if result.exit_code == 0:
        for output in written:  # rule 5: strict JSON (no bare NaN/Infinity) wherever JSON is written
            lines = output.read_text(encoding="utf-8").splitlines() if output.suffix == ".jsonl" else (
                [output.read_text(encoding="utf-8")] if output.suffix == ".json" else [])
            for line in lines:
                json.loads(line, parse_constant=lambda token: pytest.fail(f"bare {token} in output: {context}"))
        shutil.rmtree(out)
        return "parsed"
    assert result.exit_code == 2, context
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), context
    # names the file at fault: the input, its config, or (a mutated config) the data file it points to
    assert path.name in lines[0] or str(work) in lines[0], context
    assert "Traceback" not in result.stderr and not out.exists(), context
    assert not any(p.exists() for p in written), context
    return "refused"


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_seeded_mutations_are_parsed_or_refused_on_one_line(
    fmt: Format, real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _base_bytes(fmt, real_fixtures, tmp_path)
    path = tmp_path / fmt.filename
    runner = CliRunner()
    assert run_case(fmt, runner, tmp_path, path, base, -1) == "parsed"  # the real file itself reads
    rng = random.Random(zlib.crc32(fmt.name.encode()))  # one fixed seed per format
    counts = {"parsed": 0, "refused": 0}
    kinds: dict[str, int] = {}
    for index in range(MUTATIONS):
        kind, data = mutate(fmt, base, rng)
        kinds[kind] = kinds.get(kind, 0) + 1
        counts[run_case(fmt, runner, tmp_path, path, data, index)] += 1
    line = (f"corpus fuzz {fmt.name:<16} {MUTATIONS} mutations ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"
            f": parsed {counts['parsed']}, refused {counts['refused']}")
    with capsys.disabled():  # the counts belong in the CI log (the closing note reports them)
        print(f"\n{line}")
    assert sum(counts.values()) == MUTATIONS
    assert counts["refused"] > 0  # the mutations really break things


_SAMPLES = ["nsys_sqlite", "kineto_json_gz", "config_yaml"]


@pytest.mark.parametrize("name", _SAMPLES)
def test_subprocess_samples(name: str, real_fixtures: Path, tmp_path: Path) -> None:
    """The first refused mutation of a few formats, run as a real process: exit 2, one line, nothing written."""
    fmt = next(f for f in FORMATS if f.name == name)
    base = _base_bytes(fmt, real_fixtures, tmp_path)
    path = tmp_path / fmt.filename
    rng = random.Random(zlib.crc32(fmt.name.encode()))
    runner = CliRunner()
    for index in range(MUTATIONS):
        _, data = mutate(fmt, base, rng)
        if run_case(fmt, runner, tmp_path, path, data, index) == "refused":
            break
    else:
        pytest.fail(f"no refused mutation for {name}")
    out = tmp_path / "subprocess_out"
    proc = subprocess.run(
        [sys.executable, "-c", "from my_utils.profiling.cli import main; main()", "ingest", "--config",
         str(_config_for(fmt, tmp_path, path)), "--output-dir", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert proc.stdout == "" and not out.exists()
