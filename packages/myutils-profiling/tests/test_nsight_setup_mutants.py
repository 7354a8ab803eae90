"""The setup facts of Nsight Systems exports on two processes that differ (issue 36, ``.ci/mutants/nsys.toml``).

The real exports' processes agree (the ring's six are all one-shot, the 2-GPU pair all steady), so
these were unpinned: the run is one-shot only when *every* process with GPU work is, and the
setup idle's detail names the host wait *inside* setup, not all host wait. The rows are written as
``nsys.setup`` writes them.
"""

from __future__ import annotations

from typing import Any

from my_utils.profiling.analysis.nsight.setup import setup_facts


def _capture(rank: int, one_shot: int, repeated: int) -> dict[str, Any]:
    return {"rank": rank, "pid": 100 + rank, "capture_ns": 1e9, "setup_ns": 1e8, "gpu_start": 0, "gpu_end": 9e8,
            "setup_in_gpu_span_ns": 5e7, "kernels": 10, "kernel_names": 4, "repeated_names": repeated,
            "iterations": None, "one_shot": one_shot, "one_shot_reason": "nothing ran twice" if one_shot else ""}


def test_the_run_is_one_shot_only_when_every_process_is() -> None:
    mixed = {f.id: f for f in setup_facts({"nsys_capture": [_capture(0, 1, 0), _capture(1, 0, 3)]})}
    assert mixed["setup.one_shot"].number == 0 and mixed["setup.one_shot"].detail.startswith("1 of 2 process(es)")
    both = {f.id: f for f in setup_facts({"nsys_capture": [_capture(0, 1, 0), _capture(1, 1, 0)]})}
    assert both["setup.one_shot"].number == 1


def test_the_setup_idle_names_the_host_wait_inside_setup() -> None:
    """400 ms idle, 100 ms of it in setup, 20 ms of that host wait (300 ms host wait in all)."""
    idle = [{"rank": 0, "device": 0, "idle_ns": 4e8, "setup_idle_ns": 1e8, "host_wait_ns": 3e8,
             "setup_host_wait_ns": 2e7}]
    facts = {f.id: f for f in setup_facts({"nsys_capture": [_capture(0, 0, 3)], "nsys_setup_idle": idle})}
    f = facts["setup.idle"]
    assert (f.number, f.denominator_value) == (100.0, 400.0)
    assert "20.0 ms of it waiting for the host" in f.detail
