"""Kineto parse speed per core, whole commands: ``myutils plugins run torch_profiler`` against a bare ``json.loads``.

    python bench/bench_parse.py [--quick] [--samples N] [--json OUT] [--fixtures DIR]

Input: the 54 MB / 216k-event real trace (fixture registry), gunzipped into a temporary folder
(``--quick``: the 1.8 MB one). Every sample is a whole process, start-up included, pinned to
one CPU (``os.sched_setaffinity`` before exec) and timed by the kernel: user + system CPU
seconds of the finished child (``os.wait4``). Each environment has its own cache folder (never the
user's), its start recorded by one ``myutils plugins list`` first. The commands run in turn, round by round:

* anchor: ``python -c`` that reads the file's bytes and ``json.loads`` them, nothing else;
* ``myutils plugins run torch_profiler --input <trace.json>``: events aggregated and written,
  as installed: the compiled scanner when it was built, else typed decoding (msgspec,
  ``myutils-profiling[fast]``);
* the same with ``MYUTILS_TRACE_SCAN=0``: runs decoded into msgspec structs and aggregated in
  Python, what an install without a C compiler runs (the compiled scanner, ``trace_scan``,
  reads the text into the aggregator's columns itself);
* the same with ``MYUTILS_TYPED_TRACE=0``: the pure-Python path (orjson/stdlib dicts), what
  an install without the extra runs;
* the same command on the original ``.json.gz`` (decompression included), for information;
* ``myutils plugins run`` on a 7-event trace: the command's fixed cost (interpreter, CLI,
  plugin discovery, imports), which no parser speed removes; once as a user's start meets it
  (the clean start recorded, so the line runs without typer: ``cli.run_fast``), once with no
  start record (typer parses it: a first start after an install, or a broken plugin);
* in-process rate: ``read_trace`` alone in a child (imports done first), MB of uncompressed
  trace per CPU second: the parse's own share of the command.

Goals (issue 22, goal 1): the command's CPU <= 1/3 of the anchor's, judged on the per-round
ratio; and >= 250 MB/s per core of uncompressed trace, whole command (and, for reference,
the parse alone).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import make_big_trace
from _fixtures import Unavailable, fetch, where
from _report import (
    Report,
    at_least,
    at_most_times,
    common_args,
    interleave,
    interpreter_label,
    require,
    versions_label,
)
from _temp import bench_tempdir

ANCHOR = "import json, sys; json.loads(open(sys.argv[1], 'rb').read())"
IN_PROCESS = """
import json, os, sys, time
import numpy, my_utils.profiling.kineto.read.provider as k, my_utils.profiling.kineto.read.context
import my_utils.profiling.kineto.read.stream
t = time.process_time()
n = len(k.read_trace(sys.argv[1]).events)
print(json.dumps({"cpu_s": time.process_time() - t, "events": n}))
"""
TINY = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
                        for i in range(7)]}


def _cpu() -> int:
    """The CPU every sample is pinned to: the highest this process may run on."""
    return max(os.sched_getaffinity(0))


def _run(cmd: list[str], env: dict[str, str] | None, cpu: int) -> str:
    """Run ``cmd`` pinned to ``cpu``; return its stdout (a failure raises, naming the command)."""
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=600,
                          preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    if proc.returncode != 0:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{' '.join(cmd[:5])} ... exited {proc.returncode}: {last[:200]}")
    return proc.stdout.decode(errors="replace")


def _timed(cmd: Callable[[int], list[str]], env: dict[str, str] | None, cpu: int,
           setup: Callable[[], None] | None = None) -> Callable[[], float]:
    """A sampler: CPU seconds (user + system) of one whole run of ``cmd(i)``; ``setup`` runs first, untimed."""
    count = [0]

    def sample() -> float:
        count[0] += 1
        if setup is not None:
            setup()
        before = os.times()
        _run(cmd(count[0]), env, cpu)
        after = os.times()
        return (after.children_user - before.children_user) + (after.children_system - before.children_system)

    return sample


def _with_cache(env: dict[str, str], folder: Path, myutils: list[str], cpu: int, record: bool = True
                ) -> dict[str, str]:
    """``env`` with its own my_utils cache in ``folder``: entry points cached, the clean start recorded (or not)."""
    cached = {**env, "MYUTILS_CACHE_DIR": str(folder)}
    _run([*myutils, "plugins", "list"], cached, cpu)  # a clean start records itself (cli.start_cache)
    if not record:
        _forget_start(folder)
    return cached


def _forget_start(folder: Path) -> None:
    """Remove the clean-start record of a cache folder; the entry points stay cached."""
    for path in folder.glob("cli-start-*.json"):
        path.unlink()


def _scanner_built() -> bool:
    """Whether myutils-profiling's C scanner was compiled at install (``trace_scan.compiled``)."""
    from my_utils.profiling.kineto.read.scan import compiled

    return compiled()


