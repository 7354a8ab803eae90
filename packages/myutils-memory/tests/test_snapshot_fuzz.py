"""Seeded fuzz of ``myutils memory summarize`` and ``cut`` on snapshot pickles, the ingest fuzz's harness for memory.

The base is a real snapshot: a CPU torch profile (shapes, memory, stacks) turned into
torch's snapshot format by ``torch.cuda._memory_viz._profile_to_snapshot`` (the real
fixtures hold no pickled snapshot), once as torch makes it (no times) and once with
``time_us`` and recorded regions added, as a CUDA snapshot has them. Each of 240 mutations
per base (fixed seeds) is either byte-level (truncation, flipped bytes, a zeroed or copied
block) or structure-aware (the unpickled dict with a key dropped, a value of the wrong type,
a huge or non-finite number, shared references, deep nesting, an entry copied many times),
pickled again. Every mutation must be read (exit 0; the cut writes its file) or refused the
way every bad input is: exit 2, one line naming the file, no traceback, no output file.
The parsed/refused counts are printed.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
import zlib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.memory.snapshot import REGIONS_KEY

MUTATIONS = 240
_WRONG = (None, 5, -1, "x", [], {}, [1], {"a": 1}, 2**70, -(2**70), 10**400, 1e999, float("nan"), -0.5, True,
          (1, 2), b"\x00", {1, 2})


def _timed(base: dict[str, Any]) -> dict[str, Any]:
    snap = copy.deepcopy(base)
    for device, trace in enumerate(snap["device_traces"]):
        for i, e in enumerate(trace):
            e["time_us"] = 1_700_000_000_000_000 + 1_000 * i + device
    n = len(snap["device_traces"][0])
    snap[REGIONS_KEY] = [{"name": "step", "start_us": 1_700_000_000_000_000, "stop_us": 1_700_000_000_000_000 + n * 500,
                          "depth": 0}]
    return snap


# -- structure-aware mutations -------------------------------------------------------------


def _containers(obj: Any, rng: random.Random, depth: int = 0) -> tuple[Any, Any]:
    """A random (container, key or index) inside ``obj``, walking down from the top."""
    parent, key = None, None
    current = obj
    while isinstance(current, (dict, list)) and current and depth < 6:
        keys = list(current) if isinstance(current, dict) else range(len(current))
        k = rng.choice(list(keys))
        parent, key, current = current, k, current[k]
        depth += 1
        if rng.random() < 0.25:
            break
    return parent, key


def _structural(snapshot: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    snap = copy.deepcopy(snapshot)
    op = rng.randrange(7)
    parent, key = _containers(snap, rng)
    if parent is None:
        parent, key = snap, "segments"
    if op == 0:  # drop a key / an item
        if isinstance(parent, dict):
            parent.pop(key, None)
        else:
            del parent[key]
        return "drop", snap
    if op == 1:  # a value of the wrong type or a huge / non-finite number
        parent[key] = rng.choice(_WRONG)
        return "wrong type", snap
    if op == 2:  # a field the summary reads, broken on purpose
        trace = snap["device_traces"][0]
        entry = rng.choice(trace) if trace else {}
        entry[rng.choice(["action", "size", "addr", "time_us", "frames"])] = rng.choice(_WRONG)
        return "bad entry field", snap
    if op == 3:  # shared references: one entry or one trace many times (a bomb or not, by size)
        trace = snap["device_traces"][0]
        if trace:
            shared = [rng.choice(trace)] * rng.choice([10, 1000, 100_000])
            snap["device_traces"] = [shared] * rng.choice([1, 3, 3000])
        return "shared refs", snap
    if op == 4:  # nesting far deeper than any snapshot
        deep: list[Any] = []
        for _ in range(rng.choice([50, 5000])):
            deep = [deep]
        parent[key] = deep
        return "deep nesting", snap
    if op == 5:  # a segment or block broken
        seg = rng.choice(snap["segments"]) if snap["segments"] else {}
        target = rng.choice(seg.get("blocks") or [seg]) if rng.random() < 0.5 else seg
        target[rng.choice(["address", "total_size", "size", "device", "state", "blocks", "frames"])] = \
            rng.choice(_WRONG)
        return "bad segment", snap
    # swap two values of different fields
    a, ka = _containers(snap, rng)
    b, kb = _containers(snap, rng)
    if a is not None and b is not None:
        a[ka], b[kb] = b[kb], a[ka]
    return "swap", snap


def _pickled(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=4)
    except RecursionError:  # deeper than pickle goes: write it by hand (EMPTY_LIST n times, APPEND n - 1 times)
        return _deep_pickle(obj)


def _deep_pickle(obj: Any) -> bytes:
    placeholder = "DEEP-PLACEHOLDER"

    def depth(x: Any) -> int:
        n = 0
        while isinstance(x, list) and len(x) == 1 and isinstance(x[0], list):
            x, n = x[0], n + 1
        return n

    found: list[int] = []

    def replace(x: Any) -> Any:
        if isinstance(x, list) and depth(x) > 100:
            found.append(depth(x) + 1)
            return placeholder
        if isinstance(x, dict):
            return {k: replace(v) for k, v in x.items()}
        if isinstance(x, list):
            return [replace(v) for v in x]
        return x

    data = pickle.dumps(replace(obj), protocol=2)
    string = b"X" + len(placeholder).to_bytes(4, "little") + placeholder.encode()
    for n in found:
        data = data.replace(string, b"]" * n + b"a" * (n - 1), 1)
    return data


# -- byte-level mutations (as the ingest fuzz) ------------------------------------------------


def _bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = ("truncate", "flip", "block")[rng.randrange(3)]
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data))]
    buf = bytearray(data)
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return kind, bytes(buf)
    block = 16
    at = rng.randrange(0, max(1, len(buf) - block))
    if rng.random() < 0.5:
        buf[at:at + block] = bytes(block)
    else:
        src = rng.randrange(0, max(1, len(buf) - block))
        buf[at:at + block] = buf[src:src + block]
    return kind, bytes(buf)


def mutate(snapshot: dict[str, Any], base: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One deterministic mutation: byte-level on the pickle, or structure-aware on the dict."""
    if rng.random() < 0.5:
        return _bytes(base, rng)
    kind, snap = _structural(snapshot, rng)
    return kind, _pickled(snap)


