"""Generate a large Kineto trace: a real trace repeated with shifted times (bench input only).

    python bench/make_big_trace.py [--copies 10] [--source PATH] [--out bench/out/big_rank_1.json]
    python bench/make_big_trace.py --quick      # 2 copies of a small trace, into a temp folder

Each copy shifts ``ts`` past the end of the previous one, offsets correlation / External
ids / flow ids so launches still pair with their kernels, and renumbers ``ProfilerStep#N``
so every copy has its own steps. One compact JSON event per line: 10 copies of the 54 MB /
216k-event real trace give the issue's ~430 MB / 2.16M events. Written under bench/out/
(git-ignored) by default, through a temporary sibling that is removed if the run is cut
short; a ``.meta.json`` beside it records how it was made, so ``bench_kineto.py`` can tell
a stale copy. Never commit the output.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from _fixtures import Unavailable, fetch, where
from _report import Report, at_least, common_args, interpreter_label, versions_label, write_json
from _temp import bench_tempdir

HERE = Path(__file__).resolve().parent
SOURCE = "kineto/hta/df_index_resolver.json.gz"  # 54 MB, 216,092 events: the largest real trace
QUICK_SOURCE = "kineto/hta/trace_filter__sampled_rank-0.json.gz"  # 1.8 MB, 4,855 events
DEFAULT_OUT = HERE / "out" / "big_rank_1.json"
EVENTS_GOAL = 2_160_000  # issue 5: "a generated 433 MB / 2.16M-event trace"
_STEP = re.compile(r"ProfilerStep#(\d+)$")


def _shift(ev: dict[str, Any], dt: float, did: int, dstep: int) -> dict[str, Any]:
    ev = dict(ev)
    if isinstance(ev.get("ts"), (int, float)):
        ev["ts"] = ev["ts"] + dt
    if "id" in ev and isinstance(ev["id"], int):
        ev["id"] = ev["id"] + did
    args = ev.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id"):
            if isinstance(args.get(key), int):
                args[key] = args[key] + did
        ev["args"] = args
    m = _STEP.match(str(ev.get("name", "")))
    if m:
        ev["name"] = f"ProfilerStep#{int(m.group(1)) + dstep}"
    return ev


def recipe(source: Path, copies: int) -> dict[str, Any]:
    """What identifies an output: the source (name, size), the copies and this generator's code."""
    return {"source": source.name, "source_bytes": source.stat().st_size, "copies": copies,
            "generator_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}


def meta_path(out: Path) -> Path:
    """The sidecar that records the recipe of ``out``."""
    return out.with_name(out.name + ".meta.json")


def is_current(out: Path, source: Path, copies: int) -> bool:
    """Whether ``out`` exists and was made by this generator from ``source`` with ``copies``."""
    try:
        return out.is_file() and json.loads(meta_path(out).read_text()) == recipe(source, copies)
    except (OSError, ValueError):
        return False


def generate(source: Path, out: Path, copies: int) -> int:
    """Write ``copies`` shifted copies of ``source`` to ``out``; return the number of events.

    The text goes to a temporary sibling first and is renamed at the end, so ``out`` is never
    half-written; the sibling is removed however the run ends (Ctrl-C included).
    """
    with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
        doc = json.load(fh)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000
    ids = [v for e in events for v in (e.get("id"), *(e.get("args", {}) or {}).values()) if isinstance(v, int)]
    did = max(ids) + 1
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    dstep = max(steps) - min(steps) + 1 if steps else 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    meta_path(out).unlink(missing_ok=True)
    n = 0
    compact = (",", ":")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("{\n")
            for key, value in doc.items():
                fh.write(f"{json.dumps(key)}:{json.dumps(value, separators=compact)},\n")
            fh.write('"traceEvents":[\n')
            first = True
            for k in range(copies):
                for ev in events:
                    if k and ev.get("ph") == "M":
                        continue  # process/thread names once
                    fh.write(("" if first else ",\n") + json.dumps(_shift(ev, k * span, k * did, k * dstep),
                                                                 separators=compact))
                    first = False
                    n += 1
            fh.write("\n]}\n")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    write_json(meta_path(out), recipe(source, copies))
    return n


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--source", type=Path, default=None, help=f"trace to repeat (default: fixture {SOURCE})")
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR",
                        help="read the real files from DIR instead of the fixture registry")
    parser.add_argument("--copies", type=int, default=None, help="copies to write (default 10; 2 with --quick)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output file (default {DEFAULT_OUT.relative_to(HERE.parent)}; a temp folder with --quick)")
    args = parser.parse_args(argv)
    copies = args.copies or (2 if args.quick else 10)
    if copies < 1:
        parser.error(f"--copies must be >= 1, got {copies}")
    report = Report("make_big_trace", "the generated Kineto input of bench_kineto", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-profiling"))
    if args.source is not None:
        if not args.source.is_file():
            print(f"make_big_trace: --source {args.source}: no such file; name a Kineto trace (.json or .json.gz)",
                  file=sys.stderr)
            return 2
        source = args.source
    else:
        relpath = QUICK_SOURCE if args.quick else SOURCE
        report.label("fixtures", where(args.fixtures))
        try:
            source = fetch(relpath, args.fixtures)
        except Unavailable as exc:
            report.skip("generated trace", str(exc))
            report.finish(args.json)
            return 0
    report.label("source", f"{source} x {copies} copies")
    with bench_tempdir("make_big_trace_") as tmp:
        out = args.out or (tmp / "big_rank_1.json" if args.quick else DEFAULT_OUT)
        t0 = time.perf_counter()
        try:
            n = generate(source, out, copies)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"make_big_trace: {source}: not a Kineto trace that can be repeated ({type(exc).__name__}: "
                  f"{str(exc)[:160]})", file=sys.stderr)
            return 2
        seconds = time.perf_counter() - t0
        size_mb = out.stat().st_size / 1e6
        report.label("wrote", str(out) + (" (removed at exit: --quick)" if out.parent == tmp else ""))
        if args.quick:
            # a smoke run proves the output is whole JSON holding every copy; 430 MB is too big to re-read
            with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as fh:
                original = json.load(fh)["traceEvents"]
            metadata = sum(1 for ev in original if ev.get("ph") == "M")
            expected = len(original) + (copies - 1) * (len(original) - metadata)
            read_back = len(json.loads(out.read_bytes())["traceEvents"])
    goals = [at_least(EVENTS_GOAL, "issue 5")] if copies == 10 and args.source is None else []
    report.add("events written", [n], "", goals=goals)
    if args.quick:
        report.add("events read back by json.loads", [read_back], "",
                   goals=[at_least(expected, f"every copy: {len(original)} + {copies - 1} x "
                                             f"{len(original) - metadata} without metadata")])
    report.add("size", [size_mb], "MB", note="issue 5 quotes ~433 MB")
    report.add("time to generate", [seconds], "s")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
