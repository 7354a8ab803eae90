"""The unified-metrics demo: train a small model on the CPU (or GPU) and collect everything.

    python -m my_utils.profiling.examples.unified_metrics_demo --steps 30 --output-dir ./demo_output

What it shows, in one run:
- ``GlobalLogger`` + ``MyTimer`` timing nested regions, written to ``logs/profile_rank_<rank>.csv``;
- a ``torch.profiler`` window over a few steps, exported as a Kineto trace;
- ``MetricsCollector`` gathering both live (MyTimer and torch.profiler providers) into
  ``metrics_events.jsonl`` every few steps;
- the profile CSV converted to a Chrome/Perfetto trace (open it in ui.perfetto.dev);
- a summary of the slowest regions read back from the events file;
- ``collector.analyze()`` and ``export_report()``: the analysis report as JSON, Markdown and
  HTML (the latter two when the reports part is installed), plus one merged timeline of
  the MyTimer regions (``myutils-profile trace``, when that command is installed).

Every path it writes is printed at the end. It needs torch (any build).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from collections import defaultdict
from pathlib import Path


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m my_utils.profiling.examples.unified_metrics_demo",
        description="Train a tiny model, time it with MyTimer and torch.profiler, collect metric events.",
    )
    parser.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
    parser.add_argument("--output-dir", type=Path, default=Path("./demo_output"), help="where everything goes")
    parser.add_argument("--collect-every", type=int, default=10, help="collect metric events every N steps")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads on the CPU (default 1: this small model gains nothing from "
                             "more, and their spin-waits make step times swing a hundredfold on a busy machine)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.collect_every < 1:
        parser.error("--steps and --collect-every must be at least 1")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    return args


def _clear_previous_run(output_dir: Path, rank: int, world_size: int) -> int:
    """Remove what an earlier demo run of this rank left in ``output_dir``; the number of files removed.

    The profile CSV and ``metrics_events.jsonl`` are appended to, never replaced (a resumed job keeps
    its history), and every trace in ``torch_traces/`` is analysed: a second demo run into the same
    folder would analyse both runs folded together. The folder is the demo's own, so its files of
    this rank go; anything else there is left alone. The events file is shared by the ranks: only a
    single-rank demo removes it (a rank of several could remove what another has begun to write;
    the analysis then warns that the inputs hold more than one run).
    """
    from my_utils.core.events import events_path
    from my_utils.core.step_log import steplog_path

    logs = output_dir / "logs"
    csv = logs / f"profile_rank_{rank}.csv"
    owned = [csv, steplog_path(csv), logs / f"rank_{rank}.log"]
    if world_size == 1:
        owned.append(events_path(output_dir))
    owned += sorted((output_dir / "torch_traces").glob(f"rank{rank}.step*.pt.trace.json"))
    removed = 0
    for path in owned:
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def run(steps: int, output_dir: Path, collect_every: int = 10, threads: int = 1) -> dict[str, Path]:
    """Run the demo; return the files it wrote, by role."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule
    except ImportError:
        raise SystemExit("the demo needs torch: pip install torch") from None

    from my_utils.core.dist_env import resolve_rank_info
    from my_utils.core.errors import UsageError
    from my_utils.core.logger import GlobalLogger
    from my_utils.core.timer import MyTimer
    from my_utils.core.trace import csv_to_trace
    from my_utils.profiling import MetricsCollector, MyTimerMetricsProvider, TorchProfilerMetricsProvider

    output_dir.mkdir(parents=True, exist_ok=True)
    log_dir = output_dir / "logs"
    ranks = resolve_rank_info()  # torchrun's RANK / WORLD_SIZE, else rank 0 of 1
    rank = ranks.rank
    replaced = _clear_previous_run(output_dir, rank, ranks.world_size)
    manager = GlobalLogger()
    manager.setup(log_dir=str(log_dir), rank=rank, world_size=ranks.world_size, extra_log_label="demo")
    logger = manager.get_logger()

    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    if not use_cuda:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(),
        torch.nn.Linear(512, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    timer = MyTimer(use_cuda=use_cuda, tag="demo", log_dir=str(log_dir))
    timer.set_logger(manager)
    collector = MetricsCollector(output_dir, rank=rank)
    collector.register_provider(MyTimerMetricsProvider(timer, rank=rank))
    torch_provider = collector.register_provider(TorchProfilerMetricsProvider(None, rank=rank))

    trace_dir = output_dir / "torch_traces"
    trace_dir.mkdir(exist_ok=True)

    def export(prof: object) -> None:
        prof.export_chrome_trace(str(trace_dir / f"rank{rank}.step{prof.step_num}.pt.trace.json"))  # type: ignore[attr-defined]

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    window = schedule(wait=min(5, max(steps - 3, 0)), warmup=1, active=2, repeat=1)
    logger.info("demo: %d steps on %s, output in %s", steps, device, output_dir)
    if replaced:
        logger.info("demo: replaced %d file(s) of an earlier demo run in %s", replaced, output_dir)
    with warnings.catch_warnings():
        # torch.profiler warns that it clears events at the end of each cycle: expected here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=activities, schedule=window,
                     on_trace_ready=torch_provider.trace_handler(export)) as prof:
            for step in range(steps):
                timer.set_step(step)
                timer.start("iter")
                timer.start("data")
                x = torch.randn(64, 256, device=device)
                y = torch.randint(0, 10, (64,), device=device)
                timer.stop("data")
                timer.start("forward")
                loss = torch.nn.functional.cross_entropy(model(x), y)
                timer.stop("forward")
                timer.start("backward")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                timer.stop("backward")
                timer.start("optimizer")
                optimizer.step()
                timer.stop("optimizer")
                timer.stop("iter")
                timer.step()
                prof.step()
                if (step + 1) % collect_every == 0 or step == steps - 1:
                    collector.collect(step=step)
    collector.collect(step=steps - 1)  # whatever the profiler finished after the last collect
    collector.close()

    csv_path = log_dir / f"profile_rank_{rank}.csv"
    trace_path = output_dir / "mytimer_trace.json"
    csv_to_trace(str(csv_path), str(trace_path))
    written = {
        "events": collector.events_path,
        "profile_csv": csv_path,
        "mytimer_trace": trace_path,
        "torch_traces": trace_dir,
        "log": log_dir / f"rank_{rank}.log",
    }
    # the seed's quick start: analyze, then one report per format
    report = collector.analyze(workload="pretrain", traces=sorted(trace_dir.glob("*.json")))
    for fmt in ("json", "markdown", "html"):
        try:
            written[f"report_{fmt}"] = collector.export_report(fmt=fmt, report=report)
        except UsageError as exc:  # Markdown/HTML need the reports part
            logger.info("demo: %s report skipped: %s", fmt, exc)
    merged = _merged_trace(collector.events_path, sorted(trace_dir.glob("*.json")), output_dir / "merged_trace.json")
    if merged is not None:
        written["merged_trace"] = merged
    return written


