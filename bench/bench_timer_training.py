"""What MyTimer costs in a real CPU training loop: steps/s without a timer, hot path, persisted paths.

    python bench/bench_timer_training.py [--quick] [--samples N] [--json OUT]

A small MLP (24 linear layers of width 32, batch 8, one torch thread: a short step, so that
the timer's share shows) trains with SGD; each step times 25 regions (the step, and the forward of each of the 24 layers). Variants, sampled
in interleaved rounds: no timer; the hot path (no sink); persisted with the step log and its
helper process (the default); the step log rendered by a writer thread of this process; and
today's path (CSV formatted and written on the training thread). Figures are steps/s of CPU
time of this process (a shared machine makes wall time measure the neighbours); the helper
process's CPU is measured from /proc and printed beside its figure. Each timed variant is
compared with "no timer" of the same round.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import Report, at_least_times, common_args, interleave, interpreter_label, versions_label
from bench_timer import _cpu_s, sink  # the same sink swap and /proc reader as the pair bench

LAYERS = 24
WIDTH = 32
BATCH = 8


def build(torch: Any) -> tuple[Any, Any, Any, Any]:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
    params = [p for layer in layers for p in layer.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)
    x = torch.randn(BATCH, WIDTH)
    y = torch.randn(BATCH, WIDTH)
    return layers, opt, x, y


def loop(torch: Any, timer: Any | None, steps: int) -> Callable[[], float]:
    layers, opt, x, y = build(torch)
    relu = torch.relu
    mse = torch.nn.functional.mse_loss
    names = [f"layer_{i}" for i in range(LAYERS)]

    def run() -> float:
        t0 = time.process_time()
        for _ in range(steps):
            if timer is None:
                h = x
                for layer in layers:
                    h = relu(layer(h))
            else:
                timer.start("step")
                h = x
                for layer, name in zip(layers, names, strict=True):
                    timer.start(name)
                    h = relu(layer(h))
                    timer.stop(name)
                timer.stop("step")
            loss = mse(h, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if timer is not None:
                timer.step()
        return steps / (time.process_time() - t0)

    return run






def main() -> None:
    args = common_args(__doc__.splitlines()[0]).parse_args()
    steps = 100 if args.quick else 600
    rounds = args.samples or (2 if args.quick else 11)
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    report = Report("bench_timer_training", "MyTimer in a CPU training loop (steps/s)", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("torch"))
    report.label("shape", f"MLP {LAYERS}x{WIDTH}, batch {BATCH}, 25 regions/step, {steps} steps/sample, "
                          f"{rounds} rounds, torch threads 1")
    logging.getLogger("my_utils").addHandler(logging.NullHandler())
    logging.getLogger("my_utils").propagate = False

    from my_utils.core.logger import GlobalLogger
    from my_utils.core.step_log_writer import StepLogWriter
    from my_utils.core.timer import MyTimer

    with tempfile.TemporaryDirectory(prefix="bench_timer_training_") as tmp_name:
        tmp = Path(tmp_name)
        mgr = GlobalLogger().setup(tmp / "logs", rank=0, world_size=1)
        writers = {mode: StepLogWriter(tmp / mode / "profile_rank_0.csv", mode=mode)
                   for mode in ("process", "thread", "direct")}
        for writer in writers.values():
            writer.open()

        def variant(writer: Any) -> Callable[[], float]:
            run = loop(torch, MyTimer(tag="train"), steps)

            def sample() -> float:
                with sink(mgr, writer):
                    value = run()
                if writer is not None and writer.mode != "process":
                    writer.flush()  # keep one variant's backlog out of the next one's round
                return value
            return sample

        tools = {
            "none": loop(torch, None, steps),
            "hot": variant(None),
            "process": variant(writers["process"]),
            "thread": variant(writers["thread"]),
            "direct": variant(writers["direct"]),
        }
        for tool in tools.values():  # warm-up round: imports, caches, the helper's start
            tool()
        helper = writers["process"]._helper
        cpu_before = _cpu_s(helper.pid) if helper is not None else None
        samples = interleave(tools, rounds=rounds)
        cpu_after = _cpu_s(helper.pid) if helper is not None else None
        for writer in writers.values():
            writer.close()
        GlobalLogger._reset_for_tests()

    base = "no timer"
    report.add(base, samples["none"], "steps/s")
    report.add("hot path (no sink)", samples["hot"], "steps/s", anchor=base)
    helper_note = "helper CPU not measured (no /proc)"
    if cpu_before is not None and cpu_after is not None:
        helper_note = f"helper CPU off the training process: {1e6 * (cpu_after - cpu_before) / (rounds * steps):.0f} us/step"
    report.add("persisted: step log + helper process (default)", samples["process"], "steps/s", anchor=base,
               goals=[at_least_times(0.95, "this bench: <= 5 % of a small CPU step")], note=helper_note)
    report.add("persisted: step log + writer thread", samples["thread"], "steps/s", anchor=base)
    report.add("persisted: today's path (format + write on the thread)", samples["direct"], "steps/s", anchor=base)
    report.note("ratios are steps/s relative to 'no timer' of the same round (1.0 = free)")
    report.finish(args.json)


if __name__ == "__main__":
    main()