def _myutils() -> list[str]:
    beside = Path(sys.executable).parent / "myutils"
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "my_utils.core"]


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    args = parser.parse_args(argv)
    require("my_utils.profiling", "bench_parse")
    rounds = args.samples or (2 if args.quick else 7)
    report = Report("bench_parse", "Kineto parse per core, whole commands, against a bare json.loads",
                    quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling", "msgspec", "orjson", "numpy", "typer"))
    report.label("fixtures", where(args.fixtures))
    cpu = _cpu()
    report.label("pinned", f"every sample on cpu {cpu} (sched_setaffinity), CPU = user + system of the child; "
                           "bytecode cached (PYTHONDONTWRITEBYTECODE dropped), as an installed package runs")
    myutils = _myutils()
    relpath = make_big_trace.QUICK_SOURCE if args.quick else make_big_trace.SOURCE
    try:
        source = fetch(relpath, args.fixtures)
    except Unavailable as exc:
        report.skip("real trace", str(exc))
        report.finish(args.json)
        return 0
    with bench_tempdir("bench_parse_") as tmp:
        trace = tmp / source.name.removesuffix(".gz")
        with gzip.open(source, "rb") as src, open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        gz = tmp / source.name
        shutil.copyfile(source, gz)
        tiny = tmp / "tiny_rank_0.json"
        tiny.write_text(json.dumps(TINY))
        mb = trace.stat().st_size / 1e6
        report.label("input", f"{trace.name}: {mb:.1f} MB uncompressed (from {source})")
        # as an installed package runs: its modules' bytecode cached (with PYTHONDONTWRITEBYTECODE, set
        # in some dev shells, every start of an editable install compiles them again: ~0.05-0.1 s of CPU)
        base = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONDONTWRITEBYTECODE", "MYUTILS_NO_CACHE", "MYUTILS_CACHE_DIR")}
        try:
            env = _with_cache(base, tmp / "cache", myutils, cpu)
            plain_env = _with_cache({**base, "MYUTILS_TYPED_TRACE": "0"}, tmp / "cache_plain", myutils, cpu)
            msgspec_env = _with_cache({**base, "MYUTILS_TRACE_SCAN": "0"}, tmp / "cache_msgspec", myutils, cpu)
            typer_env = _with_cache(base, tmp / "cache_typer", myutils, cpu, record=False)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            report.skip("all commands", f"myutils plugins list failed, no figures: {exc}")
            report.finish(args.json)
            return 0

        def plugins_run(path: Path, tag: str) -> Callable[[int], list[str]]:
            return lambda i: [*myutils, "plugins", "run", "torch_profiler", "--input", str(path),
                              "--output-dir", str(tmp / f"out_{tag}_{i}"), "-q"]

        tools = {
            "anchor": _timed(lambda i: [sys.executable, "-c", ANCHOR, str(trace)], env, cpu),
            "typed": _timed(plugins_run(trace, "typed"), env, cpu),
            "plain": _timed(plugins_run(trace, "plain"), plain_env, cpu),
            "msgspec": _timed(plugins_run(trace, "msgspec"), msgspec_env, cpu),
            "gz": _timed(plugins_run(gz, "gz"), env, cpu),
            "fixed": _timed(plugins_run(tiny, "tiny"), env, cpu),
            # each sample a first start: the record it writes is removed before the next one
            "fixed_typer": _timed(plugins_run(tiny, "tinytyper"), typer_env, cpu,
                                  setup=lambda: _forget_start(tmp / "cache_typer")),
        }

        def parse_alone() -> float:
            out = _run([sys.executable, "-c", IN_PROCESS, str(trace)], env, cpu)
            return float(json.loads(out.strip().splitlines()[-1])["cpu_s"])

        try:
            samples = interleave({**tools, "in_process": parse_alone}, rounds, warmup=1)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            report.skip("all commands", f"a command failed, no figures: {exc}")
            report.finish(args.json)
            return 0
        written = {p.parent.name.split("_")[1]: p.read_bytes() for p in tmp.glob("out_*_1/metrics_events.jsonl")}
        if not written.get("typed") or len({written.get(k) for k in ("typed", "plain", "msgspec")}) != 1:
            # the same events from every path, else say so
            report.note("WARNING: the scanned, typed and pure-Python runs wrote different metrics_events.jsonl")
    anchor = "python -c json.loads (anchor)"
    scanner = "the compiled scanner" if _scanner_built() else "the compiled scanner NOT built"
    cmd = "myutils plugins run torch_profiler"
    ratio_goal = [at_most_times(1 / 3, "issue 22")]
    rate_goal = [at_least(250, "issue 22")]
    report.add(anchor, samples["anchor"], "s", note="anchor: CPU s, whole process")
    report.add(f"{cmd} (typed)", samples["typed"], "s", anchor=anchor, goals=ratio_goal,
               note=f"as installed: {scanner} (else msgspec structs)")
    report.add(f"{cmd} (msgspec, no C scanner)", samples["msgspec"], "s", anchor=anchor,
               note="MYUTILS_TRACE_SCAN=0: an install without a C compiler")
    report.add(f"{cmd} (pure Python)", samples["plain"], "s", anchor=anchor,
               note="MYUTILS_TYPED_TRACE=0: without the [fast] extra")
    report.add(f"{cmd} (.json.gz)", samples["gz"], "s", anchor=anchor, note="same trace gzip-compressed")
    report.add(f"{cmd} (7 events)", samples["fixed"], "s", anchor=anchor,
               note="the command's fixed cost: start-up, CLI, plugins, imports (start recorded: no typer)")
    report.add(f"{cmd} (7 events, no start record)", samples["fixed_typer"], "s", anchor=anchor,
               note="a first start: under typer with every plugin's commands built, the clean start recorded "
                    "(removed before each sample); entry points cached")
    report.add("whole command (typed), uncompressed MB per CPU s", [mb / s for s in samples["typed"]], "MB/s",
               goals=rate_goal)
    report.add("whole command (pure Python), MB per CPU s", [mb / s for s in samples["plain"]], "MB/s")
    report.add("read_trace alone (typed), MB per CPU s", [mb / s for s in samples["in_process"]], "MB/s",
               goals=[at_least(250, "issue 22, the parse alone: start-up excluded")])
    report.note("CPU seconds of whole processes pinned to one CPU; ratios are taken per round, then the median")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
