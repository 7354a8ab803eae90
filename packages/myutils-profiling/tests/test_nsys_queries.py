"""Named SQL queries: every built-in runs on every real export; headers, parameters, plugin folders, CSV."""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest
from typer.testing import CliRunner

from my_utils.core.errors import InputError, UsageError
from my_utils.core.safe_io import csv_text_value
from my_utils.profiling.cli import app
from my_utils.profiling.nsys.queries import (
    QUERIES_ENV,
    builtin_names,
    load_catalog,
    parse_query,
    run_query,
)
from my_utils.profiling.nsys.schema import NsysExport

BUILTINS = ["comm_compute_overlap", "cuda_api_slowest", "cuda_api_summary", "export_info", "gpu_busy_device",
            "gpu_busy_kind", "gpu_busy_stream", "gpu_devices", "gpu_idle_causes", "gpu_idle_gaps", "iterations",
            "kernel_kinds", "kernel_summary", "launch_short_kernels", "memcpy_summary", "nccl_collectives",
            "nccl_kernels", "nvtx_summary", "osrt_summary", "process_capture", "setup_activity"]
REQUIRED = {"iterations": {"range": "*"}}


def test_the_builtins_are_these() -> None:
    assert list(builtin_names()) == BUILTINS
    cat = load_catalog(plugins=False)
    assert not cat.problems and sorted(cat.queries) == BUILTINS
    for q in cat.queries.values():
        assert q.title and q.description and q.origin == "built-in"


@pytest.mark.parametrize("key", H.EXPORTS)
def test_every_query_runs_on_every_export(real_fixtures: Any, key: str) -> None:
    cat = load_catalog(plugins=False)
    with NsysExport(H.export_path(real_fixtures, key)) as db:
        for name in BUILTINS:
            q = cat.get(name)
            res = run_query(db, q, REQUIRED.get(name, {}))
            assert res.columns and all(len(r) == len(res.columns) for r in res.rows)
        info = run_query(db, cat.get("export_info")).records()[0]
    assert info["family"] == db.meta.family and info["product_version"] == db.meta.product_version


