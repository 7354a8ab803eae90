"""Crash matrix: SIGKILL, SIGTERM and SIGINT at seeded random moments of ``trace``, ``ingest``, ``analyze``, ``diff``.

Each command runs as a real process in its own session, on several ranks of a real Kineto
trace, with the process pool (and, for ``trace`` and ``ingest``, a local Dask cluster). Once its
workers run (the progress marker: worker processes in the session, and for ``trace`` and ``ingest``
their scratch folder of spill files), it is sent a signal after a seeded random delay within its
measured run time; what it must show is :mod:`my_utils.core.testing.crash`'s: no process outlives it, it ends with the
signal's status, no partial result, no scratch, and the next run succeeds and cleans up.

CI runs one moment per signal and command (``MYUTILS_CRASH_MOMENTS`` sets more: the issue's
figures were measured with 10). The figures of a run are printed (``-s``) and appended as JSON
lines to ``$MYUTILS_CRASH_REPORT`` when set.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events

pytest.importorskip("psutil")

from my_utils.core.testing.crash import CrashCommand, check_outcomes, run_matrix

pytestmark = pytest.mark.slow

SOURCE = "kineto/hta/nccl_parser_config__nccl_data.json.gz"  # 40k events, GPU streams, flows
MOMENTS = int(os.environ.get("MYUTILS_CRASH_MOMENTS", "1"))
SEED = 20_240_917
CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]


@dataclass(frozen=True)
class Command:
    """One command of the matrix: its arguments, where its results go, and what shows its workers run."""

    name: str
    executor: str
    argv: Callable[[Path], list[str]]
    results: Callable[[Path], Path]  # the output folder
    scratch: str | None  # the prefix of the scratch folder the command keeps in $TMPDIR while it works
    complete: frozenset[str]  # the files of a finished run: all of them, or none, may be left

    @property
    def id(self) -> str:
        return f"{self.name}-{self.executor}"


def _flags(flag: str, work: Path, ranks: range) -> list[str]:
    return [a for r in ranks for a in (flag, str(work / "in" / f"rank_{r}.json.gz"))]


def _events(work: Path) -> str:
    return str(work / "in" / "metrics_events.jsonl")


COMMANDS = [
    *[Command("trace", ex, lambda w, ex=ex: ["trace", "--events", _events(w), *_flags("--torch-trace", w, range(4)),
                                            "--output", str(w / "out" / "merged.json"), "--executor", ex,
                                            "--workers", "2", "-q"],
              lambda w: w / "out", "myutils-trace-", frozenset({"merged.json"})) for ex in ("process", "dask")],
    *[Command("ingest", ex, lambda w, ex=ex: ["ingest", "--config", str(w / "in" / "ingest.json"), "--output-dir",
                                             str(w / "out"), "--executor", ex, "--workers", "2", "-q"],
              lambda w: w / "out", "myutils-ingest-", frozenset({"metrics_events.jsonl"}))
      for ex in ("process", "dask")],
    Command("analyze", "process", lambda w: ["analyze", "--events", _events(w), *_flags("--trace", w, range(6)),
                                             "--output-dir", str(w / "out"), "-q"],
            lambda w: w / "out", None,
            frozenset({"analysis_report.json", "analysis_report.md", "analysis_report.html"})),
    Command("diff", "process", lambda w: ["diff", *_flags("--base-trace", w, range(3)),
                                          *_flags("--target-trace", w, range(3, 6)),
                                          "--output", str(w / "out" / "diff.json"),
                                          "--markdown", str(w / "out" / "diff.md")],
            lambda w: w / "out", None, frozenset({"diff.json", "diff.md"})),
]


@pytest.fixture(scope="module")
def inputs(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six ranks of a real GPU trace (each with its own rank) and MyTimer regions for two of them."""
    folder = tmp_path_factory.mktemp("crash_inputs")
    doc = json.loads(gzip.decompress((real_fixtures / SOURCE).read_bytes()))
    for r in range(6):
        doc["distributedInfo"] = {"rank": r, "world_size": 6}
        with gzip.open(folder / f"rank_{r}.json.gz", "wt", compresslevel=1) as fh:
            json.dump(doc, fh)
    t0 = doc["baseTimeNanoseconds"] / 1e9
    # ingest reads the traces (not the events file beside them, nor this config: *.json only in "traces")
    (folder / "traces").mkdir()
    for r in range(6):
        (folder / "traces" / f"rank_{r}.json.gz").symlink_to(folder / f"rank_{r}.json.gz")
    (folder / "ingest.json").write_text(json.dumps({"run_id": "crash", "providers": [
        {"provider": "torch_profiler", "input": str(folder / "traces")}]}))
    write_events(folder / "metrics_events.jsonl",
                 [MetricEvent(name="iter", value=5.0, kind="duration", unit="ms", source="mytimer", rank=r, step=s,
                              ts=t0 + s * 0.01, attrs={"depth": 0}) for r in range(2) for s in range(50)])
    return folder


def _started(cmd: Command) -> Callable[[list[str], Path], bool]:
    def started(lines: list[str], tmpdir: Path) -> bool:
        if cmd.executor == "dask":
            running = sum("multiprocessing.forkserver" in line for line in lines) >= 2  # the server + a worker
        else:
            running = any("spawn_main" in line for line in lines)
        return running and (not cmd.scratch or any(tmpdir.glob(f"{cmd.scratch}*")))
    return started


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.id for c in COMMANDS])
def test_killed_commands_leave_no_process_no_result_and_the_next_run_succeeds(cmd: Command, inputs: Path,
                                                                            tmp_path: Path) -> None:
    if cmd.executor == "dask":
        pytest.importorskip("distributed")
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "in").symlink_to(inputs)
    # short: the fork server's socket lives in $TMPDIR, and a unix socket's path has at most ~104 bytes
    tmpdir = Path(tempfile.mkdtemp(prefix="crash-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        _matrix(cmd, work, tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _matrix(cmd: Command, work: Path, tmpdir: Path) -> None:
    crash = CrashCommand(cmd.id, [*CLI, *cmd.argv(work)], cmd.results(work), cmd.complete, _started(cmd))
    figures, outcomes = run_matrix(crash, tmpdir, MOMENTS, SEED)
    print(json.dumps(figures))
    if os.environ.get("MYUTILS_CRASH_REPORT"):
        with open(os.environ["MYUTILS_CRASH_REPORT"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**figures, "outcomes": [o.__dict__ for o in outcomes]}) + "\n")
    check_outcomes(cmd.id, outcomes)
