"""NsysSqliteMetricsProvider on the three real exports (2021 and 2022 schemas)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.profiling.nsys.provider import NsysSqliteMetricsProvider

DBS = ["extrap__con_kernel.sqlite", "extrap__concurrent_s1_profile1.sqlite", "extrap__ex-gpu.s10.sqlite"]


def _sql(path: Path, query: str) -> list[tuple]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_every_nsys_fixture_is_listed(real_fixtures: Path) -> None:
    # the newer exports (2022.2 to 2026, the NCCL ring) are read by test_nsys_*.py
    assert {n.removeprefix("nsys/") for n in real_fixtures.names("nsys/")} >= set(DBS) | {"ai4mat__torch_gcn_nsys_stats_console.txt"}


@pytest.mark.parametrize("name", DBS)
def test_export_matches_direct_sql(real_fixtures: Path, name: str) -> None:
    path = real_fixtures / "nsys" / name
    before = sorted(p.name for p in path.parent.iterdir())
    events = NsysSqliteMetricsProvider.from_input(path).collect()
    assert sorted(p.name for p in path.parent.iterdir()) == before  # nothing written next to the input
    (n_kernels, kernel_ns), = _sql(path, "SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    by_name = {e.name: e for e in events}
    assert by_name["gpu.kernel_count"].value == n_kernels
    assert by_name["gpu.kernel_time"].value == pytest.approx(kernel_ns / 1e6)
    assert sum(e.attrs["count"] for e in events if e.name.startswith("kernel:")) == n_kernels
    names = {r[0] for r in _sql(path, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                      "JOIN StringIds s ON s.id = k.demangledName")}
    assert {e.attrs["op"] for e in events if e.name.startswith("kernel:")} == names
    # 2021.x exports add a CUDA *backtrace* copy of every API call (eventClass 67, the same correlation id): the
    # old provider counted those calls twice (36 on ex-gpu.s10 instead of 18); a call counts once
    columns = {r[1] for r in _sql(path, "PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")}
    copies = " WHERE eventClass NOT IN (67, 68, 69)" if "eventClass" in columns else ""
    n_runtime, = _sql(path, f"SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME{copies}")[0]
    assert sum(e.attrs["count"] for e in events if e.name.startswith("runtime:")) == n_runtime
    tables = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        (n, nbytes), = _sql(path, "SELECT COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        memcpy = [e for e in events if e.name.startswith("memcpy:")]
        assert sum(e.attrs["count"] for e in memcpy) == n and sum(e.attrs["bytes"] for e in memcpy) == nbytes
    assert {e.source for e in events} == {"nsys_sqlite"}


def test_nvtx_ranges(real_fixtures: Path) -> None:
    path = real_fixtures / "nsys/extrap__concurrent_s1_profile1.sqlite"
    n_ranges, = _sql(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL")[0]
    events = NsysSqliteMetricsProvider.from_input(path).collect()
    assert sum(e.attrs["count"] for e in events if e.name.startswith("nvtx:")) == n_ranges == 76
    assert any(e.name == "nvtx:main->test_max_par" for e in events)


def test_session_start_anchors_timestamps(real_fixtures: Path) -> None:
    path = real_fixtures / "nsys/extrap__con_kernel.sqlite"
    (epoch_ns,), = _sql(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    (first,), = _sql(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    kernels = [e for e in NsysSqliteMetricsProvider.from_input(path).collect() if e.name.startswith("kernel:")]
    assert min(e.ts for e in kernels) == pytest.approx(epoch_ns / 1e9 + first / 1e9)
    # the 2021 export has no session start: no invented wall clock
    old = NsysSqliteMetricsProvider.from_input(path.parent / "extrap__ex-gpu.s10.sqlite").collect()
    assert {e.ts for e in old} == {None}


def test_console_text_is_refused(real_fixtures: Path) -> None:
    with pytest.raises(UnsupportedInputError, match="nsys export --type sqlite"):
        NsysSqliteMetricsProvider.from_input(real_fixtures / "nsys/ai4mat__torch_gcn_nsys_stats_console.txt")


def test_sqlite_without_nsys_tables(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(UnsupportedInputError, match="found tables: t"):
        NsysSqliteMetricsProvider.from_input(db).collect()


def test_truncated_database(real_fixtures: Path, tmp_path: Path) -> None:
    data = (real_fixtures / "nsys/extrap__con_kernel.sqlite").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[:40960])
    with pytest.raises(InputError, match=r"cut\.sqlite:(table \w+|sqlite_master)"):
        NsysSqliteMetricsProvider.from_input(cut).collect()


def test_a_flipped_byte_in_the_schema_is_one_line_of_bad_input(real_fixtures: Path, tmp_path: Path) -> None:
    # seen: sqlite builds its "malformed database schema (...)" message from the damaged name
    # itself, and decoding it raised UnicodeDecodeError through the provider
    data = bytearray((real_fixtures / "nsys/extrap__con_kernel.sqlite").read_bytes())
    data[data.index(b"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") + 24] = 0xBC
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        NsysSqliteMetricsProvider(path).collect()
    message = str(err.value)
    assert message.startswith(f"{path}:sqlite_master: a readable SQLite database (")
    assert "\n" not in message and "malformed database schema" in message