def _merged_trace(events: Path, torch_traces: list[Path], output: Path) -> Path | None:
    """Run ``myutils-profile trace`` (the seed's flags): MyTimer regions and the torch.profiler window
    of this run on one clock. In a child process: the demo is a user of the CLI, not a part of it."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", "from my_utils.profiling.cli import main; main()", "trace", "--events", str(events),
         "--output", str(output), "--auto-align-ranks", "--reference-rank", "0",
         *[arg for t in torch_traces for arg in ("--torch-trace", str(t))]],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"merged trace not written: {proc.stderr.strip()}", file=sys.stderr)
        return None
    return output


def summarize(events_file: Path) -> list[str]:
    """Lines describing the events file: counts per source, then the slowest timed regions."""
    from my_utils.core.events import iter_events

    per_source: dict[str, int] = defaultdict(int)
    durations: dict[str, list[float]] = defaultdict(list)
    for event in iter_events(events_file):
        per_source[event.source] += 1
        if event.source == "mytimer" and event.kind == "duration":
            durations[event.name].append(event.value)
    lines = [f"{count:6d} events from {source}" for source, count in sorted(per_source.items())]
    slowest = sorted(durations.items(), key=lambda item: -statistics.fmean(item[1]))[:6]
    lines += [f"  {name:32s} mean {statistics.fmean(values):8.3f} ms over {len(values)} steps"
              for name, values in slowest]
    return lines


def describe_report(path: Path) -> list[str]:
    """Lines with the scores and the first findings of an ``analysis_report.json``."""
    from my_utils.profiling.model.report import AnalysisReport

    report = AnalysisReport.load(path)
    scores = ", ".join(f"{k} {v:.0f}" for k, v in report.scores.items())
    lines = [f"analysis ({report.workload}): {scores}; {len(report.findings)} finding(s)"]
    lines += [f"  [{f.severity}] {f.title}" for f in report.findings[:5]]
    if report.overhead.get("detail"):
        lines.append(f"  timer overhead: {report.overhead['detail']}")
    return lines


def next_steps(written: dict[str, Path]) -> list[str]:
    """What to open or run next: the report, the merged timeline, and the one command for a whole run folder."""
    lines = ["next:"]
    page = written.get("report_html") or written.get("report_markdown") or written.get("report_json")
    if page is not None:
        lines.append(f"  open {page} (the verdict, the fixes to make first, every table and chart)")
    if "merged_trace" in written:
        lines.append(f"  open {written['merged_trace']} in https://ui.perfetto.dev (every rank on one clock)")
    folder = Path(written["events"]).parent
    lines.append(f"  myutils-profile analyze {folder}   # the whole folder, each file told by its content "
                 "(source .venv/bin/activate puts myutils-profile on PATH)")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parse(argv)
    written = run(args.steps, args.output_dir, args.collect_every, args.threads)
    print(f"my_utils unified metrics demo: {args.steps} steps")
    for line in summarize(written["events"]):
        print(line)
    if "report_json" in written:
        for line in describe_report(written["report_json"]):
            print(line)
    print("written:")
    for role, path in written.items():
        print(f"  {role:16s} {path}")
    for line in next_steps(written):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
