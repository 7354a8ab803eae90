"""Idle explained: each host-wait gap of the compute stream given to what the host ran, recomputed from the raw
trace (gzip+json) with plain loops.

On the rank pair, autograd's thread launches the backward kernels and sits idle between them while the main
thread is inside ``## backward ##``: that wait is the backward pass's, not "(nothing on the launching thread)".
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.idle_explained import LAUNCHING, MAIN, NOTHING, idle_host_op_rows
from my_utils.profiling.kineto.run import read_rank


def _innermost(spans: list[dict[str, Any]], t: float) -> str | None:
    """The innermost operator or annotation open at ``t`` (started at or before it, ending after it)."""
    open_ = [e for e in spans if e["ts"] <= t < e["ts"] + e["dur"]]
    return max(open_, key=lambda e: (e["ts"], -e["dur"]))["name"] if open_ else None


def _expected(path: Path, stream: int) -> dict[tuple[str, str], float]:
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    spans: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in ("cpu_op", "user_annotation") and not e["name"].startswith("ProfilerStep#"):
            spans[e["tid"]].append(e)
    main = next(e["tid"] for e in events if e["name"].startswith("ProfilerStep#"))
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                  and e["args"].get("stream") == stream), key=lambda e: e["ts"])
    out: dict[tuple[str, str], float] = defaultdict(float)
    reach = gpu[0]["ts"] + gpu[0]["dur"]
    for e in gpu[1:]:
        call = calls.get(e["args"].get("correlation"))
        if e["ts"] > reach and call is not None and call["ts"] > reach:
            name, where = _innermost(spans[call["tid"]], reach), LAUNCHING
            if name is None and call["tid"] != main:
                name, where = _innermost(spans[main], reach), MAIN
            out[(name, where) if name is not None else (NOTHING, "")] += e["ts"] - reach
        reach = max(reach, e["ts"] + e["dur"])
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_backward_wait_goes_to_the_backward_pass(real_fixtures: Any, rank: int) -> None:
    path = real_fixtures / "kineto" / f"hta/trace_filter__sampled_rank-{rank}.json.gz"
    expected = _expected(path, 7)
    rows = idle_host_op_rows(read_rank(path).data, top=10**6)
    assert {(r.operator, r.where): r.idle_us for r in rows} == pytest.approx(dict(expected))
    backward = next(r for r in rows if r.operator == "## backward ##")
    assert backward.where == MAIN and backward.idle_us > 180_000 and rows[0] is backward
    assert not any(r.operator == NOTHING for r in rows)


def test_nothing_on_any_thread_is_said_so(tmp_path: Path) -> None:
    """Two kernels launched from a thread with nothing else recorded, and no main thread running either."""
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 5, "pid": 1, "tid": 2,
               "args": {"correlation": c}} for c, ts in ((1, 0), (2, 500))]
    events += [{"ph": "X", "cat": "kernel", "name": "k", "ts": ts, "dur": 10, "pid": 0, "tid": 7,
                "args": {"stream": 7, "correlation": c, "device": 0}} for c, ts in ((1, 10), (2, 510))]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = idle_host_op_rows(read_rank(path).data)
    assert (row.operator, row.where, row.idle_us) == (NOTHING, "", 490)
