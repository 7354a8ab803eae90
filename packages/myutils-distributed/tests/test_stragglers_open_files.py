"""stragglers with more ranks than open files, and across processes: the same report whatever the path.

Each limited run is a child process that lowers ``RLIMIT_NOFILE`` itself (tests/limited_stragglers.py),
so the limit never touches the test process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.distributed.stragglers import analyze_stragglers
from my_utils.distributed.testing import write_synthetic_run

CHILD = Path(__file__).resolve().parent / "limited_stragglers.py"
RANKS = 150  # well above the lowered limits below

runner = CliRunner()


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """150 ranks x 8 steps, one slow, and the report read without any limit (the reference)."""
    folder = tmp_path_factory.mktemp("wide")
    write_synthetic_run(folder, RANKS, 8, slow=(77, "forward", 2.0), clock_offsets={5: (0.002, False)})
    return folder, analyze_stragglers(folder).to_dict()


def _limited(soft: str, hard: str, folder: Path, *executor: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(CHILD), soft, hard, str(folder), *executor],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def test_more_ranks_than_the_hard_limit_are_read_one_at_a_time(wide_run: tuple[Path, dict[str, Any]]) -> None:
    folder, reference = wide_run
    result = _limited("64", "64", folder)  # 150 rank files can never be open at once here
    assert "error" not in result, result["error"]
    assert result["report"] == reference and result["report"]["stragglers"] == [{"rank": 77, "section": "forward"}]


def test_the_soft_limit_is_raised_toward_the_hard_one(wide_run: tuple[Path, dict[str, Any]]) -> None:
    folder, reference = wide_run
    result = _limited("64", "4096", folder)
    assert result["report"] == reference
    assert RANKS < result["soft_after"] < 4096  # raised as far as the ranks needed, not to the hard limit


def test_a_limit_too_low_for_even_one_rank_is_refused_before_reading(wide_run: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = wide_run
    result = _limited("open+4", "open+4", folder)
    assert result["error"].startswith("UsageError: stragglers: the open-file limit is "), result
    assert f"reading {RANKS} ranks needs at least" in result["error"] and "ulimit -n" in result["error"]


def test_a_process_pool_gives_the_same_report(wide_run: tuple[Path, dict[str, Any]]) -> None:
    folder, reference = wide_run
    assert analyze_stragglers(folder, executor="process", max_workers=2).to_dict() == reference
    assert _limited("64", "64", folder, "process")["report"] == reference  # the pool under the low limit too


def test_a_bad_rank_in_a_worker_is_one_line_naming_it(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 4, 3)
    bad = tmp_path / "profile_rank_2.csv"
    bad.write_text(bad.read_text() + "1.0,x,h,notastep,forward,END,1.0,\n")
    proc = subprocess.run([sys.executable, "-m", "my_utils.core", "stragglers", str(tmp_path), "--executor",
                           "process", "--workers", "2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"error: {bad}:line 20: expected an integer in column 'step', got 'notastep'"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"profile_rank_{r}.csv" for r in range(4)]


@pytest.mark.parametrize("executor", ["threads", "localhost:8786", "http://x:1"])
def test_an_executor_not_offered_here_is_a_usage_error(tmp_path: Path, executor: str) -> None:
    write_synthetic_run(tmp_path, 2, 2)
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path), "--executor", executor])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: analyze_stragglers(executor={executor!r}): expected None, 'serial', "
                                    "'process', 'dask' or a Dask scheduler address") \
        and len(result.stderr.splitlines()) == 1
