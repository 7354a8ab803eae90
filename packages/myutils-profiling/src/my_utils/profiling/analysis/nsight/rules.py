"""Findings from the Nsight facts (``nsys.*``, ``ncu.*``), in the scheme of ``analysis.fact_rules``.

Each rule reads facts (and the table rows they cite), returns plain finding dicts with the facts
it rests on, an impact and advice whose evidence rows point at the report's tables; the analyzer
ranks them with every other finding (one fact feeds one finding). A pattern seen on several
ranks or devices is one finding: its title quotes the largest, its detail and ``evidence.ranks``
name the others.

Impact: with NVTX iterations (``step_time.median`` from nsys), a saving is spread over the
iterations and compared with the median iteration; without, the capture counts as one step and
a saving is a share of its GPU span (the impact's ``denominator`` says so); severity follows it
(:mod:`.nsight_rule_base`). Setup is not steady state: idle inside one-off work
(``nsys_setup_idle``) is never counted as a saving.

``nsys:gpu_idle``
    a device idle at least :data:`MIN_IDLE` % of its span outside setup; the advice follows the idle
    cause (``nsys.idle_host_wait``: launch-bound, else syncs and waits), and in a setup-dominated
    capture is to capture the steady state.
``nsys:comm_exposed``, ``nsys:host_skew``, ``nsys:rank_skew:<collective>``
    exposed communication, and ranks or a whole host waiting at collectives (:mod:`.nsight_comm_rules`).
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
    the top-down verdict: setup-dominated (``setup.share`` at least :data:`SETUP_DOMINANT` %, or
    ``setup.one_shot``), else host-, communication-, memcpy- or kernel-bound, with the four
    pressures as shares of the GPU span, idle inside setup left out (an info finding: it saves
    nothing itself, it says where the time goes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.advice import IDLE_ADVICE, advice_for
from my_utils.profiling.analysis.nsight.advice import (
    NSIGHT_ADVICE,
    TRIAGE,
    advice_entry,
    evidence_rows,
    short_kernel,
)
from my_utils.profiling.analysis.nsight.comm_rules import comm_exposed, rank_skew
from my_utils.profiling.analysis.nsight.ncu_rules import ncu_findings
from my_utils.profiling.analysis.nsight.rule_base import (
    MS,
    Clock,
    clock_of,
    one,
    rank_device,
    scopes,
    severity_by_impact,
    span_ms,
    tag,
    where,
)
from my_utils.profiling.analysis.rules._evidence import impact
from my_utils.profiling.model.report import Fact

MIN_IDLE = 20.0  # % of the span
MIN_HOST_SHARE = 50.0  # % of the idle time
MIN_COPY_SHARE = 30.0  # % of busy time
MIN_SYNC_SHARE = 20.0  # % of the span
WARMUP_RATIO = 1.2  # the first iteration at least this many times the median
SETUP_DOMINANT = 50.0  # % of the capture in one-off work: no steady state to judge
#: The triage's words for a setup-dominated capture (the other verdicts are ``nsight_advice.TRIAGE``'s).
SETUP_TRIAGE = ("setup-dominated", "most of the capture is one-off work (initialisation, allocation, loading, "
                "compilation): launch-overhead fixes do not apply; capture the steady state instead (start nsys "
                "after warm-up: --capture-range=cudaProfilerApi or --capture-range=nvtx, or --delay)")

def nsight_findings(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every finding of the module docstring, as plain finding dicts."""
    clock = clock_of(facts)
    out: list[dict[str, Any]] = []
    out += _gpu_idle(facts, tables, clock)
    out += comm_exposed(facts, tables, clock)
    out += rank_skew(facts, clock)
    out += _copies(facts, tables, clock)
    out += _host_sync(facts, tables, clock)
    out += _warmup(facts, tables)
    out += _iteration_idle(facts)
    out += ncu_findings(facts, tables)
    out += _triage(facts, tables)
    note = _rank_note(facts)
    return [severity_by_impact(_with_rank_note(f, note)) for f in out]


def _rank_note(facts: Mapping[str, Fact]) -> str:
    """How the ranks a finding names were numbered, when no input recorded them (file order, or by device)."""
    ranks = facts.get("context.ranks")
    if ranks is None or ranks.source != "nsys" or not ranks.measured:
        return ""
    if "file order" in ranks.detail or "numbered by device" in ranks.detail:
        return f" (rank numbers: {ranks.detail})"
    return ""


def _with_rank_note(finding: dict[str, Any], note: str) -> dict[str, Any]:
    named = [r for r in (finding.get("evidence") or {}).get("ranks") or [] if isinstance(r, int)]
    if not note or not named:
        return finding
    return dict(finding, detail=str(finding.get("detail") or "") + note)


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
    top_fact = facts.get("kernels.top")
    if bound == "compute" and top_fact is not None and top_fact.number is not None:
        # the lever of a kernel-bound run, named up front
        title += f"; {top_fact.label.removeprefix('kernel time in ')} takes {top_fact.number:.0f}% of kernel time"
        used.append(top_fact)
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


