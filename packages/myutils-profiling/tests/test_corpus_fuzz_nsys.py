"""Seeded corpus fuzz of the ``nsys`` commands: 200 mutations of the shared exports per command (issue 35).

``test_corpus_fuzz`` garbles an export's bytes for ``ingest``; an export is a database, so most of what
a hostile or damaged one holds survives byte flips as valid SQLite. The mutations here are made with
SQL, on a copy of a real export drawn from the shared ones, besides the byte-level ones:

- ``storage class``: a column set to a BLOB, TEXT, REAL, an edge integer or NULL, on some or all rows;
- ``real id``: a device, stream, context, process or thread id that is a REAL (1e300, 0.5...);
- ``view``: a table nsys writes replaced by a view (a plain one, a recursive one, an endless join);
- ``hostile name``: names holding ``\\r``, ``\\n``, ``=``, ``+``, ``-``, ``@``, text that is not UTF-8
  (a lone surrogate's CESU bytes), a name of 100,000 characters;
- ``schema``: a column dropped or renamed, a table dropped;
- ``rows``: rows deleted, duplicated, ends before starts, every start equal;
- ``bytes``: the file truncated, bytes flipped, a page zeroed or copied over another.

Each command (``summary`` with JSON and CSV outputs, ``timeline`` with trace and page, ``sql run`` as
CSV, ``diff`` against the unmutated export, ``ingest`` through the nsys provider) must read the export
(exit 0; its JSON strict, no CSV cell a formula for any reader) or refuse it like every bad input: exit
2, one line on stderr naming the file, no traceback, nothing written. The commands run in-process; every
SQL statement is bounded (``MYUTILS_NSYS_QUERY_STEPS`` keeps a stopped one short). Counts per command
and per kind of mutation are printed for the CI log.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.testing.csv_cells import formula_cells
from my_utils.profiling.cli import app

MUTATIONS = 200
BASES = ["nsys/extrap__con_kernel.sqlite", "nsys/extrap__concurrent_s1_profile1.sqlite",
         "nsys/fuser__report1_2024.6.sqlite", "nsys/extrap__ex-gpu.s10.sqlite", "ring:0"]
COMMANDS = ["summary", "timeline", "sql_csv", "diff", "ingest"]
VALUES = ["X'00ff'", "X''", "'text'", "''", "'12'", "1.5", "1e300", "-1e300", "9223372036854775807",
          "-9223372036854775808", "NULL", "0", "-1", "'k\r=HYPERLINK(\"http://x\")'", "'@SUM(1)'"]
IDS = ["deviceId", "streamId", "contextId", "globalPid", "globalTid", "correlationId", "domainId", "id", "nameId"]
NAMES = ["'k\r=HYPERLINK(\"http://x\",\"y\")'", "'\n+cmd|calc'", "'-2+3'", "'@SUM(A1)'", "'a\u2028=b'",
         "CAST(X'6BEDA08078' AS TEXT)", "CAST(X'FF3D31' AS TEXT)", "printf('%.100000c', 'x')", "''", "NULL"]
KINDS = ["storage class", "real id", "view", "hostile name", "schema", "rows", "bytes"]


def _base(real_fixtures: Any, key: str) -> Path:
    if key.startswith("ring:"):
        return real_fixtures / sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))[int(key[5:])]
    return real_fixtures / key


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                       "'sqlite_%' ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _read_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables the commands read (where a mutation matters most), those present."""
    wanted = ("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "OSRT_API", "StringIds", "TARGET_INFO_GPU", "META_DATA_EXPORT",
              "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME", "NVTX_PAYLOAD_SCHEMA_ENTRIES")
    return [t for t in _tables(conn) if t.startswith(wanted)]


