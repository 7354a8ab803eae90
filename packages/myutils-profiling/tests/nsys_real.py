"""Shared by test_nsys_*.py: the real exports, raw SQL on them, and a plain interval union (no package code).

Loaded by file path (``load_helpers``): the tests run in importlib mode, where test modules
cannot import each other.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

# the ring's files are named by host in the source repository: tests name them by position only
RING = [f"ring:{i}" for i in range(6)]
EXPORTS = ["nsys/extrap__con_kernel.sqlite", "nsys/extrap__concurrent_s1_profile1.sqlite",
           "nsys/extrap__ex-gpu.s10.sqlite", "nsys/fuser__report1_2024.6.sqlite",
           "nsys/nsysai__mfu_2gpu_before.sqlite", "nsys/nsysai__mfu_2gpu_after.sqlite",
           "nsys/pipit__perlmutter-cloverleaf-cuda.sqlite", "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite", *RING]


def export_path(real_fixtures: Any, key: str) -> Path:
    """The local path of an export key (``ring:i`` is the i-th file of the NCCL ring, by sorted name)."""
    if key.startswith("ring:"):
        names = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))
        assert len(names) == 6
        return real_fixtures / names[int(key.split(":")[1])]
    return real_fixtures / key


def pmi_rank(path: Path) -> int:
    """The PMI_RANK a ring export recorded for its process (``META_DATA_CAPTURE``), read with SQL alone."""
    rows = raw(path, "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' "
                     "AND value LIKE 'PMI_RANK=%'")
    return int(rows[0][0].split("=", 1)[1].strip('"'))


def ring_by_rank(real_fixtures: Any) -> list[Path]:
    """The ring's exports in rank order: the launcher's PMI_RANK each recorded (not their sorted names)."""
    return sorted((export_path(real_fixtures, k) for k in RING), key=pmi_rank)


def raw(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the raw export (no adapter), text read leniently like real files need."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def tables(path: Path) -> set[str]:
    return {r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def covered(intervals: list[tuple[int, int]]) -> tuple[int, int]:
    """(length of the union, number of disjoint pieces), by a plain sort-and-sweep."""
    total, pieces, cur_s, cur_e = 0, 0, 0, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e, pieces = s, e, pieces + 1
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total, pieces