def _setup_idle(tables: Mapping[str, Sequence[Mapping[str, Any]]], rank: Any, device: Any) -> tuple[float, float]:
    """(idle ms, host-wait idle ms) of a device that lie inside setup windows (``nsys_setup_idle``; 0 without it)."""
    for r in tables.get("nsys_setup_idle") or []:
        if r.get("rank") == rank and r.get("device") == device:
            return float(r.get("setup_idle_ns") or 0) / MS, float(r.get("setup_host_wait_ns") or 0) / MS
    return 0.0, 0.0


def _gpu_idle(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
              clock: Clock) -> list[dict[str, Any]]:
    """Idle outside setup: the idle inside setup windows (``nsys_setup_idle``) is not counted, since launching
    faster cannot fill it."""
    per = []
    setup, why = setup_dominated(facts)
    for scope, busy in scopes(facts, "nsys.gpu_busy").items():
        idle_f, host_f = facts.get(f"nsys.gpu_idle:{scope}"), facts.get(f"nsys.idle_host_wait:{scope}")
        if busy.number is None or idle_f is None or idle_f.number is None:
            continue
        rank, device = rank_device(busy)
        span, all_idle = span_ms(busy), idle_f.number
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
            "title": f"GPU idle {idle_pct:.0f}% of its {span:,.0f} ms span{outside} on {where(rank, device)}"
                     + (f", {host:.0f}% of it waiting for the host" if host is not None else ""),
            "detail": f"{idle_ms:,.1f} ms idle{outside} in {idle_f.detail} over {span:,.1f} ms (device-level: the span "
                      f"minus the union of every kernel, copy and set){cause}{setup_note}",
            "evidence": {"names": ["gpu.idle"], "ranks": [rank], "where": where(rank, device), "idle_pct": idle_pct,
                         "idle_ms": idle_ms, "setup_idle_ms": in_setup, "span_ms": span,
                         "host_wait_pct_of_idle": host, "table": "nsys_busy_device", "steps": []},
            "suggestion": text,
            "facts": [busy.id, idle_f.id] + ([host_f.id] if host_f is not None else []),
            "impact": clock.impact(saving, span, "the idle time outside setup the GPU waited for the host" if host_bound
                                   else "the GPU's idle time outside setup (at most this could be filled)",
                                   upper=setup or not host_bound),
            "advice": [advice_entry(text, kind, busy, idle_f, host_f)],
        })
    return one(per, "nsys:gpu_idle")


def _copies(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
            clock: Clock) -> list[dict[str, Any]]:
    per = []
    for scope, share in scopes(facts, "nsys.copy_share").items():
        busy = facts.get(f"nsys.gpu_busy:{scope}")
        if share.number is None or share.number < MIN_COPY_SHARE or busy is None:
            continue
        rank, device = rank_device(share)
        copy_ms = (share.denominator_value or 0.0) * share.number / 100.0
        rows = [r for r in tables.get("nsys_copies") or [] if r.get("rank") == rank and r.get("op") == "memcpy"]
        bw = [f for r in rows if (f := facts.get(f"nsys.copy_bandwidth:memcpy:{r.get('direction')}"
                                              + (f":rank{rank}" if rank is not None else ""))) is not None]
        speeds = ", ".join(f"{r.get('direction')} {float(r.get('bandwidth_gbps') or 0):,.1f} GB/s" for r in rows
                           if not r.get("implausible"))
        text = advice_for("memcpy")[1]
        per.append({
            "id": f"nsys:copies:{scope}", "category": "optimization",
            "severity": "critical" if share.number >= 60.0 else "warning",
            "title": f"copies take {share.number:.0f}% of the GPU's busy time on {where(rank, device)} "
                     f"({copy_ms:,.1f} ms)" + (f": {speeds}" if speeds else ""),
            "detail": f"copies, sets and memory kernels cover {copy_ms:,.1f} ms of {share.denominator_value or 0:,.1f} "
                      f"ms busy ({share.detail}); achieved copy bandwidth {speeds or 'not measured'}",
            "evidence": {"names": ["gpu.memcpy_time"], "ranks": [rank], "where": where(rank, device),
                         "copy_ms": copy_ms, "share_of_busy_pct": share.number, "table": "nsys_busy_kind", "steps": []},
            "suggestion": text,
            "facts": [share.id, *(f.id for f in bw)],
            "impact": clock.impact(copy_ms, span_ms(busy), "the copies' busy time (avoided, or overlapped with "
                                                            "compute)", upper=True),
            "advice": [advice_entry(text, "copies", share, *bw)],
        })
    return one(per, "nsys:copies")


