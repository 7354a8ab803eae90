"""The run store against SQLite and a real PostgreSQL server: add, duplicate add, read back, 8 writers, migrations.

Every test runs on both back ends (``store_url``). Expected values are the numbers the reports were
built with, or what a plain query (sqlite3 / psycopg) reads from the database, never the store's
own answers.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from history_support import make_report

from my_utils.core.errors import UsageError
from my_utils.profiling.history.context import RunContext, SeriesKey, context_of
from my_utils.profiling.history.migrate import VERSION_TABLE, upgrade
from my_utils.profiling.history.schema import HEAD
from my_utils.profiling.history.store import RunStore, report_fingerprint


def _raw(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read with the database's own driver (not through the store)."""
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]
    with contextlib.closing(sqlite3.connect(url)) as conn:
        return conn.execute(sql, params).fetchall()


def _ctx(workload: str = "pretrain", t: float = 1.0e9, **kw: Any) -> RunContext:
    return RunContext(workload=workload, run_time=t, gpu_model="NVIDIA H100 80GB HBM3", gpu_count=8, world_size=16,
                      **kw)


def test_add_keeps_facts_and_context(store_url: str) -> None:
    report = make_report(values={"step_time.median": 101.25, "gpu.idle": 12.5}, tag=1,
                         operations=[{"name": "fwd", "unit": "ms", "total": 50.0, "median": 4.5, "mean": 5.0,
                                      "share": 0.5}])
    ctx = context_of(report, {"git_commit": "a" * 40, "git_branch": "main", "host": "node1", "config_hash": "cfg1",
                              "run_time": 1.7e9})
    with RunStore(store_url) as store:
        added = store.add(report, ctx, source="r.json")
        run = store.run(added.run_id)
        facts = {m.name: (m.value, m.unit) for m in store.facts_of(added.run_id)}
    assert added.added and added.metrics == 5
    assert facts == {"step_time.median": (101.25, "ms"), "gpu.idle": (12.5, "%"), "op.median:fwd": (4.5, "ms"),
                     "op.mean:fwd": (5.0, "ms"), "op.share:fwd": (0.5, "fraction")}
    c = run.context
    assert (c.workload, c.git_commit, c.git_branch, c.host, c.config_hash, c.gpu_model, c.gpu_count, c.world_size,
            c.run_time) == ("pretrain", "a" * 40, "main", "node1", "cfg1", "NVIDIA H100 80GB HBM3", 8, 16, 1.7e9)
    assert run.hardware == "8x NVIDIA H100 80GB HBM3" and run.source == "r.json"
    raw = _raw(store_url, "SELECT workload, hardware, world_size, git_commit, fingerprint FROM runs")
    assert raw == [("pretrain", "8x NVIDIA H100 80GB HBM3", 16, "a" * 40, report_fingerprint(report))]


def test_same_report_twice_is_one_run(store_url: str) -> None:
    report = make_report(values={"step_time.median": 5.0}, tag="dup")
    with RunStore(store_url) as store:
        first = store.add(report, _ctx(git_commit="x"))
        again = store.add(make_report(values={"step_time.median": 5.0}, tag="dup"), _ctx(git_commit="y", t=2e9))
        other = store.add(make_report(values={"step_time.median": 5.0}, tag="other"), _ctx())
    assert first.added and not again.added and again.run_id == first.run_id
    assert other.added and other.run_id != first.run_id
    assert _raw(store_url, "SELECT COUNT(*) FROM runs") == [(2,)]
    assert _raw(store_url, "SELECT COUNT(*) FROM facts") == [(2,)]
    assert _raw(store_url, "SELECT git_commit FROM runs WHERE id = ?", (first.run_id,)) == [("x",)]  # the first kept