def test_kernel_summary_parameters_filter_and_limit(real_fixtures: Any) -> None:
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    cat = load_catalog(plugins=False)
    with NsysExport(path) as db:
        comm = run_query(db, cat.get("kernel_summary"), {"kind": "communication", "limit": "5"}).records()
        one_dev = run_query(db, cat.get("kernel_summary"), {"device": "1", "limit": "1000"}).records()
    want = H.raw(path, "SELECT COUNT(*), SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                       "ON s.id = k.shortName WHERE s.value GLOB 'nccl*'")[0]
    assert len(comm) == 1 and (comm[0]["count"], comm[0]["total_ns"]) == want
    dev1 = H.raw(path, "SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 1")[0]
    assert (sum(r["count"] for r in one_dev), sum(r["total_ns"] for r in one_dev)) == dev1
    assert sum(r["share_pct"] for r in one_dev) == pytest.approx(100.0)


def test_parameters_are_checked(real_fixtures: Any) -> None:
    q = load_catalog(plugins=False).get("kernel_summary")
    with pytest.raises(UsageError, match="unknown parameter"):
        q.bind({"limt": 3})
    with pytest.raises(UsageError, match="takes int"):
        q.bind({"limit": "many"})
    assert q.bind({"kind": "null"})["kind"] is None and q.bind({})["limit"] == 20
    with pytest.raises(UsageError, match=r"parameter range .* is required"):
        load_catalog(plugins=False).get("iterations").bind({})
    with pytest.raises(UsageError, match="no nsys query named 'nope'; known: comm_compute_overlap"):
        load_catalog(plugins=False).get("nope")


def test_malformed_headers_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("-- name: x\n-- param: limit integer 3 rows\nSELECT 1\n")
    with pytest.raises(InputError, match=r"bad\.sql:line 2"):
        parse_query(bad)
    bad.write_text("-- title: no name\nSELECT 1\n")
    with pytest.raises(InputError, match="name: <lower_snake_case>"):
        parse_query(bad)


def test_user_and_plugin_folders_add_queries(real_fixtures: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "long_kernels.sql").write_text(
        "-- name: long_kernels\n-- title: Kernels longer than a threshold\n"
        "-- param: min_ms float 1.0 Threshold in ms\n"
        "SELECT name, dur FROM nsys_kernel WHERE dur >= :min_ms * 1e6 ORDER BY dur DESC\n")
    (mine / "broken.sql").write_text("SELECT 1\n")
    monkeypatch.setenv(QUERIES_ENV, str(mine))
    cat = load_catalog()
    assert cat.get("long_kernels").origin == QUERIES_ENV
    assert any("broken.sql" in p for p in cat.problems)
    path = real_fixtures / "nsys/pipit__perlmutter-cloverleaf-cuda.sqlite"
    with NsysExport(path) as db:
        rows = run_query(db, cat.get("long_kernels"), {"min_ms": "0.5"}).rows
    want = H.raw(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end - start >= 500000")[0][0]
    assert len(rows) == want
    res = CliRunner().invoke(app, ["nsys", "sql", "list"])
    assert res.exit_code == 0 and "long_kernels" in res.output and "broken.sql" in res.output


def test_cli_sql_run_show_and_views(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
    res = CliRunner().invoke(app, ["nsys", "sql", "show", "gpu_busy_device"])
    assert res.exit_code == 0 and "-- name: gpu_busy_device" in res.output and "busy_ns" in res.output
    out = tmp_path / "api.csv"
    res = CliRunner().invoke(app, ["nsys", "sql", "run", "cuda_api_summary", str(path), "-p", "limit=3",
                                   "--format", "csv", "--output", str(out)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 3 and rows[0]["name"] == "cudaMemcpy_v3020"
    res = CliRunner().invoke(app, ["nsys", "sql", "views", str(path)])
    assert res.exit_code == 0 and "CREATE TEMP VIEW nsys_kernel AS" in res.output
    res = CliRunner().invoke(app, ["nsys", "sql", "run", "iterations", str(path)])
    assert res.exit_code == 2 and "parameter range" in res.output
    res = CliRunner().invoke(app, ["nsys", "sql", "run", "cuda_api_summary", str(path), "--output", str(path)])
    assert res.exit_code == 2 and "would replace the input" in res.output


def test_csv_text_cells_are_formula_safe(real_fixtures: Any, tmp_path: Path) -> None:
    path = tmp_path / "evil.sqlite"
    path.write_bytes((real_fixtures / "nsys/fuser__report1_2024.6.sqlite").read_bytes())
    conn = sqlite3.connect(path)
    conn.execute("UPDATE StringIds SET value = '=HYPERLINK(\"x\")' WHERE id = (SELECT demangledName FROM "
                 "CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)")
    conn.commit()
    conn.close()
    res = CliRunner().invoke(app, ["nsys", "sql", "run", "kernel_summary", str(path), "--format", "csv"])
    assert res.exit_code == 0
    names = [r["name"] for r in csv.DictReader(io.StringIO(res.output))]
    assert "'=HYPERLINK(\"x\")" in names and '=HYPERLINK("x")' in [csv_text_value(n) for n in names]


def test_several_exports_give_one_table_with_export_and_rank(real_fixtures: Any, tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"r_{i}.sqlite").write_bytes(H.export_path(real_fixtures, f"ring:{i}").read_bytes())
    res = CliRunner().invoke(app, ["nsys", "sql", "run", "nccl_kernels", str(tmp_path / "r_%q{RANK}.sqlite"),
                                   "--format", "csv"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert [(r["export"], r["rank"], r["collective"]) for r in rows] == \
        [(f"r_{i}.sqlite", str(i), "AllReduce") for i in range(3)]
