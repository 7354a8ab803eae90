"""Findings from the Nsight facts (``nsys.*``, ``ncu.*``), in the scheme of ``analysis.fact_rules``.

Each rule reads facts (and the table rows they cite), returns plain finding dicts with the facts
it rests on, an impact and advice whose evidence rows point at the report's tables; the analyzer
ranks them with every other finding (one fact feeds one finding). A pattern seen on several
ranks or devices is one finding: its title quotes the largest, its detail and ``evidence.ranks``
name the others.

Impact: with NVTX iterations (``step_time.median`` from nsys), a saving is spread over the
iterations and compared with the median iteration; without, the capture counts as one step and
a saving is a share of its GPU span (the basis says so).

``nsys:gpu_idle``
    a device idle at least :data:`MIN_IDLE` % of its span; the advice follows the idle cause
    (``nsys.idle_host_wait``: launch-bound, else syncs and waits).
``nsys:comm_exposed``
    communication at least :data:`MIN_COMM_SHARE` % of busy time, and less than :data:`MAX_OVERLAP` %
    of it under computation or its exposed part at least :data:`MIN_EXPOSED` % of the span.
``nsys:rank_skew:<collective>``
    NCCL kernels spend at least :data:`MIN_WAIT` % of their time waiting for the last rank to arrive.
``nsys:copies``
    copies and sets cover at least :data:`MIN_COPY_SHARE` % of a device's busy time (memcpy-bound).
``nsys:host_sync``
    the host spends at least :data:`MIN_SYNC_SHARE` % of the span blocked in synchronising CUDA calls
    while the GPU is idle at least :data:`MIN_IDLE` % (waiting for a busy GPU costs nothing).
``nsys:warmup_in_window``
    the first NVTX iteration is an outlier: warm-up inside the capture window (a trace-quality finding).
``nsys:iteration_idle``
    the GPU idle at least :data:`MIN_IDLE` % inside the iterations' GPU windows; with OS-runtime
    tracing, the host's top wait is named (a data-loader stall).
``ncu:*``
    the Nsight Compute findings (:mod:`.ncu_rules`): roofline gap or latency-bound kernels, ncu's rules.
``nsys:triage``
    the top-down verdict (host-, communication-, memcpy- or kernel-bound), with the four
    pressures as shares of the GPU span — the same the headline's verdict weighs (an info
    finding: it saves nothing itself, it says where the time goes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from my_utils.profiling.analysis.advice import COMM_ADVICE, IDLE_ADVICE, advice_for
from my_utils.profiling.analysis.model import Fact
from my_utils.profiling.analysis.ncu_rules import ncu_findings
from my_utils.profiling.analysis.nsight_advice import (
    NSIGHT_ADVICE,
    TRIAGE,
    advice_entry,
    evidence_rows,
    short_kernel,
)
from my_utils.profiling.analysis.rules._evidence import impact

MIN_IDLE = 20.0  # % of the span
MIN_HOST_SHARE = 50.0  # % of the idle time
MIN_COMM_SHARE = 10.0  # % of busy time
MAX_OVERLAP = 30.0  # % of communication time
MIN_EXPOSED = 10.0  # % of the span
MIN_WAIT = 20.0  # % of NCCL kernel time
MIN_COPY_SHARE = 30.0  # % of busy time
MIN_SYNC_SHARE = 20.0  # % of the span
MIN_COVERAGE = 0.5  # of the GPU span: iterations that cover less are not a clock for savings
WARMUP_RATIO = 1.2  # the first iteration at least this many times the median
CRITICAL_SHARE = 0.05  # of the step the impact states: nothing below is critical
WARNING_SHARE = 0.01  # ... nor a warning
SETUP_DOMINANT = 50.0  # % of the capture in one-off work: no steady state to judge
#: The triage's words for a setup-dominated capture (the other verdicts are ``nsight_advice.TRIAGE``'s).
SETUP_TRIAGE = ("setup-dominated", "most of the capture is one-off work (initialisation, allocation, loading, "
                "compilation): launch-overhead fixes do not apply; capture the steady state instead (start nsys "
                "after warm-up: --capture-range=cudaProfilerApi or --capture-range=nvtx, or --delay)")
MS = 1e6

def _tag(rank: Any) -> str:
    return f"rank{rank}" if rank is not None else "norank"


def _where(rank: Any, device: Any = None) -> str:
    parts = ([f"rank {rank}"] if rank is not None else []) + ([f"device {device}"] if device is not None else [])
    return ", ".join(parts) or "the run"


@dataclass(frozen=True)
class _Clock:
    """What a saving is compared with: the median NVTX iteration, or the capture's GPU span (one 'step')."""

    steps: int | None
    step_ms: float | None

    def impact(self, saving_ms: float, span_ms: float | None, basis: str, *, upper: bool = False) -> dict[str, Any]:
        if self.steps and self.step_ms:
            return impact(saving_ms / self.steps, self.step_ms,
                          f"{basis}, spread over {self.steps} NVTX iteration(s)", self.steps, "nsys", upper)
        out = impact(saving_ms, span_ms, f"{basis}, over the whole capture (no NVTX iterations found: the capture "
                                         "counts as one step, a share of its GPU span)", None, "nsys", upper)
        if span_ms:
            out["denominator"] = f"the capture's GPU span ({span_ms:,.1f} ms; no step time measured)"
        return out


