"""One way to take a sample in a child interpreter: run code, read the JSON of its last stdout line.

Each tool measured in its own process (so peak RSS is its own) goes through ``child_sample``.
A failure (time-out, non-zero exit) is remembered in ``failure`` and returned for every later
sample of that tool, so a broken anchor costs one run, not one per round.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Child-script prelude: a thread samples, every 20 ms, the summed RSS of this process and its
#: descendants (``_peak[0]``) and of this process alone (``_peak[1]``) until ``_stop`` is set.
#: Polled, not ``ru_maxrss``: Linux carries that across ``exec``, so a child would report at least
#: the bench process's own peak, and it leaves out worker processes. Shared pages count once per
#: process: against the tool that uses workers, never for it.
TREE_RSS_SAMPLER = """
import json, sys, threading, time, psutil
_peak = [0, 0]
_stop = threading.Event()
def _sample():
    me = psutil.Process()
    while not _stop.is_set():
        own = me.memory_info().rss
        total = own
        for p in me.children(recursive=True):
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        _peak[0] = max(_peak[0], total)
        _peak[1] = max(_peak[1], own)
        _stop.wait(0.02)
threading.Thread(target=_sample, daemon=True).start()
"""


def child_sample(code: str, args: list[str], *, timeout: float, cwd: Path | str | None,
                 failure: list[str]) -> Any:
    """The decoded last stdout line of ``python -c code *args``, or the failure message (a str)."""
    if failure:
        return failure[0]
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        failure.append(f"timed out after {timeout:.0f} s")
        return failure[0]
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        failure.append(f"exited {proc.returncode}: {last[:200]}")
        return failure[0]
    return json.loads(proc.stdout.strip().splitlines()[-1])
