"""Write a merged trace, split into parts that each stay under ``max_mb`` so that viewers open them.

Viewers fail near 1 GB of JSON (the browser's string and heap limits), whatever the gzip
size, so the budget counts uncompressed bytes. Each part is a complete trace: every
metadata event (process and lane names), ``otherData`` with ``part`` (index, count,
time range), and a contiguous time range of the events; a flow's end travels with its
start, so no part has half a flow. Every file is written atomically.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.errors import UsageError
from my_utils.profiling.trace.merge import MergedTrace

_MB = 1 << 20


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)


def part_paths(output: Path, count: int) -> list[Path]:
    """``T.json`` for one part; ``T.part1.json`` … ``T.partN.json`` (same suffixes) for several."""
    if count == 1:
        return [output]
    name = output.name
    suffix = ".json.gz" if name.endswith(".json.gz") else ".json" if name.endswith(".json") else ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    return [output.with_name(f"{stem}.part{i}{suffix}") for i in range(1, count + 1)]


def _chunks(trace: MergedTrace, budget: int | None) -> list[list[str]]:
    """Serialised events per part (flows grouped with their start)."""
    flows: dict[Any, list[dict[str, Any]]] = {}
    plain: list[dict[str, Any]] = []
    for ev in trace.events:
        if ev.get("ph") in ("s", "t", "f") and "id" in ev:
            flows.setdefault((ev.get("cat"), ev["id"]), []).append(ev)
        else:
            plain.append(ev)
    # a flow is placed where its first event falls in time: one item, never split
    items: list[tuple[float, list[dict[str, Any]]]] = [(ev["ts"], [ev]) for ev in plain]
    items += [(min(e["ts"] for e in group), group) for group in flows.values()]
    items.sort(key=lambda it: it[0])
    parts: list[list[str]] = [[]]
    size = 0
    for _ts, group in items:
        texts = [_dump(e) for e in group]
        n = sum(len(t) + 1 for t in texts)
        if budget is not None and size + n > budget and parts[-1]:
            parts.append([])
            size = 0
        parts[-1].extend(texts)
        size += n
    return parts


def write_trace(trace: MergedTrace, output: str | Path, max_mb: float | None = None) -> list[Path]:
    """Write ``trace`` to ``output`` (``.json`` or ``.json.gz``), in parts when it exceeds ``max_mb``."""
    out = Path(output)
    if not (out.name.endswith(".json") or out.name.endswith(".json.gz")):
        raise UsageError(f"--output {out}: expected a .json or .json.gz file name")
    head_text = ",".join(_dump(m) for m in trace.metadata)
    budget = None
    if max_mb is not None:
        budget = int(max_mb * _MB) - len(head_text) - len(_dump(trace.other)) - 4096
        if budget <= 0:
            raise UsageError(f"--max-mb {max_mb:g}: smaller than the trace's own metadata "
                             f"({len(head_text) / _MB:.2f} MB); give a larger limit")
    parts = _chunks(trace, budget)
    paths = part_paths(out, len(parts))
    for i, (path, texts) in enumerate(zip(paths, parts, strict=True)):
        other = dict(trace.other)
        if len(parts) > 1:
            other["part"] = {"index": i + 1, "count": len(parts), "files": [p.name for p in paths]}
        with atomic_write(path, "wb") as raw:
            fh: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) \
                if path.name.endswith(".gz") else raw
            fh.write(b'{"traceEvents":[')
            fh.write(head_text.encode())
            for j, text in enumerate(texts):
                fh.write(b"," if (head_text or j) else b"")
                fh.write(text.encode())
            fh.write(b'],"displayTimeUnit":"ms","otherData":')
            fh.write(_dump(other).encode())
            fh.write(b"}\n")
            if fh is not raw:
                fh.close()
    return paths
