"""CProfileStatsProvider on the real pstats files, and a dump this test records itself."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest

from my_utils.core.errors import UnsupportedInputError
from my_utils.profiling.formats.cprofile import CProfileStatsProvider


@pytest.mark.parametrize("name", ["gprof2dot__memtrail.pstats", "gprof2dot__print1.pstats"])
def test_real_pstats(real_fixtures: Path, name: str) -> None:
    path = real_fixtures / "cprofile" / name
    stats = pstats.Stats(str(path))
    events = CProfileStatsProvider.from_input(path).collect()
    functions = [e for e in events if e.name.startswith("python:")]
    assert len(functions) == len(stats.stats)  # type: ignore[attr-defined]
    total = next(e for e in events if e.name == "python.total_time")
    assert total.value == pytest.approx(stats.total_tt * 1e3)  # type: ignore[attr-defined]
    assert total.attrs["calls"] == stats.total_calls  # type: ignore[attr-defined]
    assert sum(e.attrs["count"] for e in functions) == stats.total_calls  # type: ignore[attr-defined]


def test_python2_marshal_is_refused(real_fixtures: Path) -> None:
    with pytest.raises(UnsupportedInputError, match=r"unreadable pstats.*Python 2"):
        CProfileStatsProvider.from_input(real_fixtures / "cprofile/gprof2dot__cProfile_py2_legacy.pstats").collect()


def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_recorded_profile(tmp_path: Path) -> None:
    prof = cProfile.Profile()
    prof.runcall(_busy, 20000)
    out = tmp_path / "run.pstats"
    prof.dump_stats(out)
    events = CProfileStatsProvider.from_input(tmp_path).collect()
    busy = [e for e in events if e.attrs.get("op", "").endswith("(_busy)")]
    assert len(busy) == 1 and busy[0].attrs["count"] == 1
    assert busy[0].attrs["cumulative_ms"] >= busy[0].value >= 0


@pytest.mark.parametrize(("relpath", "hint"), [
    ("kineto/hta/cpu_only__rank-34.pt.trace.json.gz", "this is a gzip file (a Kineto trace .json.gz?"),
    ("kineto/kineto_repo/after_fix_trace.json", "this is JSON text"),
    ("nsys/extrap__con_kernel.sqlite", "this is an SQLite database"),
    ("nsys/ai4mat__torch_gcn_nsys_stats_console.txt", "this is text, not a pstats dump"),
    ("cprofile/gprof2dot__cProfile_py2_legacy.pstats", "written by Python 2"),
])
def test_hints_say_what_the_file_is(real_fixtures: Path, relpath: str, hint: str) -> None:
    path = real_fixtures / relpath
    with pytest.raises(UnsupportedInputError) as err:
        CProfileStatsProvider(path).collect()
    message = str(err.value)
    assert message.startswith(f"{path}: unreadable pstats: ") and hint in message
    assert ("Python 2" in message) == relpath.endswith("py2_legacy.pstats")  # only where it is true