# -- running one case ---------------------------------------------------------------------------


def run_case(runner: CliRunner, work: Path, data: bytes, index: int, kind: str) -> str:
    """Write ``data`` as a snapshot; summarize and cut it like a user; 'parsed' or 'refused' (else fail)."""
    path = work / "snap.pickle"
    path.write_bytes(data)
    out = work / f"cut{index}.pickle"
    outcomes = []
    for args in (["memory", "summarize", str(path)],
                 ["memory", "cut", str(path), "--from", "0", "--to", "60", "-o", str(out)]):
        result = runner.invoke(build_app(), args)
        context = f"mutation {index} ({kind}) {args[1]}: exit {result.exit_code}, stderr {result.stderr!r}"
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(context) from result.exception
        if result.exit_code == 0:
            if args[1] == "cut":
                assert out.exists(), context
                out.unlink()
            outcomes.append("parsed")
            continue
        assert result.exit_code == 2, context
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), context
        assert "Traceback" not in result.stderr and not out.exists(), context
        outcomes.append("refused")
    # the cut may refuse what the summary reads (data too deep to write back), never the other way round
    assert outcomes in (["parsed", "parsed"], ["refused", "refused"], ["parsed", "refused"]), (index, kind, outcomes)
    return outcomes[0]


@pytest.mark.parametrize("timed", [False, True], ids=["profile", "profile_timed"])
def test_seeded_mutations_are_parsed_or_refused_on_one_line(profile_snapshot: dict[str, Any], timed: bool,
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = _timed(profile_snapshot) if timed else profile_snapshot
    base = pickle.dumps(snapshot, protocol=4)
    runner = CliRunner()
    assert run_case(runner, tmp_path, base, -1, "none") == "parsed"  # the real snapshot itself reads
    name = "profile_timed" if timed else "profile"
    rng = random.Random(zlib.crc32(name.encode()))  # one fixed seed per base
    counts = {"parsed": 0, "refused": 0}
    kinds: dict[str, int] = {}
    for index in range(MUTATIONS):
        kind, data = mutate(snapshot, base, rng)
        kinds[kind] = kinds.get(kind, 0) + 1
        counts[run_case(runner, tmp_path, data, index, kind)] += 1
    line = (f"memory fuzz {name:<14} {MUTATIONS} mutations ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"
            f": parsed {counts['parsed']}, refused {counts['refused']}")
    with capsys.disabled():  # the counts belong in the CI log (the closing note reports them)
        print(f"\n{line}")
    assert sum(counts.values()) == MUTATIONS
    assert counts["refused"] > MUTATIONS // 5 and counts["parsed"] > 0  # the mutations break things, not all
    assert math.isfinite(len(base))


def test_subprocess_samples(profile_snapshot: dict[str, Any], tmp_path: Path) -> None:
    """The first refused byte-level and structural mutations, run as real processes: exit 2, one line, nothing
    written, nothing on stdout."""
    import subprocess
    import sys

    base = pickle.dumps(profile_snapshot, protocol=4)
    rng = random.Random(zlib.crc32(b"profile"))
    runner = CliRunner()
    wanted = {"byte": None, "structure": None}
    for index in range(MUTATIONS):
        kind, data = mutate(profile_snapshot, base, rng)
        group = "byte" if kind in ("truncate", "flip", "block") else "structure"
        if wanted[group] is None and run_case(runner, tmp_path, data, index, kind) == "refused":
            wanted[group] = data
        if all(v is not None for v in wanted.values()):
            break
    exe = Path(sys.executable).with_name("myutils")
    for group, data in wanted.items():
        assert data is not None, f"no refused {group} mutation"
        path = tmp_path / f"{group}.pickle"
        path.write_bytes(data)
        out = tmp_path / f"{group}_cut.pt"
        for args in (["memory", "summarize", str(path)], ["memory", "cut", str(path), "--from", "0", "--to", "9",
                                                          "-o", str(out)]):
            proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, check=False)
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: {path}"), proc.stderr
            assert proc.stdout == "" and not out.exists() and not out.with_suffix(".pickle").exists()
