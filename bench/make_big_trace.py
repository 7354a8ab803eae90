"""Generate a large Kineto trace: a real trace repeated with shifted times (bench input only).

    python bench/make_big_trace.py [--copies 10] [--source PATH] [--out bench/out/big_rank_1.json]

Each copy shifts ``ts`` past the end of the previous one, offsets correlation / External
ids / flow ids so launches still pair with their kernels, and renumbers ``ProfilerStep#N``
so every copy has its own steps. Written under bench/out/ (git-ignored) by default; never
commit the output.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared/fixtures/real/kineto/hta/df_index_resolver.json.gz"
_STEP = re.compile(r"ProfilerStep#(\d+)$")


def _shift(ev: dict, dt: float, did: int, dstep: int) -> dict:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "big_rank_1.json")
    a = ap.parse_args()
    with gzip.open(a.source, "rb") if a.source.suffix == ".gz" else open(a.source, "rb") as fh:
        doc = json.load(fh)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000
    ids = [v for e in events for v in (e.get("id"), *(e.get("args", {}) or {}).values()) if isinstance(v, int)]
    did = max(ids) + 1
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    dstep = max(steps) - min(steps) + 1 if steps else 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("{\n")
        for key, value in doc.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        out.write('  "traceEvents": [\n')
        first = True
        for k in range(a.copies):
            for ev in events:
                if k and ev.get("ph") == "M":
                    continue  # process/thread names once
                out.write(("" if first else ",\n") + "  " + json.dumps(_shift(ev, k * span, k * did, k * dstep)))
                first = False
                n += 1
        out.write("\n  ]\n}\n")
    tmp.replace(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e6:.0f} MB, {n} events, {a.copies} copies)")


if __name__ == "__main__":
    main()
