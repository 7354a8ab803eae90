"""MyTimer overhead against anchors measured in the same run.

    python bench/bench_timer.py [--quick]

Prints ns per start/stop pair (best of several repeats) and the ratio to a bare
``perf_counter_ns()`` pair. Anchors: Lightning's SimpleProfiler, Megatron's Timers,
``torch.profiler.record_function`` and ``logging.info`` per row; a missing anchor is reported
and skipped. Targets (issue 3): enabled CPU pair <= 250 ns and <= 3.1x the clock pair; with the
per-step CSV flush <= 500 ns amortised; disabled <= 40 ns.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

PAIRS_PER_LOOP = 20  # one "step": 20 regions (1 outer + 19 nested)


def best_ns_per_pair(body: Callable[[int], None], loops: int, repeats: int, pairs_per_loop: int) -> float:
    """Run ``body(loops)`` ``repeats`` times; return the best time per pair in ns."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        body(loops)
        best = min(best, (time.perf_counter_ns() - t0) / (loops * pairs_per_loop))
    return best


def clock_pair(loops: int) -> None:
    ns = time.perf_counter_ns
    names = [f"r{i}" for i in range(PAIRS_PER_LOOP - 1)]
    for _ in range(loops):
        a = ns()
        for _name in names:
            ns()
            ns()
        b = ns()
        del a, b


def mytimer_body(timer: object, step_each_loop: bool) -> Callable[[int], None]:
    names = [f"r{i}" for i in range(PAIRS_PER_LOOP - 1)]
    start = timer.start  # type: ignore[attr-defined]
    stop = timer.stop  # type: ignore[attr-defined]
    step = timer.step  # type: ignore[attr-defined]

    def body(loops: int) -> None:
        for i in range(loops):
            start("outer")
            for name in names:
                start(name)
                stop(name)
            stop("outer")
            if step_each_loop or i % 50 == 49:
                step()
        step()

    return body


