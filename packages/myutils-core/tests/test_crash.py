"""Crash safety: a timer + logger process killed with SIGKILL at random moments loses no completed step.

Each run appends to the same ``profile_rank_0.csv`` (through the same step log, so whatever one
kill leaves is also recovered by the next run) and records in a progress file every step whose
``step()`` and ``log_profile_event`` returned. After at least 20 kills, and with nobody calling
anything (the helper process of the last run renders its steps and removes the log by itself),
every row of every completed step must be in the CSV exactly once, in order, and parse.

A second test kills the training process *and* its helper: the next process that opens the
log folder renders what they left.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from my_utils.core.profile_csv import ProfileRow, read_profile_csv

REGIONS = 20  # per step: (1 + REGIONS) START/END pairs and one explicit row
STEPS = 1000
MIN_KILLS = 20

CHILD = f"""
import os, sys
from my_utils.core.logger import GlobalLogger
from my_utils.core.timer import MyTimer
log_dir, progress, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
mgr = GlobalLogger().setup(log_dir, rank=0, world_size=1)
timer = MyTimer(tag="run%d" % run)
names = ["region_%d,with comma" % i for i in range({REGIONS})]
fd = os.open(progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
sys.stdout.write("ready\\n"); sys.stdout.flush()
for step in range({STEPS}):
    timer.set_step(step)
    timer.start("iter")
    for name in names:
        timer.start(name)
        timer.stop(name)
    timer.stop("iter")
    timer.step()
    mgr.log_profile_event(step, "explicit", "MARK", 0.0, "run=%d" % run)
    os.write(fd, b"%d\\n" % step)
    if step == 0 and len(sys.argv) > 4:
        sys.stdout.write("helper %d\\n" % mgr.profile_sink._helper.pid); sys.stdout.flush()
if len(sys.argv) > 4:  # wait to be killed: a quiet machine finishes every step before the kill comes
    import time
    time.sleep(120)
"""


def run_once(log_dir: Path, progress: Path, run: int, delay: float) -> bool:
    """Start a writer, kill it after ``delay`` seconds; True if it was killed while running."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(log_dir), str(progress), str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        return False
    assert proc.returncode == -signal.SIGKILL, err.decode()
    return True


def test_sigkill_at_random_moments_loses_no_completed_step(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CRASH_TEST_SEED", "20261130")))
    log_dir = tmp_path / "logs"
    kills = runs = 0
    longest_delay = 0.1  # shrinks when a run finishes first (a faster machine)
    while kills < MIN_KILLS:
        assert runs < 3 * MIN_KILLS, f"only {kills} of {runs} runs were killed while writing"
        killed = run_once(log_dir, tmp_path / f"progress_{runs}.txt", runs, rng.uniform(0.0, longest_delay))
        kills += killed
        longest_delay *= 1.0 if killed else 0.5
        runs += 1

    csv_path = log_dir / "profile_rank_0.csv"
    wait_for_helpers(log_dir)
    rows = read_profile_csv(csv_path)  # raises on any malformed row that is not a torn tail
    timer_rows = Counter((r.metadata_dict()["tag"], r.step) for r in rows if r.event_name != "explicit")
    explicit_rows = Counter((r.metadata_dict()["run"], r.step) for r in rows if r.event_name == "explicit")
    per_step = 2 * (REGIONS + 1)
    completed_total = 0
    assert_in_order(rows)
    for run in range(runs):
        progress = tmp_path / f"progress_{run}.txt"
        done = [int(x) for x in progress.read_text().split()] if progress.exists() else []
        assert done == list(range(len(done)))
        completed_total += len(done)
        for step in done:
            assert timer_rows[(f"run{run}", step)] == per_step, (run, step)
            assert explicit_rows[(str(run), step)] == 1, (run, step)
        # the step in flight when the kill came may be partly written (a short write), never more
        assert timer_rows.get((f"run{run}", len(done)), 0) <= per_step
        for step in range(len(done) + 1, STEPS):
            assert (f"run{run}", step) not in timer_rows
    assert completed_total > 0
    data = csv_path.read_bytes()
    torn_tail = data[data.rfind(b"\n") + 1:]
    assert b"\n" not in torn_tail  # at most one torn row: the bytes after the last newline
    assert all(r.event_type in ("START", "END", "MARK") for r in rows)


def wait_for_helpers(log_dir: Path, quiet_s: float = 60.0, total_s: float = 600.0) -> None:
    """The last helper renders what its killed parent left, then removes the step log.

    Fails when nothing in the log folder changed for ``quiet_s`` (a helper that hangs), or after
    ``total_s`` in all: on a loaded machine (the whole suite on 2 cores beside a browser) the
    helpers of the killed runs may take longer than a fixed minute while still making progress.
    """
    start = last_change = time.monotonic()
    seen: object = None
    while (log_dir / "profile_rank_0.steplog").exists():
        now = time.monotonic()
        state = sorted((p.name, st.st_size, st.st_mtime_ns) for p in log_dir.iterdir()
                       if (st := _stat(p)) is not None)
        if state != seen:
            seen, last_change = state, now
        assert now - last_change < quiet_s, f"the helpers changed nothing in {log_dir} for {quiet_s:.0f} s"
        assert now - start < total_s, f"the helpers did not finish rendering within {total_s:.0f} s"
        time.sleep(0.05)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:  # removed while listed
        return None


def assert_in_order(rows: list[ProfileRow]) -> None:
    """Per run: step s's timer rows, then its explicit row, then step s+1's rows."""
    last: dict[str, tuple[int, int]] = {}  # run -> (step, 0 timer / 1 explicit) of its previous row
    for row in rows:
        meta = row.metadata_dict()
        run, kind = (meta["run"], 1) if row.event_name == "explicit" else (meta["tag"][3:], 0)
        key = (row.step, kind)
        assert key >= last.get(run, (-1, 1)), (run, key, last.get(run))
        last[run] = key


def test_kill_of_the_trainer_and_its_helper_is_recovered_by_the_next_open(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    progress = tmp_path / "progress.txt"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(log_dir), str(progress), "0", "report-helper"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    helper = int(proc.stdout.readline().split()[1])
    time.sleep(0.3)
    os.kill(helper, signal.SIGKILL)  # the helper first, so that it cannot render the last steps
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    done = [int(x) for x in progress.read_text().split()]
    assert done, "the child completed no step before the kill"
    assert (log_dir / "profile_rank_0.steplog").exists()  # nobody removed it: steps may be pending
    # the next run of the job (any process that sets up the same log folder) renders them
    code = ("from my_utils.core.logger import GlobalLogger\n"
            f"GlobalLogger().setup({str(log_dir)!r}, rank=0, world_size=1)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    rows = read_profile_csv(log_dir / "profile_rank_0.csv")
    steps = Counter(r.step for r in rows if r.event_name != "explicit")
    explicit = Counter(r.step for r in rows if r.event_name == "explicit")
    for step in done:
        assert steps[step] == 2 * (REGIONS + 1) and explicit[step] == 1, step
    assert_in_order(rows)
    assert not (log_dir / "profile_rank_0.steplog").exists()  # that process exited cleanly
