"""A run killed outright (SIGKILL) leaves its staged temporaries; the next run writing the same target removes them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from my_utils.profiling.cli._outputs import StagedOutputs

_WRITER = """
import sys, time
from my_utils.profiling.cli._outputs import StagedOutputs
with StagedOutputs() as out:
    out.write_text(sys.argv[1], "partial")
    print("staged", flush=True)
    time.sleep(60)
"""


def test_a_killed_writers_temporaries_go_with_the_next_run_a_live_ones_stay(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    killed = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    live = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        for proc in (killed, live):
            assert proc.stdout is not None and proc.stdout.readline().strip() == "staged"
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        left = sorted(p.name for p in tmp_path.iterdir())
        assert len(left) == 2 and all(n.endswith(".staged.tmp") for n in left)
        with StagedOutputs() as out:
            out.write_text(target, "whole")
        rest = sorted(p.name for p in tmp_path.iterdir() if p.name != "report.json")
        assert rest == [n for n in left if f".{live.pid}-" in n]  # the live writer's temporary is not touched
        assert target.read_text() == "whole"
    finally:
        for proc in (live, killed):
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            assert proc.stdout is not None
            proc.stdout.close()


def test_a_temporary_whose_pid_another_process_took_since_goes(tmp_path: Path) -> None:
    from my_utils.core.scratch import owner_token
    from my_utils.profiling.cli._outputs import _OWNER

    target = tmp_path / "r.md"
    pid, start = owner_token(os.getppid()).split("-")  # a live process, which did not start at tick 1
    assert start not in ("0", "1")
    reused = tmp_path / f".r.md.{_OWNER}.{pid}-1.abcd1234.staged.tmp"
    live = tmp_path / f".r.md.{_OWNER}.{pid}-{start}.abcd1234.staged.tmp"
    for p in (reused, live):
        p.write_text("partial")
    with StagedOutputs() as out:
        out.write_text(target, "x")
    assert not reused.exists() and live.read_text() == "partial"


def test_a_foreign_or_odd_name_is_never_removed(tmp_path: Path) -> None:
    target = tmp_path / "r.md"
    odd = [tmp_path / ".r.md.zzzzzz.1.abcd.staged.tmp",  # another machine's tag
           tmp_path / ".r.md.notes.staged.tmp", tmp_path / "r.md.bak"]
    for p in odd:
        p.write_text("keep")
    with StagedOutputs() as out:
        out.write_text(target, "x")
    assert all(p.read_text() == "keep" for p in odd) and os.path.exists(target)


def test_a_library_that_cannot_be_mapped_is_memory_running_out() -> None:
    from my_utils.profiling.cli._outputs import is_out_of_memory

    # what `import sqlite3` raised under analyze's address-space limit in a CI run (a traceback, before this)
    assert is_out_of_memory(ImportError("libsqlite3.so.0: failed to map segment from shared object"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(ImportError("No module named 'msgspec'"))
    assert not is_out_of_memory(OSError("failed to map segment"))
