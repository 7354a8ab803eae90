"""Hostile nsys exports are refused in one line, and no query runs without a bound (issue 35, items 3, 4, 6).

Each export is a copy of a real one (``extrap__con_kernel.sqlite``) altered with plain SQL: a recursive
view where ``StringIds`` was, the kernel table as an endless cross join, a REAL ``deviceId`` of 1e300,
BLOBs and TEXT where numbers and names are read. The commands that once ran forever run here as real
processes under a timeout, so a regression fails instead of hanging the suite. The properties: every
generated storage-class change is either read or refused naming its table and column; every statement of
every command stays within a (tiny) step budget or stops in one line naming the export and the query.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.core.errors import InputError
from my_utils.profiling.cli import app
from my_utils.profiling.nsys.read_checks import COLUMN_KINDS, SMALL_ID, STEPS_ENV, step_budget

BASE = "nsys/extrap__con_kernel.sqlite"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
CLI = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def altered(real_fixtures: Any, folder: Path, name: str, *sql: str) -> Path:
    """A copy of the base export with ``sql`` applied."""
    path = folder / name
    shutil.copyfile(real_fixtures / BASE, path)
    os.chmod(path, 0o644)
    conn = sqlite3.connect(path)
    for statement in sql:
        conn.executescript(statement)
    conn.commit()
    conn.close()
    return path


def command(args: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """A real ``myutils-profile`` process (one that hangs fails the test at ``timeout``, never the suite)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


def assert_refused(res: subprocess.CompletedProcess[str], *words: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# -- item 3: views where tables are expected, and a bound on every query -----------------------------------


VIEWS = {
    "recursive StringIds": ("StringIds", "ALTER TABLE StringIds RENAME TO s0; CREATE VIEW StringIds AS "
                            "WITH RECURSIVE r(id, value) AS (SELECT 0, 'x' UNION ALL SELECT id + 1, value FROM r) "
                            "SELECT id, value FROM r;"),
    "endless kernel join": (KERNEL, f"ALTER TABLE {KERNEL} RENAME TO k0; CREATE VIEW {KERNEL} AS SELECT a.* FROM "
                            "k0 a, k0 b, k0 c, k0 d, k0 e, k0 f, k0 g, k0 h, k0 i;"),
}


@pytest.mark.parametrize("case", sorted(VIEWS))
@pytest.mark.parametrize("verb", ["summary", "timeline"])
def test_a_view_where_a_table_is_expected_is_refused(case: str, verb: str, real_fixtures: Any, tmp_path: Path) -> None:
    table, sql = VIEWS[case]
    path = altered(real_fixtures, tmp_path, "viewed.sqlite", sql)
    out = tmp_path / "out"
    args = (["nsys", "summary", str(path), "--json", str(out / "s.json")] if verb == "summary"
            else ["nsys", "timeline", str(path), "--output", str(out / "t.json")])
    line = assert_refused(command(args, timeout=60), str(path), f"table {table}", "found a view")
    assert line.startswith(f"error: {path}:table {table}:")
    assert not out.exists()


def test_a_query_without_end_is_stopped_naming_the_export_and_the_query(real_fixtures: Any, tmp_path: Path) -> None:
    """A named query (a plugin's or the user's) that never ends: stopped at the default budget of the export."""
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "forever.sql").write_text("-- name: forever\n-- title: never ends\n"
                                         "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
                                         "SELECT COUNT(*) FROM r\n")
    path = real_fixtures / BASE
    res = command(["nsys", "sql", "run", "forever", str(path), "--queries", str(queries)], timeout=300)
    line = assert_refused(res, str(path), "query forever", f"{step_budget(path.stat().st_size):,} SQLite steps",
                          STEPS_ENV)
    assert res.stdout == "", line


def test_the_budget_scales_with_the_file_and_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.core.errors import UsageError

    monkeypatch.delenv(STEPS_ENV, raising=False)
    assert step_budget(10) == step_budget(1000) < step_budget(10**9) == 200 * 10**9
    monkeypatch.setenv(STEPS_ENV, "1e7")
    assert step_budget(10**9) == 10**7
    monkeypatch.setenv(STEPS_ENV, "lots")
    with pytest.raises(UsageError, match=STEPS_ENV):
        step_budget(10)


