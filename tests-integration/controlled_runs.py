"""Controlled runs: a 2-rank DDP training on the CPU with one planted problem, and its ground truth.

    python tests-integration/controlled_runs.py CASE OUT_DIR [--seed N] [--rank R] [--extra-ms MS] ...
    python tests-integration/controlled_runs.py held-out OUT_DIR --count 5 --seed 7

Each run is a real training: ``world`` gloo ranks in separate processes (``run_gloo``: the store
bound to 127.0.0.1, ranks forked), a small MLP wrapped in ``DistributedDataParallel``, SGD,
``steps`` steps. It is instrumented exactly as the package READMEs say: ``GlobalLogger`` +
``align_clocks`` (distributed README), ``MyTimer`` regions ``iter`` > ``data``/``forward``/
``backward``/``optimizer`` (core README), a ``MetricsCollector`` fed live by
``MyTimerMetricsProvider`` and the ``memory_monitor`` provider of a ``GPU_Performance_Tracker``
(profiling and memory READMEs), and a capture window through ``ProfileManager`` with the
``torch_profiler`` backend (tracing README).

One problem is planted per run (``CASES``): ``clean`` (none), ``slow_rank`` (one rank sleeps
``extra_ms`` in ``region`` on every step), ``stall`` (``data`` sleeps ``extra_ms`` every
``period`` steps, on every rank or on one), ``spike`` (one step ``extra_ms`` longer in ``region``
on one rank) and ``leak`` (one rank keeps ``leak_mib`` MiB of host memory per step). The problem
is a sleep, not extra compute, so its size is the same whatever else the host runs. A delay
planted in ``backward`` cannot be attributed from region times (DDP's all-reduce ends it on every
rank at once, so the waiting rank's ``backward`` is as long): ``held_out`` never plants one there.

A run folder holds ``logs/`` (profile CSVs, rank logs), ``captures/`` (Kineto traces),
``memory/`` (samples), ``metrics/rank<r>/`` (each rank's events) and ``metrics_events.jsonl``
(the ranks' events, concatenated after the run: two processes appending to one file could
interleave a long batch), and ``truth.json``: what was planted, where and how large.
:func:`analyze` and :func:`stragglers` run the two commands on it and return their JSON.
``held_out(count, seed)`` draws plans the tests were not tuned on (other seeds, sizes, ranks,
periods, steps). Used by ``test_controlled_runs.py``; importable from any test (the folder's
conftest puts it on ``sys.path``; elsewhere load it by path).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASES = ("clean", "slow_rank", "stall", "spike", "leak")
#: The planted size of each case when the plan gives none (ms).
DEFAULT_EXTRA_MS = {"slow_rank": 30.0, "stall": 80.0, "spike": 200.0}
HERE = Path(__file__).resolve()
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Plan:
    """One controlled run: the training's shape and the problem planted in it.

    ``rank``: the rank carrying the problem (``stall``: ``None`` means every rank). ``step``: the
    spike's step; for the stall, the first stalled step (then every ``period`` steps).
    ``capture``: the steps (first, last) of the ``torch_profiler`` window.
    """

    case: str = "clean"
    seed: int = 0
    steps: int = 36
    world: int = 2
    width: int = 512
    depth: int = 3
    batch: int = 64
    rank: int | None = 1
    region: str = "forward"
    extra_ms: float | None = None
    period: int = 6
    step: int | None = None
    leak_mib: float = 4.0
    capture: tuple[int, int] = (6, 13)

    def __post_init__(self) -> None:
        if self.extra_ms is None:  # each case's own default size
            object.__setattr__(self, "extra_ms", DEFAULT_EXTRA_MS.get(self.case, 0.0))
        if self.step is None:  # the spike's step; the first stalled step
            object.__setattr__(self, "step", 2 if self.case == "stall" else 20)
        if self.case not in CASES:
            raise ValueError(f"Plan(case={self.case!r}): expected one of {', '.join(CASES)}")
        if self.rank is not None and not 0 <= self.rank < self.world:
            raise ValueError(f"Plan(rank={self.rank}): expected a rank below world={self.world} or None")
        if self.region not in ("data", "forward", "backward", "optimizer"):
            raise ValueError(f"Plan(region={self.region!r}): expected data, forward, backward or optimizer")

    @property
    def first_step(self) -> int:
        """The spike's step, or the first stalled step."""
        return int(self.step if self.step is not None else 0)

    @property
    def size_ms(self) -> float:
        """The planted delay (ms) of a slow rank, a stall or a spike."""
        return float(self.extra_ms or 0.0)

    def stalled_steps(self) -> list[int]:
        """The steps a ``stall`` plan stalls."""
        return list(range(self.first_step, self.steps, self.period))

    def delay_ms(self, rank: int, step: int, region: str) -> float:
        """The sleep planted in ``region`` at ``step`` on ``rank`` (0 where nothing is planted)."""
        case = self.case
        if case == "slow_rank" and rank == self.rank and region == self.region:
            return self.size_ms
        if case == "spike" and rank == self.rank and region == self.region and step == self.first_step:
            return self.size_ms
        if case == "stall" and region == "data" and (self.rank is None or rank == self.rank) \
                and step in self.stalled_steps():
            return self.size_ms
        return 0.0

    def truth(self) -> dict[str, Any]:
        """What was planted, for the tests: the case, its ranks, region, steps and size."""
        ranks = list(range(self.world)) if self.rank is None else [self.rank]
        out: dict[str, Any] = {"case": self.case, "plan": dataclasses.asdict(self)}
        if self.case == "slow_rank":
            out.update(ranks=ranks, region=self.region, steps=list(range(self.steps)), extra_ms=self.size_ms)
        elif self.case == "spike":
            out.update(ranks=ranks, region=self.region, steps=[self.first_step], extra_ms=self.size_ms)
        elif self.case == "stall":
            out.update(ranks=ranks, region="data", steps=self.stalled_steps(), period=self.period,
                       extra_ms=self.size_ms)
        elif self.case == "leak":
            out.update(ranks=ranks, region="data", steps=list(range(self.steps)),
                       leak_bytes_per_step=int(self.leak_mib * 2**20))
        else:
            out.update(ranks=[], steps=[])
        return out


