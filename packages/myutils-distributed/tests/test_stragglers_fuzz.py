"""Seeded corpus fuzz of ``myutils stragglers``: 200 deterministic mutations of a real MyTimer run.

The same idea as the ingest fuzz (packages/myutils-profiling/tests/test_corpus_fuzz.py): a
real input (three ranks written by MyTimer and GlobalLogger in a child process, CLOCK_SYNC
rows included), one fixed seed, truncations, flipped bytes and garbled structure applied to
one rank's file at a time, and single fields replaced by tokens chosen to break (``nan``, ``1e999``,
400 digits, bytes that are not UTF-8). Every mutation must be read (exit 0, strict JSON) or refused the
way every bad input is: exit 2, one line on stderr naming the file, no traceback, and
nothing left in the folder (stragglers writes no file; no temporary may stay behind). The
command runs in-process through typer's runner (200 interpreter starts would not fit in CI
on two cores); ``test_a_refused_mutation_as_a_real_process`` shows the same for a process.
The counts are printed in the test output.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app

MUTATIONS = 200
RANKS = 3
GENERATOR = Path(__file__).resolve().parent / "mytimer_run.py"
_JUNK = (b",", b'"', b"\n", b"\r", b"\x00", b"NaN", b"nan", b"inf", b"-1", b"1e999", b"9" * 400, b"\xff\xfe",
         b"\xe9", b";", b"=", b"START", b"END", b"CLOCK_SYNC", b"offset_s=", b"applied=0", b"-9223372036854775809")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three ranks x 8 steps written by MyTimer in a child process (its GlobalLogger is a singleton)."""
    out = tmp_path_factory.mktemp("mytimer") / "run"
    proc = subprocess.run([sys.executable, str(GENERATOR), str(out), str(RANKS), "8"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for extra in out.iterdir():  # the loggers' own text logs are not profile CSVs
        if not extra.name.startswith("profile_rank_"):
            extra.unlink()
    assert sorted(p.name for p in out.iterdir()) == [f"profile_rank_{r}.csv" for r in range(RANKS)]
    return out


def _garble(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    op = rng.randrange(5)
    if op == 0 and len(lines) > 1:  # drop a line
        del lines[rng.randrange(len(lines))]
    elif op == 1:  # duplicate a line (steps going back, a second header)
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif op == 2 and len(lines) > 2:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:  # tokens where they break the most: inside fields, over separators
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(lines))
            at = rng.randrange(len(lines[i]) + 1)
            cut = rng.randrange(0, 4) if op == 3 else 0
            lines[i] = lines[i][:at] + rng.choice(_JUNK) + lines[i][at + cut:]
    return b"\n".join(lines)


def _field(data: bytes, rng: random.Random) -> bytes:
    """One field of one row replaced by a junk token: a number that overflows, a name that is not UTF-8, ..."""
    lines = data.split(b"\n")
    i = rng.randrange(1, max(2, len(lines) - 1))
    fields = lines[i].split(b",")
    column = rng.choice((0, 3, 4, 5, 6, 6, 6, 7))  # the duration most: it is summed and divided
    if column < len(fields):
        fields[column] = rng.choice(_JUNK)
    lines[i] = b",".join(fields)
    return b"\n".join(lines)


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One deterministic mutation of ``data``: its kind and the bytes."""
    kind = ("truncate", "flip", "garble", "field")[rng.randrange(4)]
    if kind == "field":
        return kind, _field(data, rng)
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data))]
    if kind == "flip":
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return kind, bytes(buf)
    return kind, _garble(data, rng)


def run_case(runner: CliRunner, app: object, folder: Path, target: Path, context: str) -> str:
    """Run ``stragglers --json`` on ``folder``; 'parsed' or 'refused', or fail saying why."""
    before = sorted(p.name for p in folder.iterdir())
    result = runner.invoke(app, ["stragglers", str(folder), "--json"])  # type: ignore[arg-type]
    context = f"{context}: exit {result.exit_code}, stderr {result.stderr[-600:]!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(context) from result.exception
    assert sorted(p.name for p in folder.iterdir()) == before, context  # nothing written, nothing left
    if result.exit_code == 0:
        doc = json.loads(result.stdout, parse_constant=lambda token: pytest.fail(f"bare {token}: {context}"))
        assert doc["ranks"] == list(range(RANKS)), context
        return "parsed"
    assert result.exit_code == 2, context
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, context
    assert target.name in lines[0], context  # names the file at fault
    assert result.stdout == "", context
    return "refused"


def _mutations(real_run: Path) -> list[tuple[int, str, bytes]]:
    rng = random.Random(zlib.crc32(b"stragglers"))  # one fixed seed
    bases = [(real_run / f"profile_rank_{r}.csv").read_bytes() for r in range(RANKS)]
    out = []
    for _ in range(MUTATIONS):
        rank = rng.randrange(RANKS)
        kind, data = mutate(bases[rank], rng)
        out.append((rank, kind, data))
    return out


def test_seeded_mutations_are_parsed_or_refused_on_one_line(real_run: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "run"
    shutil.copytree(real_run, folder)
    runner, app = CliRunner(), build_app()
    assert run_case(runner, app, folder, folder / "profile_rank_0.csv", "the real run") == "parsed"
    counts = {"parsed": 0, "refused": 0}
    kinds: dict[str, dict[str, int]] = {}
    for index, (rank, kind, data) in enumerate(_mutations(real_run)):
        target = folder / f"profile_rank_{rank}.csv"
        target.write_bytes(data)
        outcome = run_case(runner, app, folder, target, f"mutation {index} ({kind} of rank {rank})")
        counts[outcome] += 1
        kinds.setdefault(kind, {"parsed": 0, "refused": 0})[outcome] += 1
        shutil.copyfile(real_run / target.name, target)
    by_kind = ", ".join(f"{k} {v['parsed']}/{v['refused']}" for k, v in sorted(kinds.items()))
    line = (f"stragglers fuzz: {MUTATIONS} mutations of a 3-rank MyTimer run: parsed {counts['parsed']}, "
            f"refused {counts['refused']} (parsed/refused by kind: {by_kind})")
    with capsys.disabled():  # the counts belong in the CI log
        print(f"\n{line}")
    assert sum(counts.values()) == MUTATIONS
    assert counts["refused"] > 0 and counts["parsed"] > 0  # the mutations really break things, not everything


def test_a_refused_mutation_as_a_real_process(real_run: Path, tmp_path: Path) -> None:
    """The first refused mutation, run as a real process: exit 2, one line, nothing written."""
    folder = tmp_path / "run"
    shutil.copytree(real_run, folder)
    runner, app = CliRunner(), build_app()
    for index, (rank, kind, data) in enumerate(_mutations(real_run)):
        target = folder / f"profile_rank_{rank}.csv"
        target.write_bytes(data)
        if run_case(runner, app, folder, target, f"mutation {index} ({kind})") == "refused":
            break
        shutil.copyfile(real_run / target.name, target)
    else:
        pytest.fail("no refused mutation")
    proc = subprocess.run([sys.executable, "-m", "my_utils.core", "stragglers", str(folder), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: ") and target.name in proc.stderr
    assert proc.stdout == "" and sorted(p.name for p in folder.iterdir()) == [f"profile_rank_{r}.csv"
                                                                              for r in range(RANKS)]