def start_stop_body(start: Callable[[str], object], stop: Callable[[str], object]) -> Callable[[int], None]:
    names = [f"r{i}" for i in range(PAIRS_PER_LOOP - 1)]

    def body(loops: int) -> None:
        for _ in range(loops):
            start("outer")
            for name in names:
                start(name)
                stop(name)
            stop("outer")

    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops (smoke run)")
    args = parser.parse_args()
    loops, repeats = (200, 3) if args.quick else (2000, 7)
    warnings.simplefilter("ignore")
    results: list[tuple[str, float | None, str]] = []

    def measure(label: str, body: Callable[[int], None], pairs: int = PAIRS_PER_LOOP, n: int = loops) -> float:
        value = best_ns_per_pair(body, n, repeats, pairs)
        results.append((label, value, ""))
        return value

    tmp = Path(tempfile.mkdtemp(prefix="bench_timer_"))
    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer, global_timer

    clock = measure("perf_counter_ns() pair (anchor)", clock_pair)

    logging.getLogger("my_utils").addHandler(logging.NullHandler())
    logging.getLogger("my_utils").propagate = False
    no_io = MyTimer(tag="bench")  # no GlobalLogger set up: step() writes nothing
    measure("MyTimer pair, nested, CPU, no I/O", mytimer_body(no_io, step_each_loop=False))
    GlobalLogger().setup(tmp / "logs", rank=0, world_size=1)
    with_io = MyTimer(tag="bench")
    measure(f"MyTimer pair + CSV flush per step ({PAIRS_PER_LOOP} regions/step), amortised",
            mytimer_body(with_io, step_each_loop=True))
    disabled = MyTimer(enabled=False)
    measure("MyTimer(enabled=False) pair", mytimer_body(disabled, step_each_loop=False))
    if os.environ.get("ENABLE_TIMER") != "1":
        measure("global_timer pair without ENABLE_TIMER=1", mytimer_body(global_timer, step_each_loop=False))

    # -- anchors ---------------------------------------------------------------------------
    try:
        from lightning.pytorch.profilers import SimpleProfiler
    except ImportError:
        try:
            from pytorch_lightning.profilers import SimpleProfiler  # type: ignore[no-redef]
        except ImportError:
            SimpleProfiler = None  # type: ignore[assignment,misc]
    if SimpleProfiler is None:
        results.append(("Lightning SimpleProfiler", None, "anchor pytorch-lightning not installed"))
    else:
        prof = SimpleProfiler()
        measure("Lightning SimpleProfiler start/stop", start_stop_body(prof.start, prof.stop), n=max(1, loops // 4))

    try:
        from megatron.core import timers as megatron_timers
    except Exception as exc:
        results.append(("Megatron Timers", None, f"anchor megatron-core not installed ({type(exc).__name__})"))
    else:
        timers = megatron_timers.Timers(log_level=2, log_option="minmax")
        try:
            timers("probe", log_level=0).start()
            timers("probe").stop()
            note = ""
        except Exception as exc:  # Megatron synchronises CUDA in start/stop
            note = f"real Timers fail here: {type(exc).__name__}: {str(exc)[:60]}"
        if note:
            import torch

            results.append(("Megatron Timers (real)", None, note))
            with _patched(torch.cuda, "synchronize", lambda *a, **k: None):
                measure("Megatron Timers, cuda.synchronize patched out",
                        start_stop_body(lambda n: timers(n, log_level=0).start(),
                                        lambda n: timers(n, log_level=0).stop()))
        else:
            measure("Megatron Timers start/stop", start_stop_body(lambda n: timers(n, log_level=0).start(),
                                                                  lambda n: timers(n, log_level=0).stop()))
        quiet = megatron_timers.Timers(log_level=0, log_option="minmax")
        measure("Megatron Timers disabled (DummyTimer, log_level above)",
                start_stop_body(lambda n: quiet(n, log_level=2).start(), lambda n: quiet(n, log_level=2).stop()))

    try:
        import torch
        from torch.profiler import record_function
    except ImportError:
        results.append(("torch.profiler.record_function", None, "anchor torch not installed"))
    else:
        def rf_body(loops: int) -> None:
            names = [f"r{i}" for i in range(PAIRS_PER_LOOP - 1)]
            for _ in range(loops):
                with record_function("outer"):
                    for name in names:
                        with record_function(name):
                            pass

        measure("torch.profiler.record_function (no profiler active)", rf_body, n=max(1, loops // 4))
        del torch

    log = logging.getLogger("bench.rows")
    log.propagate = False
    handler = logging.FileHandler(tmp / "rows.log")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    ns = time.perf_counter_ns

    def logging_body(loops: int) -> None:
        names = [f"r{i}" for i in range(PAIRS_PER_LOOP)]
        for step in range(loops):
            for name in names:
                t0 = ns()
                log.info("%s,%d,%s,START", t0, step, name)
                log.info("%s,%d,%s,END,%d", ns(), step, name, ns() - t0)

    measure("logging.info per row (2 rows per pair, FileHandler)", logging_body, n=max(1, loops // 4))
    handler.close()

    width = max(len(label) for label, _, _ in results)
    print(f"{'measurement':<{width}}  {'ns/pair':>9}  {'x clock':>8}")
    print("-" * (width + 21))
    for label, value, note in results:
        if value is None:
            print(f"{label:<{width}}  {'-':>9}  {'-':>8}  {note}")
        else:
            print(f"{label:<{width}}  {value:9.1f}  {value / clock:8.2f}")
    print(f"\npython {sys.version.split()[0]}, {loops} steps x {PAIRS_PER_LOOP} pairs, best of {repeats}; "
          "disabled figures are per pair (two calls)")


@contextlib.contextmanager
def _patched(obj: object, name: str, value: object):  # type: ignore[no-untyped-def]
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


if __name__ == "__main__":
    main()