def train_rank(rank: int, world: int, plan: dict[str, Any], out: str) -> dict[str, Any]:
    """One rank's training (run by ``run_gloo`` inside an initialised gloo group)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer
    from my_utils.distributed import align_clocks
    from my_utils.gpu_mem_tracker import GPU_Performance_Tracker
    from my_utils.memory import MonitorSamplesMetricsProvider
    from my_utils.profiling import MetricsCollector, MyTimerMetricsProvider
    from my_utils.tracing.capture import ProfileManager

    p = Plan(**{**plan, "capture": tuple(plan["capture"])})
    root = Path(out)
    log_dir = root / "logs"
    manager = GlobalLogger()
    manager.setup(str(log_dir), rank=rank, world_size=world, extra_log_label="controlled")
    align_clocks(reference_rank=0)

    timer = MyTimer(tag="train", log_dir=str(log_dir))
    timer.set_logger(manager)
    collector = MetricsCollector(root / "metrics" / f"rank{rank}", rank=rank)
    collector.register_provider(MyTimerMetricsProvider(timer, rank=rank))
    tracker = GPU_Performance_Tracker(prefix="host", interval=0.01, use_distributed=True,
                                      track_hardware_metrics=False,
                                      output_dir=root / "memory")
    tracker.start_monitoring()
    collector.register_provider(MonitorSamplesMetricsProvider.from_input(tracker.samples_path, rank=rank))

    first, last = p.capture
    pm = ProfileManager({
        "features": {"capture": {"enabled": True, "backend": "torch_profiler",
                                 "backend_options": {"output_dir": str(root / "captures")}}},
        "capture": {"windows": [{"name": "steps", "start_iter": first, "stop_iter": last}]},
    })
    controller = pm.create_controller(rank=rank)

    torch.manual_seed(p.seed)
    layers: list[torch.nn.Module] = []
    for i in range(p.depth):
        layers += [torch.nn.Linear(p.width, p.width if i < p.depth - 1 else 10)]
        if i < p.depth - 1:
            layers.append(torch.nn.GELU())
    model = DistributedDataParallel(torch.nn.Sequential(*layers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(p.seed * 1000 + rank)
    kept: list[Any] = []  # the leak: batches held on to

    def plant(step: int, region: str) -> None:
        ms = p.delay_ms(rank, step, region)
        if ms > 0:
            time.sleep(ms / 1e3)

    for step in range(p.steps):
        for spec in pm.build_specs_to_arm_at_iter(step, num_microbatches=1):
            controller.arm(spec)
        timer.set_step(step)
        with controller.region("train_step", {"iter": step}), timer.region("iter"):
            with timer.region("data"):
                x = torch.randn(p.batch, p.width, generator=data)
                y = torch.randint(0, 10, (p.batch,), generator=data)
                if p.case == "leak" and rank == p.rank:
                    kept.append(torch.ones(int(p.leak_mib * 2**20) // 4))  # written, so resident
                plant(step, "data")
            with timer.region("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                plant(step, "forward")
            with timer.region("backward"):
                optimizer.zero_grad(set_to_none=True)
                plant(step, "backward")
                loss.backward()
            with timer.region("optimizer"):
                optimizer.step()
                plant(step, "optimizer")
        timer.step()
        collector.collect(step=step)
    controller.close()
    tracker.stop_monitoring()
    collector.collect(step=p.steps - 1)
    collector.close()
    manager.close()
    return {"rank": rank, "kept_bytes": sum(t.numel() * 4 for t in kept), "timer_clock_error_ms": _timer_clock_error_ms(),
            "traces": [str(t) for t in getattr(controller.backend, "traces", [])]}


def _timer_clock_error_ms() -> float:
    """MyTimer's unix time less the wall clock, in ms (the tightest of a few paired reads)."""
    from my_utils.core.clock import unix_now_ns

    pairs = []
    for _ in range(20):
        before = time.time_ns()
        mine = unix_now_ns()
        after = time.time_ns()
        pairs.append((after - before, mine - (before + after) // 2))
    return min(pairs)[1] / 1e6


@contextlib.contextmanager
def busy_load(processes: int | None = None) -> Iterator[list[int]]:
    """``processes`` busy loops (default: one per core) running beside the block; their pids.

    Each is ``python -c "while True: pass"``, ended by its own pid when the block ends.
    """
    count = processes if processes is not None else (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def run(plan: Plan, out_dir: str | Path, timeout: float = 180.0) -> Path:
    """Run ``plan`` into ``out_dir`` (created; it must be empty); return the folder.

    Raises ``GlooRunError`` when the ranks fail.
    """
    from my_utils.distributed.testing import run_gloo

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):  # an earlier run's traces would be read as this one's
        raise ValueError(f"run({plan.case!r}, {out}): the folder is not empty; give a new or empty folder")
    results = run_gloo(f"{HERE}:train_rank", plan.world, kwargs={"plan": dataclasses.asdict(plan), "out": str(out)},
                       timeout=timeout)
    with open(out / "metrics_events.jsonl", "w", encoding="utf-8") as merged:
        for rank in range(plan.world):
            merged.write((out / "metrics" / f"rank{rank}" / "metrics_events.jsonl").read_text(encoding="utf-8"))
    truth = plan.truth() | {"ranks_ran": results}
    (out / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return out


def analyze(run_dir: str | Path) -> dict[str, Any]:
    """``myutils-profile analyze`` on the run (events and capture traces); the report as a dict."""
    run_dir = Path(run_dir)
    out = run_dir / "analysis"
    cmd = [str(BIN / "myutils-profile"), "analyze", "--events", str(run_dir / "metrics_events.jsonl"),
           "--trace", str(run_dir / "captures"), "--output-dir", str(out), "--formats", "json", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads((out / "analysis_report.json").read_text(encoding="utf-8"))
    return report


def stragglers(run_dir: str | Path) -> dict[str, Any]:
    """``myutils stragglers logs --json`` on the run; its JSON as a dict."""
    cmd = [str(BIN / "myutils"), "stragglers", str(Path(run_dir) / "logs"), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def truth(run_dir: str | Path) -> dict[str, Any]:
    """The ground truth the run wrote."""
    result: dict[str, Any] = json.loads((Path(run_dir) / "truth.json").read_text(encoding="utf-8"))
    return result


def held_out(count: int, seed: int) -> list[Plan]:
    """``count`` plans drawn from ``seed``: each case in turn, with other seeds, sizes, ranks, periods and steps."""
    rng = random.Random(seed)
    plans = []
    for i in range(count):
        case = CASES[(i + seed) % len(CASES)]
        steps = rng.randint(30, 44)
        width = rng.choice((384, 512, 640))
        # not "backward": a delay inside the section that ends in the collective cannot be told from the
        # other ranks' wait there (every rank leaves it together); time the section more finely to see it
        region = rng.choice(("data", "forward", "optimizer")) if case in ("slow_rank", "spike") else "forward"
        kwargs: dict[str, Any] = {
            "case": case, "seed": rng.randrange(1000), "steps": steps, "width": width, "depth": rng.randint(2, 4),
            "batch": rng.choice((32, 64, 96)), "rank": rng.randrange(2), "region": region,
            "capture": (rng.randint(4, 8), rng.randint(9, 12)),
        }
        if case == "slow_rank":
            kwargs["extra_ms"] = float(rng.randint(20, 45))
        elif case == "spike":
            kwargs.update(extra_ms=float(rng.randint(150, 300)), step=rng.randint(8, steps - 3))
        elif case == "stall":
            period = rng.randint(4, 8)
            # the first stall within the first period: stragglers reads step 0 too, so a stall first seen
            # at period + 1 would leave one occurrence out there
            kwargs.update(extra_ms=float(rng.randint(60, 120)), period=period, step=rng.randint(1, period),
                          rank=rng.choice((None, 0, 1)))
        elif case == "leak":
            kwargs["leak_mib"] = float(rng.choice((2, 3, 5, 6)))
        plans.append(Plan(**kwargs))
    return plans


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(prog="controlled_runs.py", description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=(*CASES, "held-out"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=5, help="held-out: how many plans")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--extra-ms", type=float, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--analyze", action="store_true", help="also run analyze and stragglers")
    parser.add_argument("--load", action="store_true", help="run beside a busy loop per core")
    args = parser.parse_args(argv)
    if args.case == "held-out":
        plans = held_out(args.count, args.seed)
    else:
        overrides = {k: v for k, v in (("rank", args.rank), ("extra_ms", args.extra_ms), ("steps", args.steps))
                     if v is not None}
        plans = [Plan(case=args.case, seed=args.seed, **overrides)]
    for i, plan in enumerate(plans):
        folder = args.out / f"{i:02d}_{plan.case}" if len(plans) > 1 else args.out
        started = time.monotonic()
        with busy_load() if args.load else contextlib.nullcontext():
            run(plan, folder)
        print(f"{folder}: {plan.case} in {time.monotonic() - started:.1f} s")
        if args.analyze:
            report = analyze(folder)
            for f in report["findings"]:
                print(f"  [{f['severity']}] {f['title']}")
            print(json.dumps(stragglers(folder)["stragglers"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