def _clock(facts: Mapping[str, Fact]) -> _Clock:
    """Iterations when they cover at least :data:`MIN_COVERAGE` of the GPU span (a range around a launch alone
    does not: its CPU time says nothing of the GPU's), else the capture."""
    median = facts.get("step_time.median")
    span = _mean_span(facts)
    if median is not None and median.source == "nsys" and median.number and median.steps and span \
            and median.number * median.steps >= MIN_COVERAGE * span:
        return _Clock(median.steps, median.number)
    return _Clock(None, None)


def _scopes(facts: Mapping[str, Fact], prefix: str) -> dict[str, Fact]:
    """``scope -> fact`` for the facts ``<prefix>:<scope>`` (scope ``rank1:device0``, ``device0``...)."""
    return {k[len(prefix) + 1:]: f for k, f in facts.items() if k.startswith(prefix + ":")}


def _rank_device(fact: Fact) -> tuple[Any, Any]:
    key = fact.evidence[0].key if fact.evidence else {}
    return key.get("rank"), key.get("device")


def _one(per: list[dict[str, Any]], fid: str) -> list[dict[str, Any]]:
    """One finding from per-scope ones: the largest impact quoted, the others named (``fact_rules``' way)."""
    if not per:
        return []
    ordered = sorted(per, key=lambda f: f.get("impact", {}).get("share_of_step") or 0.0, reverse=True)
    head = dict(ordered[0], id=fid)
    if len(ordered) > 1:
        head["detail"] += "; also: " + "; ".join(o["title"] for o in ordered[1:8])
        head["evidence"] = dict(head["evidence"], ranks=[r for f in ordered for r in f["evidence"]["ranks"]],
                                per_scope=[{"where": f["evidence"]["where"], "title": f["title"]} for f in ordered])
        head["facts"] = [x for f in ordered for x in f["facts"]]
        head["advice"] = [dict(a, because=[b for f in ordered for a2 in f["advice"] if a2["kind"] == a["kind"]
                                           for b in a2["because"]]) for a in head["advice"]]
    return [head]