def _every_command(path: Path, out: Path) -> list[list[str]]:
    from my_utils.profiling.nsys.queries import builtin, builtin_names

    def given(query: str) -> list[str]:  # a value for each required parameter
        return [arg for p in builtin(query).params if p.required
                for arg in ("--param", f"{p.name}={'1' if p.type != 'text' else 'x'}")]

    return [["nsys", "summary", str(path), "--json", str(out / "s.json"), "--csv-dir", str(out / "csv")],
            ["nsys", "timeline", str(path), "--output", str(out / "t.json"), "--html", str(out / "t.html")],
            *(["nsys", "sql", "run", q, str(path), *given(q)] for q in builtin_names())]


@pytest.mark.parametrize("budget", ["1e4", "3e5", "3e6"])
def test_every_statement_of_every_command_is_bounded(budget: str, real_fixtures: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a budget too small for the work, every command and every built-in query stops in one line naming
    the export and what it was reading, never a traceback (a statement run outside the bounded paths would
    end with SQLite's bare 'interrupted')."""
    monkeypatch.setenv(STEPS_ENV, budget)
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    outcomes: dict[str, int] = {}
    for args in _every_command(path, tmp_path / "out"):
        res = CliRunner().invoke(app, args)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise AssertionError(f"{args}: {res.exception!r}") from res.exception
        assert res.exit_code in (0, 2), (args, res.output)
        if res.exit_code == 2:
            lines = res.stderr.splitlines()
            assert len(lines) == 1 and str(path) in lines[0] and "SQLite steps" in lines[0], (args, res.stderr)
            assert not (tmp_path / "out").exists()
        outcomes[args[1] if args[1] != "sql" else args[3]] = res.exit_code
    if budget == "1e4":
        assert set(outcomes.values()) == {2}, outcomes  # nothing real fits in 10,000 steps


# -- item 4: ids that are not integers in range ------------------------------------------------------------


@pytest.mark.parametrize("value", ["1e300", "1.5", "-1", "4611686018427387904", "'three'", "X'01'"])
def test_a_device_id_that_is_no_small_integer_is_refused(value: str, real_fixtures: Any, tmp_path: Path) -> None:
    """A REAL 1e300 once made ``nsys timeline`` loop for ever (``tid + k * SUB == tid``)."""
    path = altered(real_fixtures, tmp_path, "ids.sqlite", f"UPDATE {KERNEL} SET deviceId = {value};")
    out = tmp_path / "out"
    res = command(["nsys", "timeline", str(path), "--output", str(out / "t.json")], timeout=60)
    span = " from 0 to 2,147,483,647" if value.lstrip("-").isdigit() else ""  # shown when an integer is out of it
    assert_refused(res, f"table {KERNEL} row 1", f"an integer 'deviceId'{span} in {KERNEL}; found ")
    assert not out.exists()


# -- item 6: storage classes where numbers and names are read ------------------------------------------------


@pytest.mark.parametrize(("sql", "expected"), [
    (f'UPDATE {KERNEL} SET "end" = X\'00ff\'', f"table {KERNEL} row 1: an integer 'end' in {KERNEL}; found a BLOB "
                                               "(X'00FF')"),
    (f"UPDATE {KERNEL} SET streamId = X'00ff' WHERE rowid = 2", f"row 2: an integer 'streamId' in {KERNEL}; found "
                                                                "a BLOB"),
    (f"UPDATE {KERNEL} SET streamId = -3 WHERE rowid = 2", f"row 2: an integer 'streamId' from 0 to 2,147,483,647 in "
                                                           f"{KERNEL}; found -3"),
    (f"UPDATE StringIds SET value = X'00ff' WHERE id IN (SELECT demangledName FROM {KERNEL})",
     "table StringIds row 34: a text 'value' in StringIds; found a BLOB"),
    (f"UPDATE {KERNEL} SET start = 'soon' WHERE rowid = 3", f"row 3: an integer 'start' in {KERNEL}; found a TEXT "
                                                           "('soon')"),
    (f"UPDATE {KERNEL} SET start = start + 0.5 WHERE rowid = 4", f"row 4: an integer 'start' in {KERNEL}; found a "
                                                                "REAL"),
])
@pytest.mark.parametrize("verb", ["summary", "timeline"])
def test_a_value_of_the_wrong_storage_class_is_refused(sql: str, expected: str, verb: str, real_fixtures: Any,
                                                       tmp_path: Path) -> None:
    path = altered(real_fixtures, tmp_path, "typed.sqlite", sql)
    out = tmp_path / "out"
    args = (["nsys", "summary", str(path), "--json", str(out / "s.json"), "--csv-dir", str(out / "csv")]
            if verb == "summary" else ["nsys", "timeline", str(path), "--output", str(out / "t.json")])
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert line == f"error: {path}:{expected}" or (line.startswith(f"error: {path}:") and expected in line), line
    assert not out.exists()


def _columns(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        have = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out = []
        for table, kinds in COLUMN_KINDS.items():
            if table in have:
                cols = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
                out += [(table, c) for c in kinds if c in cols]
        return out
    finally:
        conn.close()


VALUES = st.sampled_from(["X'00ff'", "X''", "'text'", "''", "'12'", "1.5", "1e300", "-1e300", "-7", "NULL",
                          "9223372036854775807", "0", "'k\r=x'"])


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_storage_class_change_is_read_or_refused_naming_its_column(data: st.DataObject, real_fixtures: Any,
                                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generated: one column the views read, set to a value of any storage class on some rows. The summary and
    the timeline either read it (then the value was one the column accepts) or refuse it naming the table and
    the column; nothing else escapes."""
    from my_utils.profiling.nsys.run import analyze_run
    from my_utils.profiling.nsys.timeline import write_timeline

    folder = tmp_path_factory.mktemp("gen")
    base = real_fixtures / BASE
    table, col = data.draw(st.sampled_from(_columns(base)), label="column")
    value = data.draw(VALUES, label="value")
    every = data.draw(st.sampled_from([1, 2, 5]), label="every nth row")
    try:
        path = altered(real_fixtures, folder, "gen.sqlite", f'UPDATE "{table}" SET "{col}" = {value} '
                                                            f"WHERE rowid % {every} = 0;")
    except sqlite3.IntegrityError:  # NULL in a NOT NULL column: SQLite itself refuses to write it
        assume(False)
    kind = COLUMN_KINDS[table][col]
    conn = sqlite3.connect(path)
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")  # TEXT as str, a BLOB stays bytes
    stored = [r[0] for r in conn.execute(f'SELECT "{col}" FROM "{table}" WHERE rowid % {every} = 0')]
    conn.close()
    acceptable = all(kind.accepts(v) for v in stored)  # what SQLite stored (a column's affinity converts)
    for run in (lambda: analyze_run([str(path)]), lambda: write_timeline([str(path)], folder / "t.json")):
        try:
            run()
        except InputError as exc:
            assert not acceptable, f"{table}.{col} = {value}: refused a value the column accepts: {exc}"
            assert f"table {table} row " in str(exc) and f"{col!r}" in str(exc) and "\n" not in str(exc), str(exc)
        else:
            assert acceptable, f"{table}.{col} = {value}: read a value the column refuses"


def test_small_ids_are_checked_where_lanes_are_made() -> None:
    for table in (KERNEL, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        assert COLUMN_KINDS[table]["deviceId"] is SMALL_ID and COLUMN_KINDS[table]["streamId"] is SMALL_ID


def test_the_real_exports_pass_every_check(real_fixtures: Any) -> None:
    """No false refusal: every shared export holds what the checks require."""
    from my_utils.profiling.nsys.schema import NsysExport

    names = [n for n in real_fixtures.names("nsys/") if n.endswith(".sqlite")]
    assert len(names) >= 14
    for name in names:
        with NsysExport(real_fixtures / name) as db:
            db.ensure_views()
            assert json.dumps(db.query("SELECT COUNT(*) FROM nsys_gpu_op")[0][0]) is not None


def test_an_export_without_gpu_tables_is_summarised(real_fixtures: Any, tmp_path: Path) -> None:
    """Found by the corpus fuzz: with no kernel, copy or set table, ``summary --json`` raised ValueError (an empty
    busy table has no columns)."""
    path = altered(real_fixtures, tmp_path, "cpu_only.sqlite", f"DROP TABLE {KERNEL};",
                   "DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_MEMCPY;", "DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_MEMSET;")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["nsys", "summary", str(path), "--json", str(out / "s.json")])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 0, res.output
    data = json.loads((out / "s.json").read_text())
    assert data["exports"][0]["tables"]["nsys_busy_device"] == []