def test_series_are_split_by_hardware_and_world_size(store_url: str) -> None:
    runs = [("pretrain", "NVIDIA H100 80GB HBM3", 16, 10.0), ("pretrain", "NVIDIA H100 80GB HBM3", 16, 11.0),
            ("pretrain", "NVIDIA H100 80GB HBM3", 8, 20.0), ("pretrain", "NVIDIA A100-SXM4-80GB", 16, 30.0),
            ("other", "NVIDIA H100 80GB HBM3", 16, 40.0)]
    with RunStore(store_url) as store:
        for i, (w, gpu, ws, v) in enumerate(runs):
            r = make_report(w, {"step_time.median": v}, gpu=gpu, world_size=ws, tag=i)
            store.add(r, context_of(r, {"run_time": 1e9 + i, "git_commit": f"c{i}"}))
        got = {(s.key.workload, s.key.hardware, s.key.world_size): list(s.values)
               for s in store.series("step_time.median")}
        only = store.series("step_time.median", workload="pretrain", hardware="h100", world_size=16)
    assert got == {("pretrain", "8x NVIDIA H100 80GB HBM3", 16): [10.0, 11.0],
                   ("pretrain", "8x NVIDIA H100 80GB HBM3", 8): [20.0],
                   ("pretrain", "8x NVIDIA A100-SXM4-80GB", 16): [30.0],
                   ("other", "8x NVIDIA H100 80GB HBM3", 16): [40.0]}
    assert len(only) == 1 and only[0].commits == ("c0", "c1")


def test_baseline_reads_exactly_one_series_before_the_run(store_url: str) -> None:
    key = SeriesKey("pretrain", "8x NVIDIA H100 80GB HBM3", 16)
    with RunStore(store_url) as store:
        ids = []
        for i in range(8):
            r = make_report(values={"step_time.median": float(i)}, tag=i)
            ids.append(store.add(r, _ctx(t=1e9 + i, config_hash="a" if i % 2 else "b")).run_id)
        r = make_report(values={"step_time.median": 99.0}, world_size=8, tag="ws8")
        store.add(r, context_of(r, {"run_time": 1e9 + 3.5}))
        before, values = store.baseline("step_time.median", key, None, last=3, before_run=ids[6])
        _, config_values = store.baseline("step_time.median", key, "a", last=10, before_run=None)
    assert before == ids[3:6] and values == [3.0, 4.0, 5.0]
    assert config_values == [1.0, 3.0, 5.0, 7.0]


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from history_support import make_report
    from my_utils.profiling.history.context import RunContext
    from my_utils.profiling.history.store import RunStore
    url, writer, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.01)
    with RunStore(url) as store:
        for i in range(10):
            r = make_report(values={"step_time.median": writer * 100 + i, f"only.writer{writer}": 1.0},
                            tag=(writer, i))
            store.add(r, RunContext("pretrain", 1e9 + i, git_commit=f"w{writer}", gpu_model="G", gpu_count=1))
        shared = make_report(values={"step_time.median": -1.0}, tag="shared")  # every writer adds this one
        print(store.add(shared, RunContext("pretrain", 1e9, gpu_model="G", gpu_count=1)).run_id)
