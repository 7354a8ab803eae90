"""Crash matrix: SIGKILL, SIGTERM and SIGINT at seeded random moments of a command that runs workers.

The command runs as a real process in its own session. Once its workers run (``CrashCommand.started``
says so from the session's command lines and ``$TMPDIR``), it is sent a signal after a seeded random
delay within its measured run time (SIGINT goes to the process group, as Ctrl-C in a terminal does).
:func:`check_outcomes` then holds it to what a user expects of a command that is stopped:

- no process of the session (workers, the resource tracker, the fork server, Dask workers)
  outlives the command by more than :data:`OUTLIVE_S`, and the caller's pipes reach EOF by then;
- it ends with the signal's status (SIGTERM: 143 or -15, SIGINT: 130 or -2), not a failure of its own;
- nothing that looks like a result is in the output folder: no file, or every file of a finished
  run when the signal caught the command as it ended (never some of them); SIGKILL may leave a
  hidden temporary named by its owner, SIGTERM and SIGINT nothing, neither there nor in $TMPDIR;
- the next run succeeds and removes what the killed run left (:func:`run_matrix` checks it).

Needs ``psutil`` (a test requirement); callers skip without it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OUTLIVE_S", "CrashCommand", "Outcome", "check_outcomes", "clean_run", "killed_run", "run_matrix",
           "session"]

OUTLIVE_S = 5.0
_EXIT = {"SIGTERM": (143, -15), "SIGINT": (130, -2), "SIGKILL": (-9,)}


@dataclass(frozen=True)
class CrashCommand:
    """One command of a matrix: its command line, where its results go, and what shows its workers run."""

    id: str
    argv: list[str]
    results: Path  # the output folder (empty when the command only prints)
    complete: frozenset[str]  # the files of a finished run: all of them, or none, may be left
    started: Callable[[list[str], Path], bool]  # (the session's command lines, $TMPDIR) -> its workers run
    check_run: Callable[[bytes], None] | None = None  # checks a clean run's stdout


@dataclass
class Outcome:
    """What one killed run left."""

    signal: str
    delay_s: float
    landed: bool  # the command was still running when the signal was sent
    exit_code: int | None
    exit_s: float  # from the signal to the command's end
    survivors: list[str] = field(default_factory=list)  # session processes alive OUTLIVE_S after the command ended
    pipes_open: bool = False
    leftovers: list[str] = field(default_factory=list)  # result-looking files in the output folder
    scratch: list[str] = field(default_factory=list)  # $TMPDIR entries after SIGTERM/SIGINT
    finished: bool = False  # every result file was there: the signal came as the command ended
    stderr: str = ""  # the end of what the command said


def session(sid: int) -> list[Any]:
    """The live (not zombie) processes of session ``sid``."""
    import psutil

    out = []
    for proc in psutil.process_iter(["status", "cmdline"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _environment(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    return {**env, "TMPDIR": str(tmpdir), "PYTHONUNBUFFERED": "1"}


def _start(cmd: CrashCommand, tmpdir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd.argv, env=_environment(tmpdir), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_workers(cmd: CrashCommand, proc: subprocess.Popen[bytes], tmpdir: Path) -> float | None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        lines = [" ".join(p.info["cmdline"] or []) for p in session(proc.pid)]
        if cmd.started(lines, tmpdir):
            return time.monotonic()
        time.sleep(0.05)
    return None


def _end_session(sid: int) -> None:
    import psutil

    for p in session(sid):
        try:
            p.kill()
        except psutil.Error:
            pass


def clean_run(cmd: CrashCommand, tmpdir: Path) -> float:
    """Run to the end (it must succeed); seconds from the workers' start to the end."""
    proc = _start(cmd, tmpdir)
    try:
        marker = _wait_for_workers(cmd, proc, tmpdir)
        out, err = proc.communicate(timeout=600)
    finally:
        _end_session(proc.pid)
    assert proc.returncode == 0, f"{cmd.id}: {err.decode(errors='replace')[-2000:]}"
    if cmd.check_run is not None:
        cmd.check_run(out)
    if cmd.complete:
        assert list(cmd.results.iterdir()), f"{cmd.id}: the run wrote its results"
    return time.monotonic() - (marker or time.monotonic())


