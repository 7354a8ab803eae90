"""Generate a run of many ranks: a small real Kineto trace and a MyTimer profile CSV per rank (bench input only).

    python bench/make_scale_run.py --ranks 1000 [--steps 200] [--out bench/out/scale_1000]

Per rank ``r``: ``traces/rank_<r>.json.gz``, a copy of a real sampled trace
(``kineto/hta/trace_filter__sampled_rank-{0,1}``, 4,855 events, 1.8 MB of JSON; even ranks copy
rank 0, odd ranks rank 1) whose ``distributedInfo`` says rank ``r`` of the world, gzipped at
level 1; and ``csv/profile_rank_<r>.csv``, the profile CSV MyTimer writes
(``my_utils.distributed.testing.write_synthetic_run``: START/END rows of three sections per
step, a ``CLOCK_SYNC`` row first), ``--steps`` steps. ``ingest.json`` is a collector config
reading both folders. Cached: a ``meta.json`` records the recipe, and a folder made by another
recipe is made again. Never commit the output (``bench/out/`` is git-ignored).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _fixtures import Unavailable, fetch
from _report import write_json

HERE = Path(__file__).resolve().parent
SOURCES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")
SECTIONS = (("data", 2.0), ("forward", 10.0), ("backward", 20.0))
STEPS = 200


def recipe(ranks: int, steps: int) -> dict[str, Any]:
    """What identifies a generated run: the sizes and this generator's code."""
    return {"ranks": ranks, "steps": steps, "sources": list(SOURCES),
            "generator_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}


def scale_run(ranks: int, steps: int = STEPS, out: Path | None = None, fixtures: Path | None = None) -> Path:
    """The folder of a generated run of ``ranks`` ranks (made when missing or stale); raises ``Unavailable``."""
    folder = out or HERE / "out" / f"scale_{ranks}x{steps}"
    meta = folder / "meta.json"
    want = recipe(ranks, steps)
    try:
        if json.loads(meta.read_text()) == want:
            return folder
    except (OSError, ValueError):
        pass
    docs = []
    for rel in SOURCES:
        with gzip.open(fetch(rel, fixtures), "rb") as fh:
            docs.append(json.load(fh))
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    (folder / "traces").mkdir(parents=True)
    for r in range(ranks):
        doc = docs[r % 2]
        info = doc.get("distributedInfo")
        doc["distributedInfo"] = {**(info if isinstance(info, dict) else {}), "rank": r, "world_size": ranks}
        data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=1, mtime=0)
        (folder / "traces" / f"rank_{r}.json.gz").write_bytes(data)
    from my_utils.distributed.testing import write_synthetic_run

    write_synthetic_run(folder / "csv", ranks, steps, SECTIONS, slow=(ranks // 3, "forward", 1.5),
                        clock_offsets={r: (r * 1e-4, True) for r in range(ranks)})
    config = {"output_dir": "events", "run_id": f"scale-{ranks}",
              "providers": [{"provider": "torch_profiler", "input": "traces"},
                            {"provider": "mytimer", "input": "csv"}]}
    (folder / "ingest.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    write_json(meta, want)
    print(f"   generated {folder} ({ranks} ranks) in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return folder


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--fixtures", type=Path, default=None, metavar="DIR")
    args = parser.parse_args(argv)
    try:
        print(scale_run(args.ranks, args.steps, args.out, args.fixtures))
    except Unavailable as exc:
        print(f"make_scale_run: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