""")


def test_eight_concurrent_writers_lose_nothing(store_url: str, tmp_path: Path) -> None:
    RunStore(store_url).close()  # created first: the writers race on adds, not on creating the schema
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(w), str(go), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(8)]
    time.sleep(0.5)
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [e[-1500:] for _, e in outs]
    shared_ids = {out.strip() for out, _ in outs}
    assert len(shared_ids) == 1  # every writer found the same run for the shared report
    assert _raw(store_url, "SELECT COUNT(*) FROM runs") == [(81,)]
    values = sorted(v for (v,) in _raw(store_url, "SELECT f.value FROM facts f JOIN metrics m ON m.id = f.metric_id "
                                                  "WHERE m.name = 'step_time.median'"))
    assert values == sorted([-1.0] + [w * 100.0 + i for w in range(8) for i in range(10)])
    names = {n for (n,) in _raw(store_url, "SELECT name FROM metrics")}
    assert names == {"step_time.median", *(f"only.writer{w}" for w in range(8))}


def test_concurrent_first_opens_create_the_schema_once(store_url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(w), str(go), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e[-1500:] for _, e in outs]
    assert _raw(store_url, "SELECT COUNT(*) FROM runs") == [(41,)]
    assert _raw(store_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)]


def test_a_store_of_the_first_schema_is_migrated_with_its_data(store_url: str) -> None:
    old = RunStore(store_url, upgrade=False)
    upgrade(old, "0001")
    old.close()
    rows = [(1, "f1", "pretrain", "8x G", 8, 1.0e9, "c1"), (2, "f2", "pretrain", "8x G", 8, 1.0e9 + 1, "c2")]
    facts = [(1, "step_time.median", 10.5, "ms"), (1, "gpu.idle", 3.0, "%"), (2, "step_time.median", 11.5, "ms")]
    _write_first_schema(store_url, rows, facts)
    with RunStore(store_url) as store:  # opening upgrades it
        series = store.series("step_time.median")
        assert [list(s.values) for s in series] == [[10.5, 11.5]]
        assert {m.name: m.value for m in store.facts_of(1)} == {"step_time.median": 10.5, "gpu.idle": 3.0}
        assert store.metric_names() == {"gpu.idle": "%", "step_time.median": "ms"}
        added = store.add(make_report(values={"step_time.median": 12.0}, tag="new"), _ctx(t=2e9))
    assert added.run_id == 3
    assert _raw(store_url, f"SELECT version_num FROM {VERSION_TABLE}") == [(HEAD,)]


def _write_first_schema(url: str, rows: list[tuple[Any, ...]], facts: list[tuple[Any, ...]]) -> None:
    run_sql = ("INSERT INTO runs (id, fingerprint, workload, hardware, world_size, run_time, git_commit, added_time) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, 0)")
    fact_sql = "INSERT INTO facts (run_id, metric, value, unit) VALUES (?, ?, ?, ?)"
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
            conn.cursor().executemany(run_sql.replace("?", "%s"), rows)
            conn.cursor().executemany(fact_sql.replace("?", "%s"), facts)
            conn.execute("SELECT setval(pg_get_serial_sequence('runs', 'id'), 2)")
        return
    with contextlib.closing(sqlite3.connect(url)) as conn, conn:
        conn.executemany(run_sql, rows)
        conn.executemany(fact_sql, facts)


def test_migrations_build_the_schema_the_code_declares(store_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from my_utils.profiling.history.schema import metadata

    with RunStore(store_url) as store, store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), metadata)
    assert diff == []


def test_the_shipped_revisions_are_the_ones_the_code_knows() -> None:
    from alembic.script import ScriptDirectory

    from my_utils.profiling.history.migrate import alembic_config
    from my_utils.profiling.history.schema import REVISIONS

    scripts = ScriptDirectory.from_config(alembic_config())
    assert scripts.get_heads() == [HEAD]
    assert [s.revision for s in reversed(list(scripts.walk_revisions()))] == list(REVISIONS)


def test_a_newer_store_is_refused(store_url: str) -> None:
    RunStore(store_url).close()
    if store_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_url.replace("postgresql+psycopg", "postgresql")) as conn:
            conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    else:
        with contextlib.closing(sqlite3.connect(store_url)) as conn, conn:
            conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    with pytest.raises(UsageError, match="newer than this myutils-profiling knows"):
        RunStore(store_url)


def test_default_location_is_the_user_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.history.location import resolve, shown

    monkeypatch.delenv("MYUTILS_HISTORY_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve() == f"sqlite:///{tmp_path / 'data' / 'myutils' / 'history.sqlite'}"
    monkeypatch.setenv("MYUTILS_HISTORY_STORE", str(tmp_path / "team.sqlite"))
    assert resolve() == f"sqlite:///{tmp_path / 'team.sqlite'}"
    assert resolve("postgresql://u:secret@db:5432/runs") == "postgresql+psycopg://u:secret@db:5432/runs"
    assert shown("postgresql+psycopg://u:secret@db:5432/runs") == "postgresql+psycopg://u:***@db:5432/runs"
    with pytest.raises(UsageError, match="expected a SQLite file path"):
        resolve("mysql://x@y/z")
    with RunStore() as store:
        assert store.where == f"sqlite:///{tmp_path / 'team.sqlite'}"
    assert json.dumps(_raw(str(tmp_path / "team.sqlite"), f"SELECT version_num FROM {VERSION_TABLE}")) == '[["0002"]]'
