"""Formatting one step of MyTimer regions as profile CSV text (START/END rows, chronological).

Kept apart from the timer so that the hot path module stays small. Everything is integer
arithmetic plus cached per-region text: the part of a row that does not change from step to
step (name, type, metadata) is built once per (name, node_id, parent_id, depth).
"""

from __future__ import annotations

from typing import Any

from my_utils.core.profile_csv import (
    csv_field,
    format_metadata,
    format_ms_ns,
    format_unix_ns,
    readable_time_ns,
)

__all__ = ["format_step_rows"]


def _tails(name: str, node: int, parent: int, depth: int, tag: str) -> tuple[str, str, str]:
    meta_items: dict[str, object] = {"node_id": node, "parent_id": parent, "depth": depth}
    if tag:
        meta_items["tag"] = tag
    meta = format_metadata(meta_items)
    qname = csv_field(name)
    # START: "name,START,0.0,meta\n"; END: "name,END," + duration + "," + meta (+ cuda) + "\n"
    return f"{qname},START,0.0,{csv_field(meta)}\n", f"{qname},END,", meta


def format_step_rows(
    regions: list[list[Any]],
    cuda_ms: list[float | None] | None,
    step: int,
    base_ns: int,
    machine_id: str,
    tag: str,
    cache: dict[tuple[Any, ...], tuple[str, str, str]],
) -> str:
    """CSV text for ``regions`` ([name, depth, start_ns, end_ns, ...] in start order).

    ``base_ns`` maps ``perf_counter_ns`` to unix ns (offset included). Rows come out in time
    order: a region's START, its children's rows, then its END (node_id = index in start order,
    parent_id = -1 at depth 0). With ``cuda_ms``, END rows carry ``cuda_ms=`` in the metadata.
    """
    prefix = f"{csv_field(machine_id)},{step},"
    out: list[str] = []
    emit = out.append
    open_regions: list[tuple[list[Any], int, tuple[str, str, str]]] = []
    last_at_depth: list[int] = []

    def close(entry: tuple[list[Any], int, tuple[str, str, str]]) -> None:
        region, node, tails = entry
        unix = base_ns + region[3]
        meta = tails[2]
        if cuda_ms is not None and cuda_ms[node] is not None:
            meta = f"{meta};cuda_ms={cuda_ms[node]:.6f}"
        emit(
            f"{format_unix_ns(unix)},{readable_time_ns(unix)},{prefix}{tails[1]}"
            f"{format_ms_ns(region[3] - region[2])},{csv_field(meta)}\n"
        )

    for node, region in enumerate(regions):
        depth = region[1]
        while len(open_regions) > depth:
            close(open_regions.pop())
        del last_at_depth[depth:]
        parent = last_at_depth[depth - 1] if depth else -1
        last_at_depth.append(node)
        key = (region[0], node, parent, depth)
        tails = cache.get(key)
        if tails is None:
            tails = cache[key] = _tails(region[0], node, parent, depth, tag)
        unix = base_ns + region[2]
        emit(f"{format_unix_ns(unix)},{readable_time_ns(unix)},{prefix}{tails[0]}")
        open_regions.append((region, node, tails))
    while open_regions:
        close(open_regions.pop())
    return "".join(out)
