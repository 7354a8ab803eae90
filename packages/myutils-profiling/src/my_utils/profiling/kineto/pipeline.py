"""Pipeline-parallel bubbles: each stage's idle between microbatches against its schedule's expected bubble.

A pipeline of ``p`` stages running ``m`` microbatches per step leaves each stage idle while the first
microbatches travel down and the last gradients travel back: with 1F1B (and GPipe) that idle is
``(p − 1) / (m + p − 1)`` of the pipeline's time; with ``v`` interleaved model chunks per stage,
``(p − 1) / (v·m + p − 1)`` (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", 2021, §2.2). Idle beyond that is a slow stage, a late send or receive, or
uneven stages, and is time a fix can save. Holistic Trace Analysis has no pipeline view (its idle time is
per stream, whatever the schedule).

**Microbatch ranges** are read from the names frameworks record (one table, :data:`PATTERNS`; a run
can add its own with the ``patterns`` option: ``{"F": "regex", "B": "regex"}``): PyTorch's
``torch.distributed.pipelining`` (torchtitan) records ``PP:<stage><F|B|I|W><microbatch>`` or ``Forward
<i>`` / ``Backward <i>``; Megatron-LM times ``forward-compute`` / ``backward-compute`` (its ``forward_step``
/ ``backward_step`` when wrapped); DeepSpeed's pipeline engine ``_exec_forward_pass`` /
``_exec_backward_pass`` (``forward_microstep`` / ``backward_microstep``). A range's *work* is the span and
union of the non-communication kernels launched while it runs (any thread: autograd runs backward on
its own), or the range itself when it launched none (a CPU run).

**Per step** (``ProfilerStep``; the whole capture when there is none) and stage: the *window* runs from
the first microbatch's work to the last one's over every stage analysed (ranks on one clock; one rank
alone: its own), the stage's *bubble* is the window less the union of its work, and the *excess* is the
bubble beyond the expected share of the window. ``p`` is the number of stages the names number (``PP:3F0``
is stage 3), else the ranks that hold microbatch ranges, or the ``stages`` option; ``m`` the forward
ranges per chunk of a stage; ``v`` the chunks (stage numbers) one rank runs, the numbered stages being
virtual ones (``p = (highest stage number + 1) / v``). A schedule with weight-only
backward passes (``W``: zero-bubble) is measured but not judged: its expected bubble is not this formula.

``kineto_pipeline_bubble`` (across ranks): one row per (rank, step); ``flagged`` when the excess is at
least :data:`MIN_EXCESS_PCT` % of the step and the bubble at least :data:`MIN_RATIO` × the expected one.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.kineto.rows import Row, Tables

#: (framework, regex) per microbatch-range name; groups: ``kind`` (F, B, I, W or a word), optional ``stage``, ``mb``.
PATTERNS: tuple[tuple[str, str], ...] = (
    ("torch.distributed.pipelining", r"^PP:(?P<stage>\d+)(?P<kind>F|B|I|W)(?P<mb>\d+)$"),
    ("torch.distributed.pipelining", r"^(?P<kind>Forward|Backward) (?P<mb>\d+)$"),
    ("Megatron-LM", r"^(?P<kind>forward|backward)[-_](?:compute|step)$"),
    ("DeepSpeed", r"(?:^|\.)_exec_(?P<kind>forward|backward)_pass$"),
    ("DeepSpeed", r"^(?P<kind>forward|backward)_microstep$"),
)
_KIND = {"f": "F", "forward": "F", "b": "B", "backward": "B", "i": "B", "w": "W"}
MIN_EXCESS_PCT = 2.0
MIN_RATIO = 1.25


@dataclass(frozen=True)
class MicrobatchRange:
    """One microbatch's forward or backward pass on one rank (times µs on the trace's own clock)."""

    rank: int | None
    step: int | None
    kind: str  # F, B or W
    stage: int | None
    microbatch: int | None
    start_us: float
    end_us: float
    busy_us: float
    framework: str


@dataclass(frozen=True)
class PipelineBubbleRow(Row):
    """One stage (rank) in one step: its window, work, bubble, and the bubble its schedule expects."""

    rank: int | None
    step: int | None
    framework: str
    schedule: str
    stages: int | None
    microbatches: int
    chunks: int
    window_us: float
    busy_us: float
    bubble_us: float
    bubble_pct: float
    expected_pct: float
    excess_us: float
    step_us: float
    excess_step_pct: float
    flagged: bool
    note: str


def compile_patterns(patterns: Mapping[str, str] | None = None) -> list[tuple[str, re.Pattern[str]]]:
    """:data:`PATTERNS` and a run's own (``{"F": regex, "B": regex, "W": regex}``), user patterns first."""
    out: list[tuple[str, re.Pattern[str]]] = []
    for kind, regex in (patterns or {}).items():
        if kind not in ("F", "B", "W"):
            from my_utils.core.errors import UsageError

            raise UsageError(f"pipeline patterns: key {kind!r}; expected F, B or W (a regex per pass kind)")
        out.append((f"configured {kind}", re.compile(f"(?P<kind_{kind}>{regex})")))
    out += [(fw, re.compile(rx)) for fw, rx in PATTERNS]
    return out


