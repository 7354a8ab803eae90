"""Write a real run with MyTimer: ``python mytimer_run.py OUT_DIR [RANKS] [STEPS]`` (one process, rank by rank).

Each rank records a ``CLOCK_SYNC`` row (rank 1's offset not applied) and ``STEPS`` steps of
``step`` > ``data``/``forward``/``backward``, rank 1 sleeping in ``forward``. Not collected by
pytest; the stragglers fuzz mutates what this writes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from my_utils.core.logger import GlobalLogger
from my_utils.core.timer import MyTimer
from my_utils.distributed.clock_estimate import ClockEstimate
from my_utils.distributed.clock_record import record_clock_sync


def main(out: Path, ranks: int, steps: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        GlobalLogger._reset_for_tests()  # one process, one rank after the other
        GlobalLogger().setup(str(out), rank=rank, world_size=ranks)
        offset = 0.0 if rank == 0 else 0.001 * rank
        estimate = ClockEstimate(offset, 2e-5, 4e-5, 60, 1, time.time())
        record_clock_sync(estimate, 0, apply=rank != 1)
        timer = MyTimer(tag="train")
        timer.set_logger(GlobalLogger())
        for step in range(steps):
            timer.set_step(step)
            timer.start("step")
            for name in ("data", "forward", "backward"):
                timer.start(name)
                time.sleep(0.002 if rank == 1 and name == "forward" else 0.0002)
                timer.stop(name)
            timer.stop("step")
            timer.step()
        GlobalLogger().close()
    GlobalLogger._reset_for_tests()


if __name__ == "__main__":
    main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:4]))