def _sql_mutation(kind: str, conn: sqlite3.Connection, rng: random.Random) -> str:
    """One SQL mutation of ``kind``; returns a short description."""
    tables = _read_tables(conn) or _tables(conn)
    table = rng.choice(tables)
    cols = _columns(conn, table)
    rows = rng.choice(["", " WHERE rowid % 2 = 0", " WHERE rowid = (SELECT MIN(rowid) FROM " + _q(table) + ")",
                       " WHERE rowid % 7 = 3"])
    if kind == "storage class":
        col, value = rng.choice(cols), rng.choice(VALUES)
        conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = {value}{rows}")
        return f"{table}.{col} = {value[:20]}"
    if kind == "real id":
        with_ids = [(t, c) for t in tables for c in _columns(conn, t) if c in IDS] or [(table, cols[0])]
        table, col = rng.choice(with_ids)
        value = rng.choice(["1e300", "0.5", "1e18 + 0.5", "-1e300", f"{col} + 0.25"])
        conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = {value}{rows}")
        return f"{table}.{col} = {value}"
    if kind == "view":
        old = f"{table}_old"
        conn.execute(f"ALTER TABLE {_q(table)} RENAME TO {_q(old)}")
        body = rng.choice([f"SELECT * FROM {_q(old)}",
                           f"SELECT a.* FROM {_q(old)} a, {_q(old)} b, {_q(old)} c, {_q(old)} d, {_q(old)} e",
                           f"WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r) SELECT o.* FROM r, "
                           f"{_q(old)} o"])
        conn.execute(f"CREATE VIEW {_q(table)} AS {body}")
        return f"{table} as a view"
    if kind == "hostile name":
        target = "StringIds" if "StringIds" in tables and rng.random() < 0.7 else table
        text_cols = [c for c in _columns(conn, target) if c in ("value", "name", "text", "shortName")] or \
            _columns(conn, target)
        col, value = rng.choice(text_cols), rng.choice(NAMES)
        conn.execute(f"UPDATE {_q(target)} SET {_q(col)} = {value}{rows}")
        return f"{target}.{col} = {value[:24]}"
    if kind == "schema":
        how = rng.randrange(3)
        if how == 0 and len(cols) > 1:
            col = rng.choice(cols)
            try:
                conn.execute(f"ALTER TABLE {_q(table)} DROP COLUMN {_q(col)}")
                return f"{table} without {col}"
            except sqlite3.OperationalError:  # a key or an indexed column: SQLite keeps it
                pass
        if how == 1:
            col = rng.choice(cols)
            conn.execute(f"ALTER TABLE {_q(table)} RENAME COLUMN {_q(col)} TO {_q(col + '_x')}")
            return f"{table}.{col} renamed"
        conn.execute(f"DROP TABLE {_q(table)}")
        return f"{table} dropped"
    # rows
    how = rng.randrange(4)
    if how == 0:
        conn.execute(f"DELETE FROM {_q(table)}{rows}")
        return f"{table} rows deleted"
    if how == 1:
        conn.execute(f"INSERT INTO {_q(table)} SELECT * FROM {_q(table)}{rows}")
        return f"{table} rows doubled"
    if "start" in cols and "end" in cols:
        if how == 2:
            conn.execute(f'UPDATE {_q(table)} SET "end" = start - 1{rows}')
            return f"{table} ends before starts"
        conn.execute(f"UPDATE {_q(table)} SET start = (SELECT MIN(start) FROM {_q(table)}){rows}")
        return f"{table} starts equal"
    conn.execute(f"DELETE FROM {_q(table)}")
    return f"{table} emptied"