def classify(name: str, compiled: Sequence[tuple[str, re.Pattern[str]]]) -> tuple[str, str, int | None,
                                                                                   int | None] | None:
    """(framework, kind F/B/W, stage, microbatch) of a range name, None when it is no microbatch pass."""
    for framework, pattern in compiled:
        m = pattern.search(name)
        if m is None:
            continue
        groups = m.groupdict()
        kind = next((k[5:] for k, v in groups.items() if k.startswith("kind_") and v is not None), None)
        if kind is None:
            kind = _KIND.get(str(groups.get("kind", "")).lower())
        if kind is None:
            continue
        stage, mb = groups.get("stage"), groups.get("mb")
        return framework, kind, int(stage) if stage else None, int(mb) if mb else None
    return None


def expected_share(stages: int | None, microbatches: int, chunks: int = 1) -> float | None:
    """The bubble's expected share of the window: ``(p − 1) / (v·m + p − 1)``; None when ``p`` is unknown."""
    if stages is None or stages < 1 or microbatches < 1:
        return None
    return (stages - 1) / (chunks * microbatches + stages - 1)


def _union(intervals: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def bubble_rows(ranges: Sequence[MicrobatchRange], step_us: Mapping[tuple[int | None, int | None], float],
                stages: int | None = None, one_clock: bool = True) -> list[PipelineBubbleRow]:
    """The rows of the module docstring from every rank's microbatch ranges; ``step_us`` per (rank, step)."""
    by_step: dict[int | None, list[MicrobatchRange]] = {}
    for r in ranges:
        by_step.setdefault(r.step, []).append(r)
    numbered = {r.stage for r in ranges if r.stage is not None}
    ranks = {r.rank for r in ranges}
    rows = []
    for step, in_step in sorted(by_step.items(), key=lambda x: (x[0] is None, x[0] or 0)):
        per_rank: dict[int | None, list[MicrobatchRange]] = {}
        for r in in_step:
            per_rank.setdefault(r.rank, []).append(r)
        lo_all = min(r.start_us for r in in_step)
        hi_all = max(r.end_us for r in in_step)
        for rank, own in sorted(per_rank.items(), key=lambda x: (x[0] is None, x[0] or 0)):
            lo, hi = (lo_all, hi_all) if one_clock else (min(r.start_us for r in own), max(r.end_us for r in own))
            window = hi - lo
            chunks = len({r.stage for r in own if r.stage is not None}) or 1
            # stage numbers are virtual stages (v per rank): p physical stages = their count over v
            p = stages or ((max(numbered) + 1) // chunks if numbered else (len(ranks) if len(ranks) > 1 else None))
            forwards = [r for r in own if r.kind == "F"]
            m = (len(forwards) // chunks) if forwards else 0
            busy = _union([(r.start_us, r.end_us) for r in own]) if all(r.busy_us >= r.end_us - r.start_us
                                                                          for r in own) else \
                sum(r.busy_us for r in own)
            bubble = max(window - busy, 0.0)
            zero_bubble = any(r.kind == "W" for r in own)
            share = None if zero_bubble else expected_share(p, m, chunks)
            expected = share * window if share is not None else math.nan
            excess = max(bubble - expected, 0.0) if share is not None else math.nan
            step_len = step_us.get((rank, step)) or window
            excess_pct = 100.0 * excess / step_len if step_len > 0 and excess == excess else math.nan
            flagged = bool(share is not None and excess_pct >= MIN_EXCESS_PCT
                           and bubble >= MIN_RATIO * expected)
            schedule = ("zero-bubble (W passes)" if zero_bubble else
                        f"interleaved 1F1B, {chunks} chunks" if chunks > 1 else "1F1B / GPipe")
            note = _note(p, stages, numbered, ranks, one_clock, zero_bubble)
            rows.append(PipelineBubbleRow(
                rank, step, ", ".join(sorted({r.framework for r in own})), schedule, p, m, chunks, window, busy,
                bubble, 100.0 * bubble / window if window > 0 else math.nan,
                100.0 * share if share is not None else math.nan, excess, step_len, excess_pct, flagged, note))
    return rows


def _note(p: int | None, stages: int | None, numbered: set[int], ranks: set[Any], one_clock: bool,
          zero_bubble: bool) -> str:
    parts = []
    if stages:
        parts.append(f"{stages} stages (given)")
    elif numbered:
        parts.append(f"{p} stages (the highest stage number in the range names, over the chunks per rank: give "
                     "the stages option when the last stage's trace is not analysed)")
    elif p is not None:
        parts.append(f"{p} stages (the ranks holding microbatch ranges)")
    else:
        parts.append("stage count unknown (one rank, unnumbered names): give the stages option to judge it")
    if not one_clock:
        parts.append("window per rank (ranks not on one clock)")
    if zero_bubble:
        parts.append("weight-gradient passes: a zero-bubble schedule, whose expected bubble is not modelled")
    return "; ".join(parts)


def rank_ranges(d: Any, patterns: Mapping[str, str] | None = None) -> tuple[list[MicrobatchRange],
                                                                            dict[int | None, float]]:
    """The microbatch ranges of one rank's ``RankData`` (module docstring), and its steps' durations."""
    import numpy as np

    from my_utils.profiling.kineto.kinds import KINDS, KernelKind

    compiled = compile_patterns(patterns)
    hit: dict[int, tuple[str, str, int | None, int | None]] = {}
    for i, name in enumerate(d.names):
        got = classify(name, compiled)
        if got is not None:
            hit[i] = got
    steps = sorted({(s[0], s[0] + s[1], s[2]) for s in d.step_events})
    step_us = {s[2]: s[1] - s[0] for s in steps}
    if not hit:
        return [], step_us
    ids = np.array(sorted(hit))
    cand = []
    for ts, end, name in ((d.ann_ts, d.ann_end, d.ann_name), (d.op_ts, d.op_end, d.op_name)):
        if name is None or not len(name):
            continue
        sel = np.flatnonzero(np.isin(name, ids))
        cand += [(float(ts[i]), float(end[i]), int(name[i])) for i in sel.tolist()]
    # the kernels each range launched: runtime calls of any thread starting inside it
    compute = (d.gpu_kind != KINDS.index(KernelKind.COMMUNICATION)) & (d.gpu_kind != KINDS.index(KernelKind.MEMORY)) \
        & ~d.gpu_sync & (d.gpu_rt >= 0) if len(d.gpu_ts) else np.zeros(0, bool)
    k_rows = np.flatnonzero(compute)
    k_call = d.rt_ts[d.gpu_rt[k_rows]] if len(k_rows) else np.zeros(0)
    order = np.argsort(k_call, kind="stable")
    k_rows, k_call = k_rows[order], k_call[order]
    starts = np.array([s[0] for s in steps]) if steps else np.zeros(0)
    out = []
    for ts, end, nid in sorted(cand):
        framework, kind, stage, mb = hit[nid]
        lo, hi = np.searchsorted(k_call, ts, side="left"), np.searchsorted(k_call, end, side="right")
        mine = k_rows[lo:hi]
        if len(mine):
            ks, ke = d.gpu_ts[mine], d.gpu_end[mine]
            start, stop = float(ks.min()), float(ke.max())
            busy = _union(list(zip(ks.tolist(), ke.tolist(), strict=True)))
        else:
            start, stop, busy = ts, end, end - ts
        pos = int(np.searchsorted(starts, ts, side="right")) - 1 if len(starts) else -1
        step = steps[pos][2] if pos >= 0 and ts < steps[pos][1] else None
        out.append(MicrobatchRange(d.rank, step, kind, stage, mb, start + d.base_us, stop + d.base_us, busy,
                                   framework))
    return out, step_us


def pipeline_tables(d: Any, patterns: Mapping[str, str] | None = None, stages: int | None = None) -> Tables:
    """The ranges of one rank, for :func:`across_ranks` (a private table: no report rows per rank)."""
    ranges, step_us = rank_ranges(d, patterns)
    if not ranges:
        return {}
    rows = [{"rank": r.rank, "step": r.step, "kind": r.kind, "stage": r.stage, "microbatch": r.microbatch,
             "start_us": r.start_us, "end_us": r.end_us, "busy_us": r.busy_us, "framework": r.framework}
            for r in ranges]
    steps = [{"rank": d.rank, "step": k, "us": v} for k, v in step_us.items()]
    return {"_pipeline_ranges": rows, "_pipeline_steps": steps,
            "_pipeline_options": [{"stages": stages, "host": d.context.get("host")}]}


def across_ranks(results: Sequence[Any]) -> Tables:
    """``pipeline_bubble`` rows from every rank's ranges (module docstring)."""
    ranges = [MicrobatchRange(**r) for res in results for r in res.tables.get("_pipeline_ranges", ())]
    if not ranges:
        return {}
    step_us = {(s["rank"], s["step"]): float(s["us"]) for res in results for s in res.tables.get("_pipeline_steps", ())}
    options = [o for res in results for o in res.tables.get("_pipeline_options", ())]
    given = [o["stages"] for o in options if o.get("stages")]
    hosts = {o.get("host") for o in options}
    # ranks of one host share its clock; ranks on several hosts may not (their windows are taken per rank)
    one_clock = len(hosts) <= 1
    rows = bubble_rows(ranges, step_us, stages=statistics.mode(given) if given else None, one_clock=one_clock)
    return {"pipeline_bubble": rows}
