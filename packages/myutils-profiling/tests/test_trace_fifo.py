"""A FIFO (or another non-regular file) among ``trace``'s inputs is refused in one line; nothing blocks on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.events import MetricEvent, write_events

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo: no FIFOs on this OS")
CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]


def _region(rank: int) -> MetricEvent:
    return MetricEvent(name="iter", value=1.0, kind="duration", unit="ms", source="mytimer", rank=rank, step=0,
                       ts=1.7e9, attrs={"depth": 0})


def _case(tmp_path: Path, case: str) -> tuple[list[str], Path]:
    """(the arguments, the FIFO) of each way a FIFO reaches trace."""
    events = tmp_path / "run" / "metrics_events.jsonl"
    events.parent.mkdir()
    if case == "events file":
        os.mkfifo(events)
        return ["--events", str(events)], events
    if case == "events in a folder":
        os.mkfifo(events)
        return ["--events", str(events.parent)], events
    if case == "profile csv in a folder":
        fifo = events.parent / "profile_rank_1.csv"
        os.mkfifo(fifo)
        (events.parent / "profile_rank_0.csv").write_text("")
        return ["--events", str(events.parent)], fifo
    write_events(events, [_region(0)])
    fifo = tmp_path / "trace_rank_0.json"
    os.mkfifo(fifo)
    if case == "torch trace":
        return ["--events", str(events), "--torch-trace", str(fifo)], fifo
    # named by the events, found in their folder
    named = events.parent / "trace_rank_1.json"
    os.mkfifo(named)
    write_events(events, [_region(0), MetricEvent(name="aten::mm", value=1.0, kind="duration", unit="ms",
                                                  source="torch_profiler", rank=1, step=0,
                                                  attrs={"file": named.name})])
    return ["--events", str(events)], named


@pytest.mark.parametrize("case", ["events file", "events in a folder", "profile csv in a folder", "torch trace",
                                  "named by the events"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, case: str) -> None:
    args, fifo = _case(tmp_path, case)
    out = tmp_path / "out" / "t.json"
    res = subprocess.run([*CLI, "trace", *args, "--output", str(out), "-q", "--executor", "serial"],
                         capture_output=True, text=True, timeout=120)
    if case == "named by the events":  # not a trace: said, and the rest is merged
        assert res.returncode == 0, res.stderr
        assert "'trace_rank_1.json'" in res.stderr and out.exists()
        return
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines == [f"error: {fifo}: a regular file (this is a FIFO)"], lines
    assert not out.parent.exists()


def test_the_trace_reader_refuses_a_fifo(tmp_path: Path) -> None:
    """The reader itself (shared with the Kineto provider) never opens one, whatever the caller checked."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    code = ("import sys; from my_utils.profiling.kineto.read.stream import TraceStream\n"
            "try:\n    list(TraceStream(sys.argv[1]).events())\nexcept ValueError as exc:\n    print(exc)")
    res = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == f"{fifo}: a regular file (this is a FIFO)", res.stderr
