"""The read-only SQLite path (``history.sqlite_reads``): the same answers without SQLAlchemy, and every other case left to the store.

Expected values are the numbers and contexts the reports were stored with, or what ``sqlite3`` reads
from the file; never the store's own answers. The last test runs ``history trend`` and ``history
gate`` in a fresh interpreter and checks what they imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from history_support import make_report, page_figures

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.history.context import RunContext, SeriesKey
from my_utils.profiling.history.migrate import upgrade
from my_utils.profiling.history.records import report_fingerprint
from my_utils.profiling.history.revisions import HEAD, VERSION_TABLE
from my_utils.profiling.history.sqlite_reads import SqliteReads, open_reads
from my_utils.profiling.history.store import RunStore

# LIKE's wildcards in a hardware name: the filter must match them as characters
ODD_GPU = "GPU_X 100%"
LOOKALIKE_GPU = "GPUaX 1000"


def _ctx(workload: str, t: float, gpu: str, world_size: int | None, **kw: Any) -> RunContext:
    return RunContext(workload=workload, run_time=t, gpu_model=gpu, gpu_count=1, world_size=world_size, **kw)


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """A SQLite store at the newest revision and what was stored in it (one dict per run, in adding order)."""
    path = tmp_path / "history.sqlite"
    stored: list[dict[str, Any]] = []
    plan = [("pretrain", ODD_GPU, 8, 1000.0), ("pretrain", ODD_GPU, 8, 1001.0),
            ("pretrain", ODD_GPU, 8, 1001.0),  # the same time as the one before: the id orders them
            ("pretrain", LOOKALIKE_GPU, 8, 1002.0), ("pretrain", ODD_GPU, None, 1003.0),
            ("pretrain", ODD_GPU, None, 1004.0), ("finetune", ODD_GPU, 8, 1005.0), ("pretrain", ODD_GPU, 8, 1006.0)]
    with RunStore(path) as store:
        for i, (workload, gpu, ws, t) in enumerate(plan):
            values = {"step_time.median": 10.0 + i, "gpu.idle": 50.0 - i}
            report = make_report(workload, values, gpu=gpu, gpu_count=1, world_size=ws, tag=i)
            ctx = _ctx(workload, t, gpu, ws, git_commit=f"c{i}", git_branch="main", config_hash="a" if i == 1 else None)
            run_id = store.add(report, ctx).run_id
            stored.append({"id": run_id, "workload": workload, "hardware": f"1x {gpu}", "world_size": ws, "time": t,
                           "values": values, "commit": f"c{i}", "config": ctx.config_hash,
                           "fingerprint": report_fingerprint(report)})
    return path, stored


def test_a_store_at_the_newest_revision_is_read_without_sqlalchemy(filled: tuple[Path, list[dict[str, Any]]]) -> None:
    path, stored = filled
    with open_reads(path) as reads:
        assert isinstance(reads, SqliteReads)
        by_key = {(s.key.workload, s.key.hardware, s.key.world_size): s for s in reads.series("step_time.median")}
        odd = reads.series("step_time.median", workload="pretrain", hardware="_x 100%", world_size=8)
        newest = reads.runs(last=2)
        latest_odd = reads.latest("pretrain", "gpu_x")
        facts = reads.facts_of(stored[3]["id"])
        names = reads.metric_names()
        keys = dict(reads.series_keys())
        found, missing = reads.find(stored[5]["fingerprint"]), reads.find("0" * 64)
        before_ids, before_values = reads.baseline("step_time.median", SeriesKey("pretrain", f"1x {ODD_GPU}", 8),
                                                   None, last=10, before_run=stored[7]["id"])
        _, config_values = reads.baseline("step_time.median", SeriesKey("pretrain", f"1x {ODD_GPU}", 8), "a", last=10)
        _, no_world = reads.baseline("gpu.idle", SeriesKey("pretrain", f"1x {ODD_GPU}", None), None, last=10)
        with pytest.raises(InputError, match=r"run 999"):
            reads.run(999)
        assert reads.runs(ids=[]) == []

    def expect(workload: str, gpu: str, ws: int | None) -> list[dict[str, Any]]:
        return sorted((r for r in stored if (r["workload"], r["hardware"], r["world_size"]) == (workload, f"1x {gpu}", ws)),
                      key=lambda r: (r["time"], r["id"]))

    for (workload, hardware, ws), series in by_key.items():
        runs = expect(workload, hardware.removeprefix("1x "), ws)
        assert list(series.values) == [r["values"]["step_time.median"] for r in runs]
        assert list(series.commits) == [r["commit"] for r in runs] and series.unit == "ms"
    assert len(by_key) == 4
    # "_" and "%" in the filter are characters, not wildcards: the look-alike GPU is not matched
    assert [s.key.hardware for s in odd] == [f"1x {ODD_GPU}"]
    assert list(odd[0].run_ids) == [r["id"] for r in expect("pretrain", ODD_GPU, 8)]
    assert [r.id for r in newest] == [stored[6]["id"], stored[7]["id"]]  # the newest two, oldest first
    assert newest[1].context.git_commit == "c7" and newest[1].context.world_size == 8
    assert latest_odd is not None and latest_odd.id == stored[7]["id"]
    assert {m.name: m.value for m in facts} == stored[3]["values"]
    assert names == {"step_time.median": "ms", "gpu.idle": "%"}  # history_support.UNITS
    assert keys[SeriesKey("pretrain", f"1x {ODD_GPU}", 8)] == 4 and keys[SeriesKey("pretrain", f"1x {ODD_GPU}", None)] == 2
    assert (found, missing) == (stored[5]["id"], None)
    assert before_ids == [stored[i]["id"] for i in (0, 1, 2)] and before_values == [10.0, 11.0, 12.0]
    assert config_values == [11.0]  # run 1 alone holds config "a"
    assert no_world == [46.0, 45.0]


def test_the_read_only_path_writes_nothing(filled: tuple[Path, list[dict[str, Any]]]) -> None:
    path, stored = filled
    before = path.read_bytes()
    with open_reads(path) as reads:
        assert isinstance(reads, SqliteReads)
        with pytest.raises(InputError, match=r"readonly|read-only|read only"):
            reads._fetch("DELETE FROM runs", {})
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == len(stored)
    assert path.read_bytes() == before


def test_creating_upgrading_and_refusing_stay_with_the_store(tmp_path: Path) -> None:
    new = tmp_path / "new.sqlite"
    with open_reads(new) as reads:  # a store that does not exist is created, as every command did
        assert isinstance(reads, RunStore) and reads.series("step_time.median") == []
    old = tmp_path / "old.sqlite"
    first = RunStore(old, upgrade=False)
    upgrade(first, "0001")
    first.close()
    with open_reads(old) as reads:  # an older store is upgraded on opening
        assert isinstance(reads, RunStore)
    assert _version(old) == HEAD
    with open_reads(old) as reads:  # and then read without SQLAlchemy
        assert isinstance(reads, SqliteReads)
    newer = tmp_path / "newer.sqlite"
    RunStore(newer).close()
    with contextlib.closing(sqlite3.connect(newer)) as conn, conn:
        conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    with pytest.raises(UsageError, match="newer than this myutils-profiling knows"):
        open_reads(newer)
    garbage = tmp_path / "notes.sqlite"
    garbage.write_bytes(b"these are notes, not a database\n" * 200)
    kept = garbage.read_bytes()
    with pytest.raises(InputError, match=r"notes\.sqlite"):
        open_reads(garbage)
    assert garbage.read_bytes() == kept


def _version(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()[0]


PROBE = textwrap.dedent("""
    import json, os, sys
    from my_utils.profiling.cli import main
    out = {}
    for name, args in json.loads(sys.argv[1]).items():
        sys.argv[1:] = args
        try:
            main()
        except SystemExit as exc:
            out[name] = exc.code
    out["modules"] = sorted(m for m in ("sqlalchemy", "alembic", "jinja2", "markupsafe", "plotly", "pandas")
                            if m in sys.modules)
    out["blas_threads"] = os.environ.get("OPENBLAS_NUM_THREADS")
    print(json.dumps(out), file=sys.stderr)
