"""Pipeline bubbles from Nsight Systems exports (``nsys.pipeline``): two copies of a real export (nvFuser, H100), each
given the NVTX ranges of one stage of a 2-stage, 2-microbatch pipeline after its own events, as ranks 0 and 1."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.pipeline_rule import pipeline_facts, pipeline_findings
from my_utils.profiling.nsys.run import analyze_run

FUSER = "nsys/fuser__report1_2024.6.sqlite"
MS = 1_000_000  # ns
#: stage 1's backward of microbatch 0 starts 3 ms late: both stages idle beyond the schedule's bubble
PLAN = {0: [("F", 0, 0, 1), ("F", 1, 1, 2), ("B", 0, 7, 9), ("B", 1, 9, 11)],
        1: [("F", 0, 1, 2), ("B", 0, 5, 7), ("F", 1, 7, 8), ("B", 1, 8, 10)]}


def _export(real_fixtures: Any, tmp_path: Path, stage: int) -> Path:
    path = tmp_path / f"job_rank{stage}.sqlite"
    shutil.copyfile(real_fixtures / FUSER, path)
    conn = sqlite3.connect(path)
    try:
        (tid,), = conn.execute("SELECT globalTid FROM NVTX_EVENTS LIMIT 1").fetchall()
        (last,), = conn.execute("SELECT MAX(end) FROM NVTX_EVENTS").fetchall()
        t0 = last + 10 * MS  # after every event of the capture: no kernel falls inside the ranges
        conn.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                         [(t0 + a * MS, t0 + b * MS, f"PP:{stage}{k}{mb}", tid) for k, mb, a, b in PLAN[stage]])
        # the export recorded RANK=0 / WORLD_SIZE=1 for its process: this copy is rank `stage` of 2
        conn.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE value LIKE 'RANK=%'", (f'RANK="{stage}"',))
        conn.execute("UPDATE META_DATA_CAPTURE SET value = 'WORLD_SIZE=\"2\"' WHERE value LIKE 'WORLD_SIZE=%'")
        conn.commit()
    finally:
        conn.close()
    return path


def test_two_exports_give_each_stages_bubble(real_fixtures: Any, tmp_path: Path) -> None:
    paths = [_export(real_fixtures, tmp_path, s) for s in (0, 1)]
    run = analyze_run(paths)
    rows = {r["rank"]: r for r in run.tables()["nsys_pipeline_bubble"].records()}
    window = 11 * MS / 1e3  # µs: stage 0's first forward to its last backward
    share = 1 / (2 + 1)
    for stage, plan in PLAN.items():
        busy = sum(b - a for _k, _m, a, b in plan) * MS / 1e3
        r = rows[stage]
        assert (r["stages"], r["microbatches"]) == (2, 2)
        assert r["window_us"] == pytest.approx(window) and r["busy_us"] == pytest.approx(busy)
        assert r["excess_us"] == pytest.approx(max(window - busy - share * window, 0))
    tables = {"nsys_pipeline_bubble": list(rows.values())}
    facts = {f.id: f for f in pipeline_facts(tables)}
    assert facts["pipeline.bubble_excess"].source == "nsys"
    (finding,) = pipeline_findings(facts, tables)
    assert finding["evidence"]["table"] == "nsys_pipeline_bubble" and finding["impact"]["step_source"] == "nsys"


def test_an_export_without_microbatch_ranges_has_no_table(real_fixtures: Any) -> None:
    assert "nsys_pipeline_bubble" not in analyze_run([real_fixtures / FUSER]).tables()
