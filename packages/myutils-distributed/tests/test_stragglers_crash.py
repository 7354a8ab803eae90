"""Crash matrix of ``myutils stragglers``: SIGKILL, SIGTERM and SIGINT at seeded moments, process pool and Dask.

Before, a SIGTERM or SIGKILL left the pool's workers parsing for seconds (holding the caller's
stdout), left the scratch folder in $TMPDIR for good, and ended with "stopped by sys.exit(143)";
Ctrl-C on a local Dask cluster printed the workers' ``KeyboardInterrupt`` tracebacks. What each
killed run must show is :mod:`my_utils.core.testing.crash`'s; each clean run between them must
print the serial report. ``MYUTILS_CRASH_MOMENTS`` sets the moments per signal (CI: 1).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from my_utils.core.safe_io import strict_json
from my_utils.distributed.stragglers import analyze_stragglers
from my_utils.distributed.testing import write_synthetic_run

pytest.importorskip("psutil")

from my_utils.core.testing.crash import CrashCommand, check_outcomes, run_matrix

pytestmark = pytest.mark.slow

MOMENTS = int(os.environ.get("MYUTILS_CRASH_MOMENTS", "1"))
SEED = 20_261_202
CLI = [sys.executable, "-c", "import sys; sys.argv[0] = 'myutils'; from my_utils.core.cli import main; main()"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """16 ranks x 3,000 steps (about a second and a half of parsing on 2 workers), one slow; the serial report."""
    folder = tmp_path_factory.mktemp("stragglers_crash")
    write_synthetic_run(folder, 16, 3000, [("forward", 30.0), ("backward", 60.0), ("optimizer", 5.0)],
                        slow=(5, "forward", 1.5))
    return folder, strict_json(analyze_stragglers(folder, executor="serial").to_dict(), indent=2) + "\n"


def _started(lines: list[str], tmpdir: Path) -> bool:
    workers = any("spawn_main" in line or "multiprocessing.forkserver" in line for line in lines)
    return workers and any(tmpdir.glob("myutils-stragglers-*"))


@pytest.mark.parametrize("executor", ["process", "dask"])
def test_killed_stragglers_leave_no_process_no_scratch_and_the_next_run_succeeds(
        executor: str, run_dir: tuple[Path, str], tmp_path: Path) -> None:
    if executor == "dask":
        pytest.importorskip("distributed")
    folder, serial = run_dir

    def same_report(stdout: bytes) -> None:
        assert stdout.decode() == serial, "a clean run between the killed ones printed another report"

    out = tmp_path / "out"  # the command only prints: this stays empty
    out.mkdir()
    cmd = CrashCommand(f"stragglers-{executor}",
                       [*CLI, "stragglers", str(folder), "--json", "--executor", executor, "--workers", "2"],
                       out, frozenset(), _started, same_report)
    # short: a fork server's socket lives in $TMPDIR, and a unix socket's path has at most ~104 bytes
    tmpdir = Path(tempfile.mkdtemp(prefix="crash-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        figures, outcomes = run_matrix(cmd, tmpdir, MOMENTS, SEED)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    print(json.dumps(figures))
    check_outcomes(cmd.id, outcomes)