""")


def test_trend_and_gate_import_no_sqlalchemy_and_no_template_engine(filled: tuple[Path, list[dict[str, Any]]],
                                                                       tmp_path: Path) -> None:
    path, stored = filled
    page = tmp_path / "trend.html"
    commands = {"trend": ["history", "trend", "step_time.median", "--store", str(path), "--output", str(page),
                          "--workload", "pretrain"],
                "gate": ["history", "gate", "--store", str(path), "--workload", "pretrain", "--min-runs", "2"]}
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(commands)], capture_output=True, text=True,
                          timeout=300, env=env)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    # numpy's BLAS starts one thread (its per-core threads only spin here), unless the user chose a number
    assert result["blas_threads"] == "1"
    chosen = subprocess.run([sys.executable, "-c", PROBE, json.dumps({"gate": commands["gate"]})],
                            capture_output=True, text=True, timeout=300, env={**env, "OPENBLAS_NUM_THREADS": "3"})
    assert json.loads(chosen.stderr.strip().splitlines()[-1])["blas_threads"] == "3"
    # the gate judged the newest run against runs 0-2 (exit 0 or 2; 3 would be "not judged")
    assert result["trend"] in (0, None) and result["gate"] in (0, 2), proc.stderr[-2000:]
    assert result["modules"] == [], "the read-only commands imported " + ", ".join(result["modules"])
    html = page.read_text(encoding="utf-8")
    # the page's chart holds the stored values of the odd GPU's world-size-8 series, in time order
    runs = sorted((r for r in stored if r["workload"] == "pretrain" and r["hardware"] == f"1x {ODD_GPU}"
                   and r["world_size"] == 8), key=lambda r: (r["time"], r["id"]))
    ys = [b["data"][0]["y"] for b in page_figures(html)]
    assert [r["values"]["step_time.median"] for r in runs] in ys
    assert "GPU_X 100%" in html and "<script>alert" not in html
