"""Formatting one step of MyTimer regions as profile CSV text (START/END rows, chronological).

Kept apart from the timer so that the hot path module stays small. Everything is integer
arithmetic plus cached per-region text: the part of a row that does not change from step to
step (name, type, metadata) is built once per (name, node_id, parent_id, depth).
"""

from __future__ import annotations

from typing import Any

from my_utils.core.profile_csv import csv_field, format_metadata, readable_second
from my_utils.core.safe_io import csv_text_cell, utf8_text

__all__ = ["format_step_rows"]


def _tails(name: str, node: int, parent: int, depth: int, tag: str) -> tuple[str, str, str, str]:
    meta_items: dict[str, object] = {"node_id": node, "parent_id": parent, "depth": depth}
    if tag:
        meta_items["tag"] = utf8_text(tag)
    meta = format_metadata(meta_items)
    # a name from os.fsdecode of a non-UTF-8 byte holds a lone surrogate: written as is, the
    # whole file would be invalid UTF-8 and every reader would refuse it; \xNN keeps the byte.
    # A name a spreadsheet would run as a formula ("=HYPERLINK(...)") gets a leading apostrophe
    # (csv_text_cell), which the reader takes off again.
    qname = csv_field(csv_text_cell(utf8_text(name)))
    # START: "name,START,0.0,meta\n"; END: "name,END," + duration + "," + meta (+ cuda) + "\n"
    return f"{qname},START,0.0,{csv_field(meta)}\n", f"{qname},END,", f",{csv_field(meta)}\n", meta


def format_step_rows(
    regions: list[list[Any]],
    cuda_ms: list[float | None] | None,
    step: int,
    base_ns: int,
    machine_id: str,
    tag: str,
    cache: dict[tuple[Any, ...], tuple[str, str, str, str]],
) -> str:
    """CSV text for ``regions`` ([name, depth, start_ns, end_ns, ...] in start order).

    ``base_ns`` maps ``perf_counter_ns`` to unix ns (offset included). Rows come out in time
    order: a region's START, its children's rows, then its END (node_id = index in start order,
    parent_id = -1 at depth 0). With ``cuda_ms``, END rows carry ``cuda_ms=`` in the metadata.
    """
    # This loop is the per-step cost of the timer: integer arithmetic and one f-string per row.
    prefix = f"{csv_field(csv_text_cell(utf8_text(machine_id)))},{step},"
    out: list[str] = []
    emit = out.append
    open_nodes: list[int] = []  # indices of regions whose END is not emitted yet
    tails_of: list[tuple[str, str, str, str]] = []
    last_at_depth: list[int] = []
    readable_sec = -1
    head = readable = ""  # "<unix seconds>." and ",<local date time>." of readable_sec
    n = len(regions)
    for node in range(n + 1):
        depth = regions[node][1] if node < n else 0
        while len(open_nodes) > depth:
            closed = open_nodes.pop()
            region = regions[closed]
            tails = tails_of[closed]
            sec, usec = divmod((base_ns + region[3]) // 1000, 1_000_000)
            if sec != readable_sec:
                readable_sec, head, readable = sec, f"{sec}.", f",{readable_second(sec)}."
            us6 = f"{usec:06d}"
            dms, dns = divmod(region[3] - region[2], 1_000_000)
            if cuda_ms is not None and cuda_ms[closed] is not None:
                end_meta = f",{csv_field(f'{tails[3]};cuda_ms={cuda_ms[closed]:.6f}')}\n"
            else:
                end_meta = tails[2]
            emit(f"{head}{us6}{readable}{us6[:3]},{prefix}{tails[1]}{dms}.{dns:06d}{end_meta}")
        if node == n:
            break
        region = regions[node]
        del last_at_depth[depth:]
        parent = last_at_depth[depth - 1] if depth else -1
        last_at_depth.append(node)
        key = (region[0], node, parent, depth)
        tails = cache.get(key)  # type: ignore[assignment]
        if tails is None:
            tails = cache[key] = _tails(region[0], node, parent, depth, tag)
        tails_of.append(tails)
        sec, usec = divmod((base_ns + region[2]) // 1000, 1_000_000)
        if sec != readable_sec:
            readable_sec, head, readable = sec, f"{sec}.", f",{readable_second(sec)}."
        us6 = f"{usec:06d}"
        emit(f"{head}{us6}{readable}{us6[:3]},{prefix}{tails[0]}")
        open_nodes.append(node)
    return "".join(out)
