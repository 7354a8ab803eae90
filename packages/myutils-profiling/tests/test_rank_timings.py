"""The rank-timings reader (``run.rank_timings``, entry point ``my_utils.rank_timings``) against the raw files.

Every expected value is read here with sqlite3 (the nsys exports) or gzip + json (the Kineto
traces), never through the package's own readers.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.rank_timings import ENTRY_POINT_GROUP, KINETO_TRACE, NSYS_EXPORT, read_rank_timings
from my_utils.profiling.run.rank_timings import read_timings

RING = "nsys/dsl_ring_6ranks/"


def _ring(real_fixtures: Any) -> list[Path]:
    return [real_fixtures / name for name in real_fixtures.names(RING)]


def _raw_export(path: Path) -> dict[str, Any]:
    """Rank, host, NCCL kernel starts/ends on the UTC epoch and ncclCommInitRank's end, straight from the tables."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (utc,) = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        (host,) = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()
        (env,) = con.execute("SELECT value FROM META_DATA_CAPTURE WHERE value LIKE 'PMI_RANK=%'").fetchone()
        (first,) = con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        shift = 0 if first >= 10**18 else utc  # the exporter wrote these on the epoch already, or on the session clock
        kernels = con.execute("SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                              "ON s.id = k.demangledName WHERE s.value LIKE '%nccl%' ORDER BY k.start").fetchall()
        (init_end,) = con.execute("SELECT MAX(n.end) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                                  "WHERE COALESCE(n.text, s.value) = 'ncclCommInitRank'").fetchone()
    finally:
        con.close()
    return {"rank": int(env.split("=")[1].strip('"')), "host": host,
            "kernels": [((s + shift) / 1e3, (e + shift) / 1e3) for s, e in kernels],
            "init_end_us": (init_end + shift) / 1e3}


def test_the_ring_exports_give_each_rank_its_host_arrival_and_setup_end(real_fixtures: Any) -> None:
    paths = _ring(real_fixtures)
    timings = read_timings(paths)
    assert timings is not None and [t.rank for t in timings] == [0, 1, 2, 3, 4, 5]
    raw = {r["rank"]: r for r in map(_raw_export, paths)}
    for t in timings:
        expected = raw[t.rank]
        assert t.kind == NSYS_EXPORT and t.rank_source == "environment PMI_RANK" and t.host == expected["host"]
        got = [v for c in t.collectives for v in (c.arrival_us, c.end_us)]
        assert got == pytest.approx([v for pair in expected["kernels"] for v in pair], abs=1e-3)
        assert [(c.name, c.seq) for c in t.collectives] == [("AllReduce", 0)]
        assert t.setup_end_us == pytest.approx(expected["init_end_us"], abs=1e-3)
        # ncclCommInitRank is setup, not a step: the exports hold no repeated iteration range
        assert t.steps == () and any("no step times" in n for n in t.notes)
    # the file named ..._739537 is rank 5 by its launcher's PMI_RANK, not 3 by file order
    assert Path(timings[5].source).name == "ault44.cscs.ch_739537.sqlite"


def _raw_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    steps = sorted((int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    nccl = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                  if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    return {"rank": doc["distributedInfo"]["rank"], "steps": steps, "nccl": nccl}


@pytest.mark.parametrize("rank", [0, 1])
def test_a_kineto_pair_gives_profiler_steps_and_nccl_arrivals(real_fixtures: Any, rank: int) -> None:
    paths = [real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{r}.json.gz" for r in (0, 1)]
    timings = read_timings(paths)
    assert timings is not None and [t.rank for t in timings] == [0, 1]
    t = timings[rank]
    raw = _raw_trace(paths[rank])
    assert t.kind == KINETO_TRACE and t.rank == raw["rank"] and t.rank_source == "distributedInfo"
    assert [(s.step, s.start_us, s.end_us) for s in t.steps] == raw["steps"]
    got = sorted((c.arrival_us, c.end_us, c.name) for c in t.collectives)
    assert got == [(s, e, n) for s, e, n in raw["nccl"]]
    # each kernel's step is the ProfilerStep range holding its start
    for c in t.collectives:
        assert c.step == next(n for n, s, e in raw["steps"] if s <= c.arrival_us <= e)
    assert t.host is None and t.notes == ()  # no host_name in these traces: unknown, never guessed


def test_traces_without_a_rank_take_the_free_ranks_in_file_order(tmp_path: Path) -> None:
    def write(name: str, rank: int | None) -> Path:
        meta = {"distributedInfo": {"rank": rank}} if rank is not None else {}
        events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                   "ts": 1000 * i, "dur": 900} for i in range(3)]
        (tmp_path / name).write_text(json.dumps({"schemaVersion": 1, **meta, "traceEvents": events}))
        return tmp_path / name

    timings = read_timings([write("a.json", None), write("b.json", 0), write("c.json", None)])
    assert timings is not None
    assert [(Path(t.source).name, t.rank) for t in timings] == [("b.json", 0), ("a.json", 1), ("c.json", 2)]
    assert timings[1].rank_source.startswith("file order") and timings[0].rank_source == "distributedInfo"
    assert [s.ms for s in timings[0].steps] == [0.9, 0.9, 0.9] and timings[0].collectives == ()


def test_files_of_other_kinds_are_left_to_other_readers(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert read_timings([tmp_path / "notes.txt"]) is None


def test_the_entry_point_is_installed_and_found_by_core(real_fixtures: Any) -> None:
    import importlib.metadata

    (ep,) = [e for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if e.name == "profiling"]
    assert ep.load() is read_timings
    read = read_rank_timings(_ring(real_fixtures))
    assert read.failures == [] and len(read.timings) == 6