def nsight_findings(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every finding of the module docstring, as plain finding dicts."""
    clock = _clock(facts)
    out: list[dict[str, Any]] = []
    out += _gpu_idle(facts, tables, clock)
    out += _comm_exposed(facts, tables, clock)
    out += _rank_skew(facts, clock)
    out += _copies(facts, tables, clock)
    out += _host_sync(facts, tables, clock)
    out += _warmup(facts, tables)
    out += _iteration_idle(facts)
    out += ncu_findings(facts, tables)
    out += _triage(facts, tables)
    return [_severity_by_impact(f) for f in out]


def _severity_by_impact(finding: dict[str, Any]) -> dict[str, Any]:
    """Severity follows the time a fix could save: ``critical`` only from :data:`CRITICAL_SHARE` of the step the
    impact states, ``warning`` only from :data:`WARNING_SHARE` (a capture-validity finding keeps its warning)."""
    share = (finding.get("impact") or {}).get("share_of_step")
    if not isinstance(share, (int, float)) or finding.get("category") == "capture":
        return finding
    severity = finding.get("severity")
    if severity == "critical" and share < CRITICAL_SHARE:
        severity = "warning"
    if severity == "warning" and share < WARNING_SHARE:
        severity = "info"
    return finding if severity == finding.get("severity") else dict(finding, severity=severity)


def setup_dominated(facts: Mapping[str, Fact]) -> tuple[bool, str]:
    """Whether one-off work leaves no steady state to judge (``setup.share`` at least :data:`SETUP_DOMINANT` %, or
    ``setup.one_shot``), and why in words."""
    share, shot = facts.get("setup.share"), facts.get("setup.one_shot")
    reasons = []
    if share is not None and share.number is not None and share.number >= SETUP_DOMINANT:
        reasons.append(f"one-off work fills {share.number:.0f}% of the capture ({share.detail})")
    if shot is not None and shot.number == 1:
        reasons.append(f"nothing repeats: {shot.detail}")
    return bool(reasons), "; ".join(reasons)


def _triage(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One info finding naming what bounds the run (the headline's verdict, with the pressures behind it); a capture
    that is mostly setup is said to be so before any pressure is weighed."""
    busy, idle = facts.get("gpu.busy"), facts.get("gpu.idle")
    if busy is None or busy.source != "nsys" or busy.number is None or idle is None or idle.number is None:
        return []
    span = busy.denominator_value or 0.0
    host_f, exposed, copies, compute = (facts.get(i) for i in ("gpu.idle_host_wait", "comm.exposed",
                                                                 "memory.copy_share", "gpu.compute"))
    setup_rows = list(tables.get("nsys_setup_idle") or [])
    host_in_setup = sum(float(r.get("setup_host_wait_ns") or 0) for r in setup_rows) / MS
    idle_in_setup = sum(float(r.get("setup_idle_ns") or 0) for r in setup_rows) / MS
    idle_ms = span * idle.number / 100.0
    host_ms = idle_ms * ((host_f.number or 0.0) / 100.0 if host_f is not None else 1.0)
    pressures = {
        "host": 100.0 * max(host_ms - (host_in_setup if host_f is not None else idle_in_setup), 0.0) / span
        if span else 0.0,
        "communication": 100.0 * (exposed.number or 0.0) / span if exposed is not None and span else 0.0,
        "memory": (copies.number or 0.0) * busy.number / 100.0 if copies is not None else 0.0,
        "compute": (compute.number or 0.0) if compute is not None else 0.0,
    }
    setup, why = setup_dominated(facts)
    bound = "setup" if setup else max(pressures, key=lambda k: pressures[k])
    label, text = SETUP_TRIAGE if setup else TRIAGE[bound]
    top = next((r for r in tables.get("nsys_top_kernels") or [] if r.get("kind") == "computation"), None)
    used = [f for f in (busy, idle, host_f, exposed, copies, compute) if f is not None]
    if setup:
        used += [f for f in (facts.get("setup.share"), facts.get("setup.one_shot")) if f is not None]
    shares = ", ".join(f"{k} {v:.0f}%" for k, v in sorted(pressures.items(), key=lambda kv: -kv[1]))
    detail = (f"share of the {span:,.0f} ms GPU span ({busy.aggregate}) each pressure takes, idle inside setup left "
              f"out: {shares}")
    if setup:
        detail = f"{why}; {detail}"
    if top is not None and bound == "compute":
        detail += (f"; the kernel with the most time: {short_kernel(str(top.get('name') or top.get('short_name')))} "
                   f"({float(top.get('total_ns') or 0) / MS:,.1f} ms in {top.get('count')} launch(es))")
    title = (f"top-down triage: the capture is {label}: no steady state to judge" if setup else
             f"top-down triage: the run is {label} ({pressures[bound]:.0f}% of the GPU span)")
    return [{
        "id": "nsys:triage", "category": "optimization", "severity": "info",
        "title": title,
        "detail": detail,
        "evidence": {"names": ["gpu.busy"], "ranks": list(busy.ranks), "bound": bound, "pressures_pct": pressures,
                     "table": "nsys_busy_device", "steps": []},
        "suggestion": text,
        "facts": [f.id for f in used],
        "impact": {"ms_per_step": None, "share_of_step": None, "basis": "a verdict, not a saving: the other findings "
                   "say what each fix could save", "steps": None, "weight": 1.0, "step_source": "nsys",
                   "upper_bound": False},
        "advice": [advice_entry(text, f"triage:{bound}", *used)],
    }]


def _span_ms(busy: Fact) -> float:
    return busy.denominator_value or 0.0


def _setup_idle(tables: Mapping[str, Sequence[Mapping[str, Any]]], rank: Any, device: Any) -> tuple[float, float]:
    """(idle ms, host-wait idle ms) of a device that lie inside setup windows (``nsys_setup_idle``; 0 without it)."""
    for r in tables.get("nsys_setup_idle") or []:
        if r.get("rank") == rank and r.get("device") == device:
            return float(r.get("setup_idle_ns") or 0) / MS, float(r.get("setup_host_wait_ns") or 0) / MS
    return 0.0, 0.0


def _gpu_idle(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
              clock: _Clock) -> list[dict[str, Any]]:
    """Idle outside setup: the idle inside setup windows (``nsys_setup_idle``) is not counted, since launching
    faster cannot fill it."""
    per = []
    setup, why = setup_dominated(facts)
    for scope, busy in _scopes(facts, "nsys.gpu_busy").items():
        idle_f, host_f = facts.get(f"nsys.gpu_idle:{scope}"), facts.get(f"nsys.idle_host_wait:{scope}")
        if busy.number is None or idle_f is None or idle_f.number is None:
            continue
        rank, device = _rank_device(busy)
        span, all_idle = _span_ms(busy), idle_f.number
        in_setup, host_in_setup = _setup_idle(tables, rank, device)
        idle_ms = max(all_idle - in_setup, 0.0)
        idle_pct = 100.0 * idle_ms / span if span else 0.0
        if idle_pct < MIN_IDLE:
            continue
        host_all = all_idle * host_f.number / 100.0 if host_f is not None and host_f.number is not None else None
        host = (100.0 * max(host_all - host_in_setup, 0.0) / idle_ms if host_all is not None and idle_ms else None)
        host_bound = host is not None and host >= MIN_HOST_SHARE
        cause = (f"; {host:.0f}% of that idle the GPU waited for the host to launch the next work" if host is not None
                 else "")
        setup_note = (f"; {in_setup:,.1f} ms more idle lies inside setup (one-off work: initialisation, allocation, "
                      "loading, compilation) and is not counted" if in_setup >= 0.05 else "")
        if setup:
            setup_note += f"; the capture is setup-dominated ({why}): launching faster does not apply"
        saving = idle_ms * host / 100.0 if host_bound and host is not None else idle_ms
        if setup:  # a capture of one-off work: no launch-overhead fix applies, the steady state is elsewhere
            text, kind = SETUP_TRIAGE[1], "capture:setup"
        else:
            text, kind = IDLE_ADVICE["host_wait" if host_bound else "other"], ("idle:host_wait" if host_bound
                                                                                else "idle:other")
        outside = " outside setup" if in_setup >= 0.05 else ""
        per.append({
            "id": f"nsys:gpu_idle:{scope}", "category": "optimization",
            "severity": "critical" if idle_pct >= 50.0 else "warning",
            "title": f"GPU idle {idle_pct:.0f}% of its {span:,.0f} ms span{outside} on {_where(rank, device)}"
                     + (f", {host:.0f}% of it waiting for the host" if host is not None else ""),
            "detail": f"{idle_ms:,.1f} ms idle{outside} in {idle_f.detail} over {span:,.1f} ms (device-level: the span "
                      f"minus the union of every kernel, copy and set){cause}{setup_note}",
            "evidence": {"names": ["gpu.idle"], "ranks": [rank], "where": _where(rank, device), "idle_pct": idle_pct,
                         "idle_ms": idle_ms, "setup_idle_ms": in_setup, "span_ms": span,
                         "host_wait_pct_of_idle": host, "table": "nsys_busy_device", "steps": []},
            "suggestion": text,
            "facts": [busy.id, idle_f.id] + ([host_f.id] if host_f is not None else []),
            "impact": clock.impact(saving, span, "the idle time outside setup the GPU waited for the host" if host_bound
                                   else "the GPU's idle time outside setup (at most this could be filled)",
                                   upper=setup or not host_bound),
            "advice": [advice_entry(text, kind, busy, idle_f, host_f)],
        })
    return _one(per, "nsys:gpu_idle")


def _shared_streams(tables: Mapping[str, Sequence[Mapping[str, Any]]], rank: Any, device: Any) -> list[Any]:
    """Streams where NCCL kernels run beside other work (ops on the stream beyond its NCCL kernels)."""
    nccl: dict[Any, int] = defaultdict(int)
    for r in tables.get("nsys_nccl_kernels") or []:
        if r.get("rank") == rank and r.get("device") == device:
            nccl[r.get("stream")] += int(r.get("count") or 0)
    return sorted((r.get("stream") for r in tables.get("nsys_busy_stream") or []
                   if r.get("rank") == rank and r.get("device") == device and r.get("stream") in nccl
                   and int(r.get("ops") or 0) > nccl[r.get("stream")]), key=str)


def _comm_exposed(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
                  clock: _Clock) -> list[dict[str, Any]]:
    per = []
    for scope, overlap in _scopes(facts, "nsys.comm_overlap").items():
        exposed, busy = facts.get(f"nsys.comm_exposed:{scope}"), facts.get(f"nsys.gpu_busy:{scope}")
        if overlap.number is None or exposed is None or exposed.number is None or busy is None or not busy.number:
            continue
        span = _span_ms(busy)
        busy_ms = span * busy.number / 100.0
        comm_ms = overlap.denominator_value or 0.0
        share = 100.0 * comm_ms / busy_ms if busy_ms else 0.0
        exposed_pct = 100.0 * exposed.number / span if span else 0.0
        if share < MIN_COMM_SHARE or (overlap.number >= MAX_OVERLAP and exposed_pct < MIN_EXPOSED):
            continue
        if not any(float(e.values.get("computation_ns") or 0) > 0 for e in overlap.evidence):
            continue  # no computation kernel on the device: nothing to overlap the communication with
        rank, device = _rank_device(overlap)
        shared = _shared_streams(tables, rank, device)
        text = COMM_ADVICE["no_overlap_shared_stream" if shared else "no_overlap_own_stream"].format(
            overlap=overlap.number)
        per.append({
            "id": f"nsys:comm_exposed:{scope}", "category": "optimization",
            "severity": "critical" if exposed_pct >= 20.0 else "warning",
            "title": f"communication is {overlap.number:.0f}% overlapped with compute on {_where(rank, device)}: "
                     f"{comm_ms:,.1f} ms of NCCL, {exposed.number:,.1f} ms exposed",
            "detail": f"communication kernels cover {share:.1f}% of the GPU's busy time ({comm_ms:,.1f} ms of "
                      f"{busy_ms:,.1f} ms); {exposed.number:,.1f} ms ({exposed_pct:.1f}% of the {span:,.1f} ms span) "
                      "run with no computation kernel beside them"
                      + (f"; NCCL shares stream(s) {', '.join(map(str, shared))} with other work" if shared else ""),
            "evidence": {"names": ["gpu.comm_time"], "ranks": [rank], "where": _where(rank, device),
                         "communication_ms": comm_ms, "overlap_pct": overlap.number, "exposed_ms": exposed.number,
                         "share_of_busy_pct": share, "shared_streams": shared, "table": "nsys_overlap", "steps": []},
            "suggestion": text,
            "facts": [overlap.id, exposed.id],
            "impact": clock.impact(exposed.number, span, "the exposed communication time: what full overlap would hide"),
            "advice": [advice_entry(text, "communication:no_overlap", overlap, exposed)],
        })
    return _one(per, "nsys:comm_exposed")


def _rank_skew(facts: Mapping[str, Fact], clock: _Clock) -> list[dict[str, Any]]:
    out = []
    for coll, wait in _scopes(facts, "nsys.nccl_wait").items():
        last = facts.get(f"nsys.nccl_last_rank:{coll}")
        if wait.number is None or wait.number < MIN_WAIT or last is None or last.number is None:
            continue
        ranks = [r for r in wait.ranks]
        waited = sum(float(e.values.get("wait_ns") or 0) for e in wait.evidence) / MS
        rank = int(last.number)
        per_rank = waited / max(len(ranks), 1)
        text = NSIGHT_ADVICE["rank_skew"].format(rank=rank, collective=coll)
        span = _mean_span(facts)
        out.append({
            "id": f"nsys:rank_skew:{coll}", "category": "imbalance",
            "severity": "critical" if wait.number >= 50.0 else "warning",
            "title": f"ranks wait for rank {rank} at {coll}: {wait.number:.0f}% of NCCL kernel time is spent waiting "
                     "for the last rank to arrive",
            "detail": f"rank {rank} arrives {last.detail}; {waited:,.1f} ms of waiting summed over ranks "
                      f"{', '.join(map(str, ranks))} ({wait.denominator_value or 0:,.1f} ms of {coll} kernels)",
            "evidence": {"names": [f"nccl:{coll}"], "ranks": ranks, "last_rank": rank, "wait_pct": wait.number,
                         "wait_ms": waited, "table": "nsys_nccl_ranks", "steps": []},
            "suggestion": text,
            "facts": [wait.id, last.id],
            "impact": clock.impact(per_rank, span, "the mean time a rank's NCCL kernels waited for the last rank"),
            "advice": [advice_entry(text, "imbalance:rank_skew", wait, last)],
        })
    return out


def _mean_span(facts: Mapping[str, Fact]) -> float | None:
    spans = [f.denominator_value for f in _scopes(facts, "nsys.gpu_busy").values() if f.denominator_value]
    return sum(spans) / len(spans) if spans else None


def _copies(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
            clock: _Clock) -> list[dict[str, Any]]:
    per = []
    for scope, share in _scopes(facts, "nsys.copy_share").items():
        busy = facts.get(f"nsys.gpu_busy:{scope}")
        if share.number is None or share.number < MIN_COPY_SHARE or busy is None:
            continue
        rank, device = _rank_device(share)
        copy_ms = (share.denominator_value or 0.0) * share.number / 100.0
        rows = [r for r in tables.get("nsys_copies") or [] if r.get("rank") == rank and r.get("op") == "memcpy"]
        bw = [f for r in rows if (f := facts.get(f"nsys.copy_bandwidth:memcpy:{r.get('direction')}"
                                              + (f":rank{rank}" if rank is not None else ""))) is not None]
        speeds = ", ".join(f"{r.get('direction')} {float(r.get('bandwidth_gbps') or 0):,.1f} GB/s" for r in rows)
        text = advice_for("memcpy")[1]
        per.append({
            "id": f"nsys:copies:{scope}", "category": "optimization",
            "severity": "critical" if share.number >= 60.0 else "warning",
            "title": f"copies take {share.number:.0f}% of the GPU's busy time on {_where(rank, device)} "
                     f"({copy_ms:,.1f} ms)" + (f": {speeds}" if speeds else ""),
            "detail": f"copies, sets and memory kernels cover {copy_ms:,.1f} ms of {share.denominator_value or 0:,.1f} "
                      f"ms busy ({share.detail}); achieved copy bandwidth {speeds or 'not measured'}",
            "evidence": {"names": ["gpu.memcpy_time"], "ranks": [rank], "where": _where(rank, device),
                         "copy_ms": copy_ms, "share_of_busy_pct": share.number, "table": "nsys_busy_kind", "steps": []},
            "suggestion": text,
            "facts": [share.id, *(f.id for f in bw)],
            "impact": clock.impact(copy_ms, _span_ms(busy), "the copies' busy time (avoided, or overlapped with "
                                                            "compute)", upper=True),
            "advice": [advice_entry(text, "copies", share, *bw)],
        })
    return _one(per, "nsys:copies")


def _host_sync(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
               clock: _Clock) -> list[dict[str, Any]]:
    per = []
    syncs = [f for k, f in facts.items() if k == "nsys.host_sync" or k.startswith("nsys.host_sync:")]
    for sync in syncs:
        if sync.number is None or not sync.number:
            continue
        rank = sync.ranks[0] if sync.ranks else None
        busy = [f for f in _scopes(facts, "nsys.gpu_busy").values() if f.denominator_value and _rank_device(f)[0] == rank]
        # every device of the export is driven by its own host thread: their blocked times add up, so do the spans
        span = sum(f.denominator_value or 0.0 for f in busy)
        idle = 100.0 - sum((f.denominator_value or 0.0) * (f.number or 0.0) for f in busy) / span if span else 0.0
        if not span or 100.0 * sync.number / span < MIN_SYNC_SHARE or idle < MIN_IDLE:
            continue  # a host waiting for a busy GPU is ahead of it: nothing to win
        names = ", ".join(str(e.key.get("name")) for e in sync.evidence)
        text = IDLE_ADVICE["sync"].format(sync_ms=sync.number, names=names)
        per.append({
            "id": f"nsys:host_sync:{_tag(rank)}", "category": "optimization", "severity": "warning",
            "title": f"the host is blocked {sync.number:,.0f} ms in synchronising CUDA calls"
                     + (f" on rank {rank}" if rank is not None else "")
                     + f" ({100.0 * sync.number / span:.0f}% of the {span:,.0f} ms GPU span)",
            "detail": f"{sync.detail}: while blocked, the host launches nothing, so the GPU cannot run ahead of it",
            "evidence": {"names": ["gpu.sync_time"], "ranks": [rank], "where": _where(rank), "sync_ms": sync.number,
                         "span_ms": span, "table": "nsys_cuda_api", "steps": []},
            "suggestion": text,
            "facts": [sync.id],
            "impact": clock.impact(sync.number, span, "the host's time blocked in synchronising calls", upper=True),
            "advice": [advice_entry(text, "idle:sync", sync)],
        })
    return _one(per, "nsys:host_sync")


def _warmup(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    first: dict[tuple[Any, Any], int] = {}
    for r in tables.get("nsys_iterations") or []:
        key = (r.get("rank"), r.get("pid"))
        if isinstance(r.get("iteration"), int):
            first[key] = min(first.get(key, r["iteration"]), r["iteration"])
    per = []
    for scope, out_f in _scopes(facts, "nsys.iteration_outliers").items():
        time_f = facts.get(f"nsys.iteration_time:{scope}")
        hits = [e for e in out_f.evidence
                if first.get((e.key.get("rank"), e.key.get("pid"))) == e.key.get("iteration")]
        if not hits or time_f is None or not time_f.number:
            continue
        ev = hits[0]
        first_ms = float(ev.values.get("cpu_ns") or 0) / MS
        if first_ms < WARMUP_RATIO * time_f.number:
            continue
        rank = ev.key.get("rank")
        where = f" on rank {rank}" if rank is not None else ""
        text = NSIGHT_ADVICE["warmup"]
        per.append({
            "id": f"nsys:warmup_in_window:{scope}", "category": "capture", "severity": "warning",
            "title": f"warm-up inside the capture window{where}: the first iteration took {first_ms:,.3f} ms, "
                     f"{first_ms / time_f.number:.1f}× the median {time_f.number:,.3f} ms",
            "detail": f"{time_f.label} over {time_f.steps} iteration(s); outliers: {out_f.detail}. The first iteration "
                      "is not representative: the window's statistics include warm-up",
            "evidence": {"names": [time_f.label], "ranks": [rank], "where": _where(rank), "steps": [ev.key.get("iteration")],
                         "first_ms": first_ms, "median_ms": time_f.number, "robust_z": ev.values.get("robust_z"),
                         "table": "nsys_iterations"},
            "suggestion": text,
            "facts": [out_f.id, time_f.id],
            "advice": [{"text": text, "because": [ev.to_dict(), *evidence_rows(time_f)], "facts": [out_f.id, time_f.id],
                        "kind": "capture:warmup"}],
        })
    return _one(per, "nsys:warmup_in_window")


def _iteration_idle(facts: Mapping[str, Fact]) -> list[dict[str, Any]]:
    per = []
    for scope, idle in _scopes(facts, "nsys.iteration_gpu_idle").items():
        if idle.number is None or idle.number < MIN_IDLE:
            continue
        rank = idle.ranks[0] if idle.ranks else None
        osrt = facts.get("nsys.osrt_top" + (f":rank{rank}" if rank is not None else ""))
        waits = osrt is not None and osrt.measured
        text = (advice_for("dataloader")[1] if waits else NSIGHT_ADVICE["no_osrt"])
        window = idle.denominator_value or 0.0
        per.append({
            "id": f"nsys:iteration_idle:{scope}", "category": "optimization",
            "severity": "critical" if idle.number >= 50.0 else "warning",
            "title": (f"GPU idle {idle.number:.0f}% inside the iterations on {_where(rank)}"
                      + (f" while the host waits in {osrt.value}: a data-loader stall?" if waits and osrt else "")),
            "detail": f"{idle.number:.1f}% of {window:,.1f} ms of the iterations' GPU windows had no GPU work "
                      f"({idle.steps} iteration(s))" + (f"; the host's OS-runtime wait with the most time: {osrt.value} "
                                                         f"({osrt.detail})" if waits and osrt else
                                                         "; OS-runtime calls were not traced"),
            "evidence": {"names": ["gpu.idle"], "ranks": [rank], "where": _where(rank), "idle_pct": idle.number,
                         "table": "nsys_iterations", "steps": []},
            "suggestion": text,
            "facts": [idle.id] + ([osrt.id] if waits and osrt else []),
            "impact": impact(window * idle.number / 100.0 / idle.steps if idle.steps else None,
                             _clock(facts).step_ms, "the idle time inside the iterations' GPU windows", idle.steps,
                             "nsys", True),
            "advice": [advice_entry(text, "data_loading" if waits else "idle:no_osrt", idle, osrt if waits else None)],
        })
    return _one(per, "nsys:iteration_idle")


