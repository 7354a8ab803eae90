"""NVTX labeler overhead with no tool attached, against ``nvtx.annotate`` measured in the same run.

    python bench/bench_nvtx.py [--quick]

Prints ns per operation (best of several repeats; the loop is unrolled 10x and the cost of
an empty unrolled loop is subtracted) and the ratio to ``with nvtx.annotate()``. Targets
(issue 4, on a machine where annotate costs ~290 ns): start/stop pair <= 60 ns, ``with
range()`` <= 150 ns, disabled start/stop pair <= 40 ns. Because this machine may be slower
or busier, each target is also shown scaled by annotate's measured cost / 290 ns.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

UNROLL = 10
ANNOTATE_REFERENCE_NS = 290.0


def best_ns(body: Callable[[int], None], loops: int, repeats: int) -> float:
    """Best time per unrolled operation, in ns."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        body(loops)
        best = min(best, (time.perf_counter_ns() - t0) / (loops * UNROLL))
    return best


def empty(loops: int) -> None:
    for _ in range(loops):
        pass


def pairs(start: Callable[..., object], stop: Callable[..., object]) -> Callable[[int], None]:
    def body(loops: int) -> None:
        for _ in range(loops):
            stop(start("step")); stop(start("step")); stop(start("step")); stop(start("step"))  # noqa: E702
            stop(start("step")); stop(start("step")); stop(start("step")); stop(start("step"))  # noqa: E702
            stop(start("step")); stop(start("step"))  # noqa: E702
    return body


def ranges(make: Callable[[str], object]) -> Callable[[int], None]:
    def body(loops: int) -> None:
        for _ in range(loops):
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
            with make("step"):  # type: ignore[attr-defined]
                pass
    return body


def marks(mark: Callable[[str], object]) -> Callable[[int], None]:
    def body(loops: int) -> None:
        for _ in range(loops):
            mark("m"); mark("m"); mark("m"); mark("m"); mark("m")  # noqa: E702
            mark("m"); mark("m"); mark("m"); mark("m"); mark("m")  # noqa: E702
    return body


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    args = parser.parse_args(argv)
    loops, repeats = (5_000, 3) if args.quick else (100_000, 7)
    os.environ.pop("NVTX_INJECTION64_PATH", None)  # no tool: the case every CPU machine sees

    from my_utils.tracing.nvtx_utils import NoOpLabeler, NvtxLabeler, create_labeler

    rows: list[tuple[str, float, str]] = []
    overhead = best_ns(empty, loops, repeats)

    annotate_ns: float | None = None
    try:
        import nvtx
    except ImportError:
        print("anchor nvtx not installed: no annotate reference, absolute figures only")
    else:
        def annotate_body(loops: int) -> None:
            annotate = nvtx.annotate
            for _ in range(loops):
                for _ in range(UNROLL):
                    with annotate("step", domain="bench"):
                        pass
        annotate_ns = best_ns(annotate_body, loops // 4, repeats) - overhead / UNROLL
        rows.append(("anchor: with nvtx.annotate('step', domain=...)", annotate_ns, ""))
        domain = nvtx.get_domain("bench")
        attrs = domain.get_event_attributes(message="step")

        def domain_body(loops: int) -> None:
            push, pop = domain.push_range, domain.pop_range
            for _ in range(loops):
                for _ in range(UNROLL):
                    push(attrs)
                    pop()
        rows.append(("anchor: Domain.push_range+pop_range, prepared attributes",
                     best_ns(domain_body, loops, repeats) - overhead / UNROLL, ""))

    scale = (annotate_ns / ANNOTATE_REFERENCE_NS) if annotate_ns else 1.0
    nvtx_lab = NvtxLabeler(enabled=True, default_domain="bench")
    if nvtx_lab.active:
        print("warning: an NVTX tool is attached; figures below include the tool's cost")
    noop = create_labeler(enabled=False)
    assert isinstance(noop, NoOpLabeler)

    def ours(label: str, body: Callable[[int], None], target: float | None) -> None:
        ns = best_ns(body, loops, repeats) - overhead / UNROLL
        goal = "" if target is None else f"<= {target:.0f} ns (scaled: {target * scale:.0f} ns)"
        rows.append((label, ns, goal))

    ours("NvtxLabeler no tool: start()+stop() pair", pairs(nvtx_lab.start, nvtx_lab.stop), 60)
    ours("NvtxLabeler no tool: with range()", ranges(nvtx_lab.range), 150)
    ours("NvtxLabeler no tool: mark()", marks(nvtx_lab.mark), None)
    ours("disabled (NoOpLabeler): start()+stop() pair", pairs(noop.start, noop.stop), 40)
    ours("disabled (NoOpLabeler): with range()", ranges(noop.range), None)

    width = max(len(r[0]) for r in rows)
    print(f"python {sys.version.split()[0]}, loop overhead {overhead:.1f} ns per unrolled op subtracted")
    print(f"{'operation':{width}}  {'ns/op':>8}  {'x annotate':>10}  target")
    for label, ns, goal in rows:
        ratio = f"{ns / annotate_ns:.3f}" if annotate_ns else "-"
        print(f"{label:{width}}  {ns:8.1f}  {ratio:>10}  {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
