"""What ``trace`` leaves in the output folder: exactly one run's files, all of them or none, and a part over
``--max-mb`` only with a warning that names the event too large to split."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.core.scratch import owner_token
from my_utils.core.testing.trace_check import check_trace
from my_utils.profiling.cli import app

T0 = 1_700_000_000.0
CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _events(path: Path, ranks: int, steps: int) -> Path:
    events = [MetricEvent(name="iter", value=0.5, kind="duration", unit="ms", source="mytimer", rank=r, step=s,
                          ts=T0 + s * 0.001, attrs={"depth": 0}) for r in range(ranks) for s in range(steps)]
    out = path / "metrics_events.jsonl"
    write_events(out, events)
    return out


def _read(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_rerun_leaves_exactly_its_own_parts(tmp_path: Path) -> None:
    events = _events(tmp_path, 4, 3000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "big.json.gz"
    foreign = ["big.part1.json.gz.bak", "big.partX.json.gz", "other.part1.json.gz", "big.part01.json.gz"]
    for name in foreign:  # not our naming of this output: never touched
        (out_dir / name).write_text("keep")
    res = _run("trace", "--events", str(events), "--output", str(out), "--max-mb", "0.3", "-q")
    assert res.exit_code == 0, res.output
    many = [n for n in _listing(out_dir) if n not in foreign]
    assert len(many) >= 4 and "big.json.gz" not in many

    def parts_agree() -> list[str]:
        ours = [n for n in _listing(out_dir) if n not in foreign]
        for name in ours:
            doc = _read(out_dir / name)
            assert check_trace(doc) == []
            assert sorted(doc["otherData"]["part"]["files"]) == ours  # every part names exactly the set present
        return ours

    parts_agree()
    res = _run("trace", "--events", str(events), "--output", str(out), "--max-mb", "0.6", "-q")  # fewer parts
    assert res.exit_code == 0, res.output
    fewer = parts_agree()
    assert 2 <= len(fewer) < len(many)
    res = _run("trace", "--events", str(events), "--output", str(out), "-q")  # not split: one file, no parts
    assert res.exit_code == 0, res.output
    assert [n for n in _listing(out_dir) if n not in foreign] == ["big.json.gz"]
    res = _run("trace", "--events", str(events), "--output", str(out), "--max-mb", "0.6", "-q")  # split again
    assert res.exit_code == 0, res.output
    assert parts_agree() == fewer  # the whole-trace file of the previous run is gone
    assert all((out_dir / n).read_text() == "keep" for n in foreign)


def _limited(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_failed_rerun_leaves_the_previous_parts_as_they_were(tmp_path: Path) -> None:
    events = _events(tmp_path, 40, 300)  # spill files of ~40 KB, output parts of 0.5 MB
    out = tmp_path / "out" / "t.json"
    cmd = [*CLI, "trace", "--events", str(events), "--output", str(out),
           "--executor", "serial", "-q"]
    first = subprocess.run([*cmd, "--max-mb", "0.5"], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    assert len(before) >= 3
    res = subprocess.run([*cmd, "--max-mb", "0.3"], capture_output=True, text=True, timeout=300,
                         preexec_fn=_limited(200_000))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0] and "Traceback" not in res.stderr
    assert str(out.parent / "t.part1.json") in lines[0]  # the output's name, not a hidden temporary
    assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == before


def test_temporaries_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    events = _events(tmp_path, 2, 10)
    out = tmp_path / "t.json"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = f"{int(gone.stdout)}-1"  # that process has exited (and a start time of 1 tick is no live process's)
    left = [tmp_path / f".t.json.{dead}.abc123.tmp", tmp_path / f".t.part2.json.{dead}.x_y.tmp"]
    kept = [tmp_path / f".t.json.{owner_token()}.live12.tmp",  # a live owner: a write still going
            tmp_path / f".other.json.{dead}.abc123.tmp",  # another output's
            tmp_path / ".t.json.abc123.tmp"]  # no owner in its name: not ours to judge
    for p in left + kept:
        p.write_text("partial")
    res = _run("trace", "--events", str(events), "--output", str(out), "-q")
    assert res.exit_code == 0, res.output
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_an_event_larger_than_the_limit_gets_a_part_of_its_own_and_a_warning(tmp_path: Path) -> None:
    big = "x" * (3 << 20)
    trace = {"traceEvents": [{"ph": "X", "name": f"op{i}", "ts": i * 10.0, "dur": 5.0, "pid": 1, "tid": 1,
                              "cat": "cpu_op"} for i in range(20_000)]
             + [{"ph": "X", "name": big, "ts": 100_000.5, "dur": 1.0, "pid": 1, "tid": 1, "cat": "cpu_op"}],
             "baseTimeNanoseconds": int(T0 * 1e9), "distributedInfo": {"rank": 0}}
    source = tmp_path / "trace_rank_0.json"
    source.write_text(json.dumps(trace))
    out = tmp_path / "out" / "t.json"
    write_events(tmp_path / "metrics_events.jsonl", [])  # the torch trace alone
    res = _run("trace", "--events", str(tmp_path / "metrics_events.jsonl"), "--torch-trace", str(source),
               "--output", str(out), "--max-mb", "1", "--executor", "serial", "-q")
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "3.00 MB of JSON by itself" in warnings[0]
    assert "'xxxxx" in warnings[0] and "3,145,728 characters" in warnings[0] and len(warnings[0]) < 600
    sizes = {p.name: p.stat().st_size for p in out.parent.iterdir()}
    over = [name for name, size in sizes.items() if size > 1 << 20]
    assert len(over) == 1 and over[0] in warnings[0]
    doc = _read(out.parent / over[0])
    assert [e["name"] for e in doc["traceEvents"] if e.get("ph") == "X"] == [big]  # alone in its part, whole
    assert any("by itself" in w for w in doc["otherData"]["warnings"])
    assert sum(1 for n in sizes for e in _read(out.parent / n)["traceEvents"] if e.get("ph") == "X") == 20_001