def _host_sync(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]],
               clock: Clock) -> list[dict[str, Any]]:
    per = []
    syncs = [f for k, f in facts.items() if k == "nsys.host_sync" or k.startswith("nsys.host_sync:")]
    for sync in syncs:
        if sync.number is None or not sync.number:
            continue
        rank = sync.ranks[0] if sync.ranks else None
        busy = [f for f in scopes(facts, "nsys.gpu_busy").values() if f.denominator_value and rank_device(f)[0] == rank]
        # every device of the export is driven by its own host thread: their blocked times add up, so do the spans
        span = sum(f.denominator_value or 0.0 for f in busy)
        idle = 100.0 - sum((f.denominator_value or 0.0) * (f.number or 0.0) for f in busy) / span if span else 0.0
        if not span or 100.0 * sync.number / span < MIN_SYNC_SHARE or idle < MIN_IDLE:
            continue  # a host waiting for a busy GPU is ahead of it: nothing to win
        names = ", ".join(str(e.key.get("name")) for e in sync.evidence)
        text = IDLE_ADVICE["sync"].format(sync_ms=sync.number, names=names)
        per.append({
            "id": f"nsys:host_sync:{tag(rank)}", "category": "optimization", "severity": "warning",
            "title": f"the host is blocked {sync.number:,.0f} ms in synchronising CUDA calls"
                     + (f" on rank {rank}" if rank is not None else "")
                     + f" ({100.0 * sync.number / span:.0f}% of the {span:,.0f} ms GPU span)",
            "detail": f"{sync.detail}: while blocked, the host launches nothing, so the GPU cannot run ahead of it",
            "evidence": {"names": ["gpu.sync_time"], "ranks": [rank], "where": where(rank), "sync_ms": sync.number,
                         "span_ms": span, "table": "nsys_cuda_api", "steps": []},
            "suggestion": text,
            "facts": [sync.id],
            "impact": clock.impact(sync.number, span, "the host's time blocked in synchronising calls", upper=True),
            "advice": [advice_entry(text, "idle:sync", sync)],
        })
    return one(per, "nsys:host_sync")


def _warmup(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    first: dict[tuple[Any, Any], int] = {}
    for r in tables.get("nsys_iterations") or []:
        key = (r.get("rank"), r.get("pid"))
        if isinstance(r.get("iteration"), int):
            first[key] = min(first.get(key, r["iteration"]), r["iteration"])
    per = []
    for scope, out_f in scopes(facts, "nsys.iteration_outliers").items():
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
        on_rank = f" on rank {rank}" if rank is not None else ""
        text = NSIGHT_ADVICE["warmup"]
        per.append({
            "id": f"nsys:warmup_in_window:{scope}", "category": "capture", "severity": "warning",
            "title": f"warm-up inside the capture window{on_rank}: the first iteration took {first_ms:,.3f} ms, "
                     f"{first_ms / time_f.number:.1f}× the median {time_f.number:,.3f} ms",
            "detail": f"{time_f.label} over {time_f.steps} iteration(s); outliers: {out_f.detail}. The first iteration "
                      "is not representative: the window's statistics include warm-up",
            "evidence": {"names": [time_f.label], "ranks": [rank], "where": where(rank), "steps": [ev.key.get("iteration")],
                         "first_ms": first_ms, "median_ms": time_f.number, "robust_z": ev.values.get("robust_z"),
                         "table": "nsys_iterations"},
            "suggestion": text,
            "facts": [out_f.id, time_f.id],
            "advice": [{"text": text, "because": [ev.to_dict(), *evidence_rows(time_f)], "facts": [out_f.id, time_f.id],
                        "kind": "capture:warmup"}],
        })
    return one(per, "nsys:warmup_in_window")


def _iteration_idle(facts: Mapping[str, Fact]) -> list[dict[str, Any]]:
    per = []
    for scope, idle in scopes(facts, "nsys.iteration_gpu_idle").items():
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
            "title": (f"GPU idle {idle.number:.0f}% inside the iterations on {where(rank)}"
                      + (f" while the host waits in {osrt.value}: a data-loader stall?" if waits and osrt else "")),
            "detail": f"{idle.number:.1f}% of {window:,.1f} ms of the iterations' GPU windows had no GPU work "
                      f"({idle.steps} iteration(s))" + (f"; the host's OS-runtime wait with the most time: {osrt.value} "
                                                         f"({osrt.detail})" if waits and osrt else
                                                         "; OS-runtime calls were not traced"),
            "evidence": {"names": ["gpu.idle"], "ranks": [rank], "where": where(rank), "idle_pct": idle.number,
                         "table": "nsys_iterations", "steps": []},
            "suggestion": text,
            "facts": [idle.id] + ([osrt.id] if waits and osrt else []),
            "impact": impact(window * idle.number / 100.0 / idle.steps if idle.steps else None,
                             clock_of(facts).step_ms, "the idle time inside the iterations' GPU windows", idle.steps,
                             "nsys", True),
            "advice": [advice_entry(text, "data_loading" if waits else "idle:no_osrt", idle, osrt if waits else None)],
        })
    return one(per, "nsys:iteration_idle")