def killed_run(cmd: CrashCommand, tmpdir: Path, sig: signal.Signals, delay: float) -> Outcome:
    """Start ``cmd``, send ``sig`` ``delay`` seconds after its workers run, and record what it left."""
    proc = _start(cmd, tmpdir)
    err = b""
    try:
        marker = _wait_for_workers(cmd, proc, tmpdir)
        assert marker is not None, f"{cmd.id}: the workers never ran ({proc.poll()})"
        time.sleep(delay)
        sent = time.monotonic()
        try:
            if sig == signal.SIGINT:
                os.killpg(proc.pid, sig)  # Ctrl-C in a terminal: the whole foreground group
            else:
                os.kill(proc.pid, sig)
            landed = True
        except ProcessLookupError:  # it ended (and was reaped) before the signal: not a kill that landed
            landed = False
        landed = landed and proc.poll() != 0  # a command that had already finished exits 0: it was too late
        proc.wait(timeout=120)
        ended = time.monotonic()
        survivors = session(proc.pid)
        while survivors and time.monotonic() < ended + OUTLIVE_S:
            time.sleep(0.1)
            survivors = session(proc.pid)
        names = [" ".join(p.info["cmdline"] or [])[:120] for p in survivors]
        try:
            _out, err = proc.communicate(timeout=0.5)
            pipes_open = False
        except subprocess.TimeoutExpired:
            pipes_open = True
    finally:
        _end_session(proc.pid)
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    owner = f".{proc.pid}-"
    left = sorted(p.name for p in cmd.results.iterdir()
                  if not (sig == signal.SIGKILL and p.name.startswith(".") and owner in p.name
                          and p.name.endswith(".tmp")))
    # every file of a run the signal caught at its very end is a result (the command had finished writing);
    # some of them, or anything else, is not
    complete = bool(cmd.complete) and set(left) == cmd.complete
    leftovers = [] if complete else left
    scratch = [] if sig == signal.SIGKILL else sorted(p.name for p in tmpdir.iterdir())
    return Outcome(sig.name, round(delay, 3), landed, proc.returncode, round(ended - sent, 3), names, pipes_open,
                   leftovers, scratch, complete, err.decode(errors="replace")[-300:])


def check_outcomes(cmd_id: str, outcomes: list[Outcome]) -> None:
    """Assert what every killed run must show (see the module doc)."""
    for o in outcomes:
        assert o.landed, f"{cmd_id}: {o.signal} after {o.delay_s} s came after the end; the inputs are too small"
        assert o.survivors == [], f"{cmd_id} {o.signal}: {o.survivors} outlived the command by {OUTLIVE_S} s"
        assert not o.pipes_open, f"{cmd_id} {o.signal}: the caller's stdout/stderr were still held"
        assert o.leftovers == [], f"{cmd_id} {o.signal}: left {o.leftovers}"
        assert o.scratch == [], f"{cmd_id} {o.signal}: left {o.scratch} in $TMPDIR"
        assert o.exit_code in _EXIT[o.signal] or (o.finished and o.exit_code == 0), \
            f"{cmd_id} {o.signal}: exit status {o.exit_code}, expected one of {_EXIT[o.signal]}; it said {o.stderr!r}"
        if o.signal != "SIGKILL":
            assert o.exit_s < 30, f"{cmd_id} {o.signal}: took {o.exit_s} s to end"


def run_matrix(cmd: CrashCommand, tmpdir: Path, moments: int, seed: object) -> tuple[dict[str, Any], list[Outcome]]:
    """A clean run, then ``moments`` killed runs per signal, each followed by a clean run that must succeed.

    Returns the figures of the matrix and every outcome (:func:`check_outcomes` judges them).
    """
    results = cmd.results
    run_s = clean_run(cmd, tmpdir)
    rng = random.Random(f"{seed}-{cmd.id}")
    outcomes: list[Outcome] = []
    missed = 0
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        for _ in range(moments):
            delay = rng.uniform(0.0, 0.6 * run_s)
            for _attempt in range(4):  # a moment after the end (the machine ran faster this time): half as late
                for p in results.iterdir():  # the previous (successful) run's results
                    p.unlink()
                outcome = killed_run(cmd, tmpdir, sig, delay)
                if outcome.landed:
                    break
                missed += 1
                delay /= 2
            outcomes.append(outcome)
            # the next run: succeeds, and removes what the killed one left (its temporaries, its scratch)
            clean_run(cmd, tmpdir)
            hidden = [p.name for p in results.iterdir() if p.name.startswith(".")]
            assert hidden == [], f"{cmd.id}: the run after {outcome} left {hidden} in {results}"
            scratch = [p.name for p in tmpdir.iterdir() if p.name.startswith("myutils-")]
            assert scratch == [], f"{cmd.id}: the run after {outcome} left {scratch} in $TMPDIR"
    figures = {"command": cmd.id, "runs": len(outcomes), "landed": sum(o.landed for o in outcomes),
               "late_moments_redrawn": missed,
               "survivors": sum(len(o.survivors) for o in outcomes), "pipes_open": sum(o.pipes_open for o in outcomes),
               "leftover_files": sum(len(o.leftovers) for o in outcomes),
               "caught_at_the_end": sum(o.finished for o in outcomes),
               "scratch_left": sum(len(o.scratch) for o in outcomes), "clean_run_s": round(run_s, 2),
               "max_exit_s": max(o.exit_s for o in outcomes)}
    return figures, outcomes