def _byte_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    how = rng.randrange(3)
    if how == 0:
        return data[:rng.randrange(len(data))], "truncated"
    buf = bytearray(data)
    if how == 1:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf), "bytes flipped"
    page = 4096
    at = rng.randrange(1, len(buf) // page) * page
    if rng.random() < 0.5:
        buf[at:at + page] = bytes(page)
        return bytes(buf), "page zeroed"
    src = rng.randrange(0, len(buf) // page) * page
    buf[at:at + page] = buf[src:src + page]
    return bytes(buf), "page copied"


def mutate(base: Path, target: Path, rng: random.Random) -> tuple[str, str]:
    """Write a mutation of ``base`` to ``target``: (kind, description)."""
    kind = rng.choice(KINDS)
    if kind == "bytes":
        data, what = _byte_mutation(base.read_bytes(), rng)
        target.write_bytes(data)
        return kind, what
    shutil.copyfile(base, target)
    os.chmod(target, 0o644)
    conn = sqlite3.connect(target)
    try:
        try:
            what = _sql_mutation(kind, conn, rng)
        except sqlite3.Error as exc:  # the mutation itself was refused by SQLite (a NOT NULL, a key...)
            what = f"unchanged ({exc})"
        conn.commit()
    finally:
        conn.close()
    return kind, what


def _args(command: str, path: Path, base: Path, out: Path, work: Path) -> list[str]:
    if command == "summary":
        return ["nsys", "summary", str(path), "--json", str(out / "s.json"), "--csv-dir", str(out / "csv")]
    if command == "timeline":
        return ["nsys", "timeline", str(path), "--output", str(out / "t.json"), "--html", str(out / "t.html")]
    if command == "sql_csv":
        return ["nsys", "sql", "run", "kernel_summary", str(path), "--format", "csv", "--output", str(out / "q.csv")]
    if command == "diff":
        return ["nsys", "diff", str(base), str(path), "--output", str(out / "d.json"), "--markdown", str(out / "d.md")]
    config = work / "config.json"
    config.write_text(json.dumps({"run_id": "fuzz", "providers": [{"provider": "nsys_sqlite", "input": str(path)}]}))
    return ["ingest", "--config", str(config), "--output-dir", str(out), "--quiet"]


def _check_outputs(out: Path, context: str) -> None:
    """What a read export wrote: strict JSON, CSVs no reader sees a formula in, JSONL line by line."""
    def bare(token: str) -> Any:
        pytest.fail(f"bare {token} in the outputs: {context}")

    for file in sorted(out.rglob("*")):
        if file.suffix == ".json":
            json.loads(file.read_text(encoding="utf-8"), parse_constant=bare)
        elif file.suffix == ".jsonl":
            for line in file.read_text(encoding="utf-8").split("\n")[:-1]:  # not splitlines: U+2028 is no row end
                json.loads(line, parse_constant=bare)
        elif file.suffix == ".csv":
            bad = formula_cells(file.read_bytes().decode("utf-8"))
            assert not bad, f"formula cells {bad[:3]} in {file}: {context}"


def run_case(command: str, runner: CliRunner, work: Path, path: Path, base: Path, index: int, what: str) -> str:
    out = work / f"out{index}"
    result = runner.invoke(app, _args(command, path, base, out, work))
    context = f"{command} mutation {index} ({what}): exit {result.exit_code}, stderr {result.stderr!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(context) from result.exception
    if result.exit_code == 0:
        _check_outputs(out, context)
        shutil.rmtree(out, ignore_errors=True)
        return "parsed"
    assert result.exit_code == 2, context
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), context
    assert path.name in lines[0] or (command == "ingest" and "config.json" in lines[0]), context
    assert "Traceback" not in result.stderr and not out.exists(), context
    return "refused"


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_seeded_export_mutations_are_read_or_refused_on_one_line(command: str, real_fixtures: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a statement stopped at its budget is refused at once (the default scales with the file: seconds here)
    monkeypatch.setenv("MYUTILS_NSYS_QUERY_STEPS", "5e7")
    bases = [_base(real_fixtures, key) for key in BASES]
    runner = CliRunner()
    path = tmp_path / "report.sqlite"
    for base in bases:  # every unmutated export reads
        shutil.copyfile(base, path)
        assert run_case(command, runner, tmp_path, path, base, -1, "unmutated") == "parsed"
    rng = random.Random(zlib.crc32(f"nsys {command}".encode()))  # one fixed seed per command
    counts: Counter[str] = Counter()
    per_kind: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for index in range(MUTATIONS):
        base = rng.choice(bases)
        path.unlink(missing_ok=True)
        kind, what = mutate(base, path, rng)
        outcome = run_case(command, runner, tmp_path, path, base, index, f"{kind}: {what}")
        counts[outcome] += 1
        per_kind[kind][outcome] += 1
    kinds = ", ".join(f"{k} {v['parsed']}/{v['refused']}" for k, v in per_kind.items())
    with capsys.disabled():  # the counts belong in the CI log (the closing note reports them)
        print(f"\ncorpus fuzz nsys {command:<9} {MUTATIONS} mutations: parsed {counts['parsed']}, refused "
              f"{counts['refused']} (parsed/refused by kind: {kinds})")
    assert sum(counts.values()) == MUTATIONS
    assert counts["refused"] > 0 and counts["parsed"] > 0  # the mutations break some exports, not all
