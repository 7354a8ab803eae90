"""Stopping the process pool while a worker is half-way through sending its result.

A worker ended (``stop_pool`` terminates them on Ctrl-C, SIGTERM or an error) in the middle
of writing a result leaves part of a message in the pool's result pipe; the pool's manager
thread then waited for the rest for ever, and ``diff`` hung after Ctrl-C (the crash matrix
caught it in CI). Here a real spawned worker writes such a half message on purpose and then
waits to be ended, so the moment is certain rather than one run in 25.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import sys, time
    from pathlib import Path

    def half_sent(marker):
        """Write the header and a few bytes of a 1,000-byte message to the pool's result pipe; wait."""
        frame = sys._getframe()
        while frame is not None and "result_queue" not in frame.f_locals:
            frame = frame.f_back
        writer = frame.f_locals["result_queue"]._writer
        writer._send((1000).to_bytes(4, "big") + b"partial")
        Path(marker).write_text("sent")
        time.sleep(600)

    if __name__ == "__main__":
        from my_utils.core.lifecycle import spawn_pool, stop_pool

        marker = Path(sys.argv[1])
        pool = spawn_pool(2)
        future = pool.submit(half_sent, str(marker))
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the worker never wrote its half message"
        start = time.monotonic()
        stop_pool(pool)
        print(f"stopped in {time.monotonic() - start:.2f} s; the task: {type(future.exception()).__name__}")
''')


def test_stop_ends_a_pool_whose_worker_died_half_way_through_a_result(tmp_path: Path) -> None:
    script = tmp_path / "half_sent.py"
    script.write_text(SCRIPT)
    try:
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / "marker")], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("stop_pool() hung: the pool's manager thread still waits for the rest of the "
                             "message") from exc
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "marker").read_text() == "sent"  # the half message was written: the moment happened
    seconds = float(proc.stdout.split()[2])
    assert seconds < 10, proc.stdout
    assert proc.stdout.rstrip().endswith("the task: BrokenProcessPool"), proc.stdout
