"""``myutils-profile nsys summary``: the report a terminal shows, its JSON and CSV, and bad input."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.cli.nsys import parse_bytes
from my_utils.profiling.nsys.queries import load_catalog, run_query
from my_utils.profiling.nsys.schema import NsysExport

SAXPY = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"


def test_summary_of_one_export(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / SAXPY
    out = tmp_path / "out" / "summary.json"
    res = CliRunner().invoke(app, ["nsys", "summary", str(path), "--iteration-range", "saxpy", "--json", str(out),
                                   "--csv-dir", str(tmp_path / "csv")])
    assert res.exit_code == 0, res.output
    assert "nsys 2022.2.1.31, EXPORT_META_DATA; GPUs: NVIDIA A100-SXM4-40GB" in res.output
    assert "nsys_busy_device" in res.output and "iterations (given range 'saxpy')" in res.output
    assert "communication: no communication (NCCL) kernels" in res.output
    data = json.loads(out.read_text())
    (export,) = data["exports"]
    (busy,) = export["tables"]["nsys_busy_device"]
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    (first, last), = conn.execute("SELECT MIN(s), MAX(e) FROM (SELECT start s, end e FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                  "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchall()
    conn.close()
    assert busy["span_ns"] == last - first
    assert any(f["id"] == "nsys.gpu_busy:device0" for f in export["facts"])
    with (tmp_path / "csv" / "nsys_copies.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["direction"] for r in rows} == {"HtoD", "DtoH"}


def test_summary_across_the_ring(real_fixtures: Any, tmp_path: Path) -> None:
    names = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"), key=lambda n: H.pmi_rank(real_fixtures / n))
    for i, name in enumerate(names):
        shutil.copyfile(real_fixtures / name, tmp_path / f"rank{i}.sqlite")
    res = CliRunner().invoke(app, ["nsys", "summary", str(tmp_path), "--nccl-bytes", "2MiB", "--top", "3"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) <= 40  # one screen: it printed 587 lines before, one block of tables per export
    assert "== 6 exports, 6 ranks (from the launch environment (PMI_RANK))" in lines[0] and "on 2 hosts" in lines[0]
    head = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    rows = [line.split() for line in lines[head + 2:head + 8]]
    assert [r[0] for r in rows] == [str(i) for i in range(6)]  # one row per rank, in rank order
    for i, name in enumerate(names):  # the GPU span of each rank, from the raw export
        conn = sqlite3.connect((real_fixtures / name).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
        (span,), = conn.execute("SELECT MAX(e) - MIN(s) FROM (SELECT start s, end e FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                                "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET)").fetchall()
        conn.close()
        assert f"{span / 1e6:.3f}" in rows[i]
    assert "NCCL across 6 ranks: 1 collective matched" in res.output
    assert "arrives late at collectives" in res.output and "Bus bandwidth of AllReduce" in res.output
    assert "setup: 9" in res.output and "ncclCommInitRank" in res.output
    assert res.output.count("osrt (6 of 6 exports)") == 1  # said once, not six times
    assert res.output.count("(rank ") == 0 and "--detail" in res.output
    detail = CliRunner().invoke(app, ["nsys", "summary", str(tmp_path), "--top", "3", "--detail"])
    assert detail.exit_code == 0 and detail.output.count("(rank ") == 6  # each export's own block


def test_summary_counts_read_as_words(real_fixtures: Any, tmp_path: Path) -> None:
    """Counts agree with their noun ("3 ranks", "1 collective"), never "3 rank(s)", and the rank that
    arrives last is said as "rank N", never as a bare number a reader takes for a count."""
    names = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))[:3]  # one host's three ranks
    for i, name in enumerate(names):
        shutil.copyfile(real_fixtures / name, tmp_path / f"rank{i}.sqlite")
    for extra in ([], ["--detail"]):
        res = CliRunner().invoke(app, ["nsys", "summary", str(tmp_path), *extra])
        assert res.exit_code == 0, res.output
        assert not re.search(r"\b(rank|export|host|collective)\(s\)", res.output) and "3 rank " not in res.output
        assert res.output.splitlines()[0].startswith("== 3 exports, 3 ranks (from the launch environment (PMI_RANK)) "
                                                     "on 1 host ")
        last = [line for line in res.output.splitlines() if "Rank arriving last at AllReduce:" in line]
        assert last and all(re.search(r"AllReduce: rank [0-2]\b", line) for line in last), last


def test_summary_folds_pytorch_per_call_nvtx_suffixes(real_fixtures: Any) -> None:
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    # every call of aten::to, whatever per-call suffix PyTorch gave it (ranges of the default domain)
    ((n, suffixed),) = conn.execute(
        "SELECT COUNT(*), SUM(v != 'aten::to') FROM (SELECT COALESCE(s.value, e.text) AS v FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60, 70, 71) AND e.end >= e.start "
        "AND COALESCE(e.domainId, 0) = 0) WHERE v = 'aten::to' OR v GLOB 'aten::to, seq = *' "
        "OR v GLOB 'aten::to, op_id = *' OR v GLOB 'aten::to, sizes = *' OR v GLOB 'aten::to, input_op_ids = *'"
    ).fetchall()
    conn.close()
    assert suffixed > 100
    with NsysExport(path) as db:
        rows = run_query(db, load_catalog(plugins=False).get("nvtx_summary"), {"limit": "1000"}).records()
        raw_rows = run_query(db, load_catalog(plugins=False).get("nvtx_summary"),
                             {"limit": "1000000", "fold": "0"}).records()
    (to,) = [r for r in rows if r["name"] == "aten::to" and r["domain"] == ""]
    assert to["count"] == n and not any("op_id = " in r["name"] for r in rows)
    assert sum(r["count"] for r in raw_rows if r["name"].startswith("aten::to, ")) == suffixed


@pytest.mark.parametrize(("text", "n"), [("2097152", 2097152), ("2MiB", 2 * 2**20), ("1.5GB", 1_500_000_000),
                                         ("4 KiB", 4096)])
def test_sizes(text: str, n: int) -> None:
    assert parse_bytes(text) == n


def test_bad_inputs_exit_2_and_write_nothing(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    text = real_fixtures / "nsys/ai4mat__torch_gcn_nsys_stats_console.txt"
    res = CliRunner().invoke(app, ["nsys", "summary", str(text), "--json", str(out)])
    assert res.exit_code == 2 and "nsys export --type sqlite" in res.output and not out.exists()
    broken = tmp_path / "broken.sqlite"
    shutil.copyfile(real_fixtures / SAXPY, broken)
    conn = sqlite3.connect(broken)
    conn.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN eventType")
    conn.commit()
    conn.close()
    res = CliRunner().invoke(app, ["nsys", "summary", str(broken), "--json", str(out)])
    assert res.exit_code == 2 and "table NVTX_EVENTS" in res.output and "'eventType'" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()
    corrupt = tmp_path / "corrupt.sqlite"
    data = bytearray((real_fixtures / SAXPY).read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\x5a" * (len(data) - page)  # every page but the schema's is garbage
    corrupt.write_bytes(bytes(data))
    res = CliRunner().invoke(app, ["nsys", "summary", str(corrupt), "--json", str(out)])
    assert res.exit_code == 2 and str(corrupt) in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()
    res = CliRunner().invoke(app, ["nsys", "summary", str(real_fixtures / SAXPY), "--nccl-bytes", "lots"])
    assert res.exit_code == 2 and "--nccl-bytes" in res.output
    res = CliRunner().invoke(app, ["nsys", "summary", str(real_fixtures / SAXPY), "--json", str(real_fixtures / SAXPY)])
    assert res.exit_code == 2 and "would replace the input" in res.output


def test_the_nsys_commands_keep_the_cli_light() -> None:
    code = ("import sys; from my_utils.profiling.cli import app; import my_utils.profiling.cli.nsys; "
            "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'plotly', 'sqlite3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
