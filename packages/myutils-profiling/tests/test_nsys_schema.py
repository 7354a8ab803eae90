"""The nsys schema adapter on every real export (2021.x to 2026.2), checked with SQL written here against the raw tables."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.profiling.nsys.schema import NsysExport
from my_utils.profiling.nsys.views import VIEW_COLUMNS

# (metadata table, exporter version) as MANIFEST.md records them for each source
META = {
    "extrap__con_kernel": ("EXPORT_META_DATA", "2022.1.1.61"),
    "extrap__concurrent_s1_profile1": ("EXPORT_META_DATA", "2022.1.1.61"),
    "extrap__ex-gpu.s10": ("none", None),
    "fuser__report1_2024.6": ("META_DATA_EXPORT", "2024.6.2.25"),
    "nsysai__mfu_2gpu_before": ("META_DATA_EXPORT", "2026.2.1.210"),
    "nsysai__mfu_2gpu_after": ("META_DATA_EXPORT", "2026.2.1.210"),
    "pipit__perlmutter-cloverleaf-cuda": ("META_DATA_EXPORT", "2024.5.1.113"),
    "pipit__saxpy-mpi-cuda_perlmutter0": ("EXPORT_META_DATA", "2022.2.1.31"),
    "ring": ("META_DATA_EXPORT", "2024.5.1.113"),
}


EXPORTS, export_path, raw, tables = H.EXPORTS, H.export_path, H.raw, H.tables


def _stem(key: str) -> str:
    return "ring" if key.startswith("ring:") else Path(key).stem


@pytest.mark.parametrize("key", EXPORTS)
def test_exporter_metadata_of_every_era(real_fixtures: Any, key: str) -> None:
    path = export_path(real_fixtures, key)
    before = sorted(p.name for p in path.parent.iterdir())
    with NsysExport(path) as db:
        family, version = META[_stem(key)]
        assert (db.meta.family, db.meta.product_version) == (family, version)
        assert db.meta.era == (version or "2021.x or older (no export metadata)")
        db.ensure_views()
        for view, cols in VIEW_COLUMNS.items():
            got, _ = db.description(f"SELECT * FROM {view} LIMIT 0")
            assert tuple(got) == cols
    assert sorted(p.name for p in path.parent.iterdir()) == before  # nothing written beside the input


@pytest.mark.parametrize("key", EXPORTS)
def test_view_rows_are_the_raw_rows(real_fixtures: Any, key: str) -> None:
    path = export_path(real_fixtures, key)
    have = tables(path)
    with NsysExport(path) as db:
        db.ensure_views()
        for view, table in [("nsys_kernel", "CUPTI_ACTIVITY_KIND_KERNEL"), ("nsys_memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
                            ("nsys_memset", "CUPTI_ACTIVITY_KIND_MEMSET"), ("nsys_runtime", "CUPTI_ACTIVITY_KIND_RUNTIME"),
                            ("nsys_osrt", "OSRT_API")]:
            # the runtime table of 2021.x/2022.2 exports repeats calls as CUDA backtrace rows (eventClass 67)
            skip = " AND eventClass <> 67" if table.endswith("RUNTIME") else ""
            want = raw(path, f"SELECT COUNT(*), SUM(end - start) FROM {table} WHERE end >= start{skip}")[0] \
                if table in have else (0, None)
            assert tuple(db.query(f"SELECT COUNT(*), SUM(dur) FROM {view}")[0]) == want, view
        want_nvtx = raw(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND end >= start")[0][0] \
            if "NVTX_EVENTS" in have else 0
        assert db.query("SELECT COUNT(*) FROM nsys_nvtx")[0][0] == want_nvtx


@pytest.mark.parametrize("key", EXPORTS)
def test_kernel_names_come_from_string_ids(real_fixtures: Any, key: str) -> None:
    path = export_path(real_fixtures, key)
    want = sorted(raw(path, "SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                            "ON s.id = k.demangledName GROUP BY s.value"))
    with NsysExport(path) as db:
        db.ensure_views()
        assert sorted(db.query("SELECT name, COUNT(*) FROM nsys_kernel GROUP BY name")) == want
        kinds = dict(db.query("SELECT name, kind FROM nsys_kernel GROUP BY name"))
    # NCCL kernels are communication, everything else in these exports computes
    assert all((kind == "communication") == name.startswith("nccl") for name, kind in kinds.items())


@pytest.mark.parametrize("key", EXPORTS)
def test_timestamps_put_on_the_epoch(real_fixtures: Any, key: str) -> None:
    path = export_path(real_fixtures, key)
    with NsysExport(path) as db:
        offset = db.epoch_offset_ns
    if "TARGET_INFO_SESSION_START_TIME" not in tables(path):
        assert offset is None  # 2021.x: the export does not anchor its clock
        return
    (utc,), = raw(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    (first, last), = raw(path, "SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert offset is not None
    assert utc <= first + offset <= last + offset <= utc + 3600 * 10**9  # within the hour after the capture began


def test_gpu_tables_of_each_era(real_fixtures: Any) -> None:
    with NsysExport(real_fixtures / "nsys/extrap__ex-gpu.s10.sqlite") as db:  # 2021: TARGET_INFO_CUDA_GPU, kB/s and kHz
        gpus = db.gpus()
    want = raw(real_fixtures / "nsys/extrap__ex-gpu.s10.sqlite",
               "SELECT deviceId, name, numMultiprocessors, globalMemoryBandwidth, coreClockRate FROM TARGET_INFO_CUDA_GPU "
               "ORDER BY deviceId")
    assert [(g.device, g.name, g.sm_count, g.memory_bandwidth_bps, g.clock_hz) for g in gpus] == \
        [(d, n, sm, bw * 1000.0, clk * 1000.0) for d, n, sm, bw, clk in want]
    assert gpus[0].memory_bandwidth_bps == pytest.approx(1.5552e12)  # the A100-PCIE-40GB datasheet's 1,555 GB/s
    with NsysExport(real_fixtures / "nsys/extrap__con_kernel.sqlite") as db:  # 2022: integrated adapters listed too
        assert [(g.device, g.name, g.sm_count) for g in db.gpus()] == [(0, "GeForce GTX 1060 with Max-Q Design", 10)]
    with NsysExport(real_fixtures / "nsys/fuser__report1_2024.6.sqlite") as db:
        gpus = db.gpus()
        assert len(gpus) == 8 and {g.name for g in gpus} == {"NVIDIA H100 80GB HBM3"} and gpus[0].sm_count == 132
        assert gpus[0].memory_bandwidth_bps == pytest.approx(3.35232e12)
    with NsysExport(real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite") as db:  # the slice dropped its GPU table
        assert db.gpus() == ()


def _copy(real_fixtures: Any, key: str, tmp_path: Path) -> Path:
    dst = tmp_path / Path(key).name
    shutil.copyfile(export_path(real_fixtures, key), dst)
    return dst


def _edit(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for s in statements:
            conn.execute(s)
        conn.commit()
    finally:
        conn.close()


def test_unknown_tables_are_ignored(real_fixtures: Any, tmp_path: Path) -> None:
    path = _copy(real_fixtures, "nsys/fuser__report1_2024.6.sqlite", tmp_path)
    _edit(path, "CREATE TABLE CUPTI_ACTIVITY_KIND_FROM_THE_FUTURE (start INTEGER, whatever BLOB)",
          "CREATE TABLE ZZZ_VENDOR_CACHE (x)")
    with NsysExport(path) as db:
        db.ensure_views()
        assert db.query("SELECT COUNT(*) FROM nsys_kernel")[0][0] == 19


def test_a_table_missing_a_column_is_one_line_naming_table_and_column(real_fixtures: Any, tmp_path: Path) -> None:
    path = _copy(real_fixtures, "nsys/extrap__con_kernel.sqlite", tmp_path)
    _edit(path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId")
    with NsysExport(path) as db, pytest.raises(InputError) as err:
        db.ensure_views()
    text = str(err.value)
    assert "\n" not in text and str(path) in text
    assert "table CUPTI_ACTIVITY_KIND_KERNEL" in text and "'streamId'" in text


def test_a_kernel_table_without_any_name_column_is_refused(real_fixtures: Any, tmp_path: Path) -> None:
    path = _copy(real_fixtures, "nsys/extrap__ex-gpu.s10.sqlite", tmp_path)
    views = [r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'view'")]
    _edit(path, *(f'DROP VIEW "{v}"' for v in views),  # Extra-P added views over the kernel names
          "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
          "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName")
    with NsysExport(path) as db, pytest.raises(InputError, match=r"table CUPTI_ACTIVITY_KIND_KERNEL: a kernel name column"):
        db.ensure_views()


def test_corrupt_database_is_one_line(real_fixtures: Any, tmp_path: Path) -> None:
    path = _copy(real_fixtures, "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite", tmp_path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page: len(data)] = b"\x5a" * (len(data) - page)  # every page after the first (the schema's root) is garbage
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as err, NsysExport(path) as db:
        db.ensure_views()
        db.query("SELECT COUNT(*) FROM nsys_kernel")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_text_and_empty_files_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "stats.sqlite"
    text.write_text("Generating SQLite file report.sqlite\n")
    with pytest.raises(UnsupportedInputError, match="nsys export --type sqlite"):
        NsysExport(text)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(UnsupportedInputError, match=r"Nsight Systems export .*found tables: t"):
        NsysExport(other)
