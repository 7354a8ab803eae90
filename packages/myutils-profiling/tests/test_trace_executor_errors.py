"""One bad torch trace among several, read by process-pool or Dask workers: one line on stderr naming that file
(and the place), exit 2, nothing written, no scratch left; nothing of the workers' own logging reaches the caller."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import write_events

CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]
GOOD = ["kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz"]


def _torn(real_fixtures: Any, folder: Path) -> Path:
    text = gzip.decompress((real_fixtures / GOOD[0]).read_bytes())
    path = folder / "rank_2.json"
    path.write_bytes(text[:300_000])  # cut inside an event, as a killed writer leaves it
    return path


@pytest.mark.parametrize("executor", ["serial", "process", pytest.param("dask", marks=pytest.mark.slow)])
def test_one_torn_trace_among_several_is_one_line_naming_it(real_fixtures: Any, tmp_path: Path,
                                                            short_tmp_path: Path, executor: str) -> None:
    if executor == "dask":
        pytest.importorskip("distributed")
    torn = _torn(real_fixtures, tmp_path)
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [])
    scratch = short_tmp_path  # $TMPDIR: the local cluster's fork server puts its socket there (a short path)
    out = tmp_path / "out" / "merged.json"
    traces = [str(real_fixtures / GOOD[0]), str(torn), str(real_fixtures / GOOD[1])]
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    res = subprocess.run([*CLI, "trace", "--events", str(events), *[a for t in traces for a in ("--torch-trace", t)],
                          "--output", str(out), "--executor", executor, "--workers", "2", "-q"],
                         capture_output=True, text=True, timeout=600, env={**env, "TMPDIR": str(scratch)})
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr  # no worker log, no traceback, no BrokenProcessPool
    assert lines[0].startswith(f"error: {torn}:character ") and "may be truncated" in lines[0]
    at = int(lines[0].split(":character ")[1].split(":")[0])
    assert at <= torn.stat().st_size  # a place inside the file
    assert res.stdout == "" and not out.parent.exists()
    assert [p.name for p in scratch.iterdir() if p.name.startswith("myutils-")] == []
