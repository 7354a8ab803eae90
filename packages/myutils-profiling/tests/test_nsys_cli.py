"""``myutils-profile nsys summary``: the report a terminal shows, its JSON and CSV, and bad input."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.cli.nsys import parse_bytes

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
    names = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))
    for i, name in enumerate(names):
        shutil.copyfile(real_fixtures / name, tmp_path / f"rank{i}.sqlite")
    res = CliRunner().invoke(app, ["nsys", "summary", str(tmp_path), "--nccl-bytes", "2MiB", "--top", "3"])
    assert res.exit_code == 0, res.output
    assert "== NCCL across 6 rank(s): 1 collective(s) matched" in res.output
    assert "Rank arriving last at AllReduce:" in res.output and "Bus bandwidth of AllReduce" in res.output
    assert res.output.count("(rank ") == 6


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
