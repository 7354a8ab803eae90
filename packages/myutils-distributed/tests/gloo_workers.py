"""Functions run on real gloo ranks by ``run_gloo`` (separate processes on 127.0.0.1).

Each takes ``(rank, world, **kwargs)`` inside an initialised gloo process group and returns
something JSON-able; the tests assert on what comes back. Not collected by pytest (no
``test_`` prefix); loaded by file path in the ranks' interpreter.
"""

from __future__ import annotations

import os
import time
from typing import Any

INJECTED_SKEW_NS = 2_500_000  # rank 1's clock runs 2.5 ms ahead
DRIFT = 2e-3  # ... and gains 2 ms per second (2000 ppm: large, so 1.5 s show it clearly)


def _skewed(skew_ns: int, drift: float = 0.0) -> Any:
    start = time.time_ns()

    def clock() -> int:
        now = time.time_ns()
        return now + skew_ns + int(drift * (now - start))

    return clock


def _estimate(e: Any) -> dict[str, Any]:
    return {"offset_s": e.offset_s, "uncertainty_s": e.uncertainty_s, "best_rtt_s": e.best_rtt_s,
            "measured_at_s": e.measured_at_s, "kept": e.kept, "samples": e.samples}


def clock_pair(rank: int, world: int, gap_s: float) -> dict[str, Any]:
    """The seed's example (gloo), a known skew, a drifting clock two syncs apart, a silent peer."""
    import torch.distributed as dist

    from my_utils.clockSyncUtils import ClockSynchronizer
    from my_utils.distributed.testing import listening_addresses

    out: dict[str, Any] = {"listeners": listening_addresses(os.getpid())}
    # -- the seed's example, unchanged but for the backend (gloo here, nccl in the seed)
    rank = dist.get_rank()
    if rank == 0:
        offset = ClockSynchronizer.sync(is_server=True, peer_rank=1)
    else:
        offset = ClockSynchronizer.sync(is_server=False, peer_rank=0)
    out["seed_offset"] = offset
    # -- the same with the bound: one host shares one clock, so the truth is 0
    out["same_clock"] = _estimate(ClockSynchronizer.measure(rank == 0, 1 - rank))
    # -- a known skew on rank 1 (server rank 0 is the reference: offset = -skew)
    skew = _skewed(INJECTED_SKEW_NS) if rank == 1 else None
    out["skew"] = _estimate(ClockSynchronizer.measure(rank == 0, 1 - rank, clock=skew))
    # -- drift: two syncs gap_s apart against a clock that gains DRIFT s/s
    drifting = _skewed(INJECTED_SKEW_NS, DRIFT) if rank == 1 else None
    first = ClockSynchronizer.measure(rank == 0, 1 - rank, clock=drifting)
    time.sleep(gap_s)
    second = ClockSynchronizer.measure(rank == 0, 1 - rank, clock=drifting)
    out["drift"] = [_estimate(first), _estimate(second)]
    out["padding"] = padding_cases(rank, world)
    # -- last (a timed-out gloo pair is closed for good): rank 0 waits for a peer that never answers
    if rank == 0:
        started = time.monotonic()
        try:
            ClockSynchronizer.measure(True, 1, timeout=1.0)
            out["silent_peer"] = "no error"
        except TimeoutError as exc:
            out["silent_peer"] = str(exc)
        out["silent_peer_s"] = time.monotonic() - started
    else:
        time.sleep(2.0)  # well past rank 0's 1 s timeout, then leave
    return out


def padding_cases(rank: int, world: int) -> list[dict[str, Any]]:
    """``all_gather_variable`` on shapes that differ per rank, empty tensors and several dtypes."""
    import torch

    from my_utils.distributed.padding import all_gather_variable

    cases: list[dict[str, Any]] = []

    def record(name: str, tensor: torch.Tensor) -> None:
        got = all_gather_variable(tensor)
        cases.append({"name": name, "shapes": [list(t.shape) for t in got], "dtypes": [str(t.dtype) for t in got],
                      "values": [t.double().flatten().tolist() if t.dtype != torch.bool else
                                 t.flatten().int().tolist() for t in got]})

    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool,
                  torch.float16, torch.bfloat16):
        base = torch.arange(rank + 1, dtype=torch.float64) + 10 * rank
        record(f"first dim {dtype}", (base.to(dtype) if dtype != torch.bool else base.remainder(2).bool()))
    record("2-d, rows differ", torch.full((rank, 3), float(rank)))
    record("empty on rank 0", torch.arange(rank * 2, dtype=torch.int64))
    record("all empty", torch.empty(0, 4))
    try:
        all_gather_variable(torch.zeros(2, dtype=torch.float32 if rank == 0 else torch.int64))
        cases.append({"name": "dtype mismatch", "error": None})
    except Exception as exc:
        cases.append({"name": "dtype mismatch", "error": f"{type(exc).__name__}: {exc}"})
    return cases


def bad_tensor_on_one_rank(rank: int, world: int) -> list[dict[str, Any]]:
    """``all_gather_variable`` where one rank's tensor is wrong: every rank's error and how long it took."""
    import torch

    from my_utils.distributed.padding import all_gather_variable

    cases = {
        "9 dimensions on rank 1": torch.zeros([1] * 9) if rank == 1 else torch.zeros(2),
        "sparse on rank 2": torch.zeros(3, 3).to_sparse() if rank == 2 else torch.zeros(3, 3),
        "dtypes differ": torch.zeros(2, dtype=torch.int64 if rank == 2 else torch.float32),
        "9 dimensions on ranks 0 and 2": torch.zeros([1] * 9) if rank != 1 else torch.zeros(1),
    }
    out = []
    for name, tensor in cases.items():
        started = time.monotonic()
        try:
            all_gather_variable(tensor)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        out.append({"name": name, "error": error, "s": time.monotonic() - started})
    # the group is still in step: a good gather after the refused ones
    got = all_gather_variable(torch.full((rank + 1,), float(rank)))
    out.append({"name": "after", "values": [t.tolist() for t in got]})
    return out


FOUR_RANK_SKEWS_NS = (0, 1_500_000, -700_000, 3_000_000)
SECTIONS_MS = (("data", 5), ("forward", 20), ("backward", 20))


def four_ranks(rank: int, world: int, runs: dict[str, Any], steps: int) -> dict[str, Any]:
    """Clock alignment with skews, padding, then real runs with MyTimer (one rank slow in 'forward' or none)."""
    import torch.distributed as dist

    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer
    from my_utils.distributed import align_clocks

    out: dict[str, Any] = {}
    estimate = align_clocks(0, clock=_skewed(FOUR_RANK_SKEWS_NS[rank]), apply=False, record=False)
    out["skewed"] = _estimate(estimate)
    out["padding"] = padding_cases(rank, world)
    for log_dir, slow_rank in runs.values():
        GlobalLogger._reset_for_tests()  # one process, two runs: each run gets its own folder
        GlobalLogger().setup(log_dir, rank=rank, world_size=world)
        align_clocks(0)  # the real clocks: apply the offset and write the CLOCK_SYNC row
        timer = MyTimer(tag="train")
        timer.set_logger(GlobalLogger())
        dist.barrier()
        for step in range(steps):
            timer.set_step(step)
            timer.start("step")
            for section, ms in SECTIONS_MS:
                timer.start(section)
                time.sleep(ms * (3 if rank == slow_rank and section == "forward" else 1) / 1e3)
                timer.stop(section)
            timer.stop("step")
            timer.step()
            dist.barrier()
        GlobalLogger().close()
    GlobalLogger._reset_for_tests()
    return out
