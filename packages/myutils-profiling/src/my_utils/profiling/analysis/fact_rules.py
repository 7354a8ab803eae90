"""The clearest facts of a trace, promoted to findings with their evidence (ARCHITECTURE.md §8).

Three patterns that no per-name threshold catches, each resting on facts of ``analysis.facts``
(so a bottleneck or suggestion on the same fact is folded into it). Each is tested per rank
and reported once: the title quotes the rank with the largest impact *by number*, the
detail lists the other ranks where it holds.

``communication:no_overlap``
    communication kernels take at least :data:`MIN_COMM_SHARE` of GPU busy time, and less than
    :data:`MAX_OVERLAP` % of them run under computation (0 µs overlapped with 357 ms of NCCL) or
    the part not under computation is at least :data:`MIN_EXPOSED` % of the GPU span: the
    exposed communication is what overlap could save. The advice depends on whether NCCL
    shares a stream with compute (it cannot overlap then) or has its own (compute waits for it).
``gpu:host_bound``
    the GPU is idle at least :data:`MIN_IDLE` % of its span and most of that idle is waiting for
    the host to launch work; the short-kernel count and host syncs are part of the evidence.
    Advice: CUDA graphs / ``torch.compile(mode="reduce-overhead")`` / larger kernels (the diagnosis
    removes what does not apply to the run: ``analysis.advice_gate``).
``communication:spike:rank<r>``
    a step whose communication time is at least :data:`SPIKE` × the median of the other steps
    and far outside their spread (robust z above :data:`SPIKE_Z`): NCCL time doubling in one step.
``communication:slow_link``
    collectives of at least 1 MiB whose bus bandwidth (NCCL-tests' definition, from the NCCL
    kernels' own arguments) stays under a quarter of the GPU's link (``kineto_collectives``,
    fact ``comm.busbw_link``); the time they could save is their time beyond what the link's
    speed needs.

``gpu:host_bound`` also names the host operator the compute stream waited on longest (fact
``idle.host_op``, from ``kineto_idle_host_ops``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.advice import COMM_ADVICE, IDLE_ADVICE
from my_utils.profiling.analysis.pipeline_rule import pipeline_findings
from my_utils.profiling.analysis.rules._evidence import impact
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series
from my_utils.profiling.analysis.rules._stats import MAD_TO_SIGMA, mad
from my_utils.profiling.kineto.kinds import KernelKind, kind_of
from my_utils.profiling.model.report import Fact

MIN_COMM_SHARE = 10.0  # % of GPU busy time
MAX_OVERLAP = 30.0  # % of communication time
MIN_EXPOSED = 10.0  # % of the GPU span
MIN_IDLE = 20.0  # % of the GPU span
MIN_HOST_SHARE = 50.0  # % of the idle time
SPIKE = 1.5
SPIKE_Z = 5.0
#: Advice per kind of collective-bandwidth evidence (one place to review).
LINK_ADVICE = {
    "communication:slow_link": (
        "NCCL moves these messages at {pct:.0f}% of the link's speed: check that NCCL uses NVLink/P2P "
        "(nvidia-smi topo -m; NCCL_DEBUG=INFO shows the transport, NCCL_P2P_DISABLE must be unset), that no "
        "NCCL_ALGO/NCCL_PROTO override forces a slow path, and that the collective is not waiting for a late "
        "rank (kineto_collectives_ranks shows each one's wait)"),
}


def _tag(rank: int | None) -> str:
    return f"rank{rank}" if rank is not None else "norank"


def _where(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "the run (no rank)"


def _torch_steps(series: Mapping[Any, Series], rank: int | None) -> tuple[int | None, float | None]:
    """Profiled steps of a rank and their median time (the torch.profiler step series)."""
    s = series.get((STEP_TIME, rank, "torch_profiler"))
    if s is None or not s.values:
        return None, None
    return len(s.values), statistics.median(s.values)


def _rows(fact: Fact) -> list[dict[str, Any]]:
    return [e.to_dict() for e in fact.evidence]


def fact_findings(facts: Mapping[str, Fact], series: Mapping[Any, Series],
                  tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The findings of the module docstring, as plain finding dicts."""
    out: list[dict[str, Any]] = []
    ranks = [r.get("rank") for r in tables.get("kineto_temporal") or []
             if r.get("rank") is not None or len(tables.get("kineto_temporal") or []) == 1]
    overlap: list[dict[str, Any]] = []
    host: list[dict[str, Any]] = []
    for rank in ranks:
        tag = _tag(rank)
        steps, step_ms = _torch_steps(series, rank)
        overlap.extend(_no_overlap(facts, tag, rank, steps, step_ms, _comm_kernel_facts(series, rank)))
        host.extend(_host_bound(facts, tag, rank, steps, step_ms))
    slow = [f for rank in ranks for f in _slow_link(facts, tables, _tag(rank), rank, *_torch_steps(series, rank))]
    out.extend(_one_across_ranks(f) for f in (overlap, host, slow) if f)
    out.extend(_comm_spikes(series))
    out.extend(pipeline_findings(facts, tables))  # analysis.pipeline_rule
    return out


def _slow_link(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]], tag: str,
               rank: int | None, steps: int | None, step_ms: float | None) -> list[dict[str, Any]]:
    fact = facts.get(f"comm.busbw_link:{tag}")
    if fact is None or fact.number is None:
        return []
    rows = [r for r in tables.get("kineto_collectives") or [] if r.get("flagged") and r.get("rank") == rank]
    if not rows:
        return []
    # time beyond what the link's speed needs: t × (1 − busbw / link) per flagged kind
    excess_ms = sum(float(r.get("total_us") or 0.0) * (1.0 - float(r.get("link_pct") or 0.0) / 100.0)
                    for r in rows) / 1e3
    text = LINK_ADVICE["communication:slow_link"].format(pct=fact.number)
    return [{
        "id": f"communication:slow_link:{tag}", "category": "optimization", "severity": "warning",
        "title": f"collectives on {_where(rank)} reach {fact.number:.0f}% of the link's bandwidth ({fact.detail})",
        "detail": (f"{len(rows)} kind(s) of collective of at least 1 MiB run under a quarter of "
                   f"{fact.denominator} ({fact.denominator_value} GB/s per direction): "
                   + "; ".join(f"{r.get('collective')} {float(r.get('message_bytes') or 0) / 2**20:,.1f} MiB ×"
                               f"{r.get('count')} at {float(r.get('busbw_gbps') or 0):,.1f} GB/s" for r in rows[:5])),
        "evidence": {"names": [str(r.get("collective")) for r in rows], "ranks": [rank], "steps": [],
                     "table": "kineto_collectives", "link_pct": fact.number, "excess_ms": excess_ms},
        "suggestion": text,
        "facts": [fact.id],
        "impact": impact(excess_ms / steps if steps else None, step_ms,
                         f"the flagged collectives' time beyond what the link's speed needs ({excess_ms:,.1f} ms "
                         f"over {steps} step(s))", steps, "torch_profiler", upper_bound=True),
        "advice": [{"text": text, "because": _rows(fact), "facts": [fact.id], "kind": "communication:slow_link"}],
    }]


def _one_across_ranks(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """One finding from the per-rank ones: the largest impact quoted (its rank named), the others listed."""
    def key(f: dict[str, Any]) -> float:
        share = f["impact"].get("share_of_step")
        return share if share is not None else -1.0

    ordered = sorted(per_rank, key=key, reverse=True)
    head = dict(ordered[0])
    head["id"] = head["id"].rsplit(":", 1)[0]  # one id for the pattern, whatever the ranks
    others = ordered[1:]
    if others:
        head["detail"] += "; also: " + "; ".join(o["title"] for o in others[:7])
        head["evidence"] = dict(head["evidence"], ranks=[f["evidence"]["ranks"][0] for f in ordered],
                                per_rank=[{"rank": f["evidence"]["ranks"][0], "title": f["title"]} for f in ordered])
        head["facts"] = [x for f in ordered for x in f["facts"]]
        head["advice"] = [dict(a, because=[b for f in ordered for a2 in f["advice"] if a2["kind"] == a["kind"]
                                           for b in a2["because"]]) for a in head["advice"]]
    return head


def _comm_kernel_facts(series: Mapping[Any, Series], rank: int | None) -> list[str]:
    """The series facts of a rank's communication kernels (a bottleneck on one is this finding's twin)."""
    return [f"series:{src}:{name}:{_tag(rank)}" for (name, r, src) in series
            if r == rank and name.startswith("kernel:") and kind_of(name[len("kernel:"):]) == KernelKind.COMMUNICATION]


def _no_overlap(facts: Mapping[str, Fact], tag: str, rank: int | None, steps: int | None,
                step_ms: float | None, kernel_facts: Sequence[str] = ()) -> list[dict[str, Any]]:
    share, overlap = facts.get(f"comm.share:{tag}"), facts.get(f"comm.overlap:{tag}")
    time, exposed = facts.get(f"comm.time:{tag}"), facts.get(f"comm.exposed:{tag}")
    if share is None or overlap is None or time is None or exposed is None:
        return []
    exposed_ms = exposed.number or 0.0
    span_share = exposed_ms / exposed.denominator_value if exposed.denominator_value else 0.0
    if (share.number or 0.0) < MIN_COMM_SHARE or overlap.number is None or (
            overlap.number >= MAX_OVERLAP and 100.0 * span_share < MIN_EXPOSED):
        return []
    streams = overlap.evidence[0].values if overlap.evidence else {}
    shared = bool(streams.get("shared_streams"))
    text = COMM_ADVICE["no_overlap_shared_stream" if shared else "no_overlap_own_stream"].format(
        overlap=overlap.number)
    return [{
        "id": f"communication:no_overlap:{tag}", "category": "optimization",
        "severity": "critical" if span_share >= 0.2 else "warning",
        "title": (f"communication is {overlap.number:.0f}% overlapped with compute on {_where(rank)}: "
                  f"{time.number:,.1f} ms of NCCL, {exposed_ms:,.1f} ms exposed"),
        "detail": (f"communication kernels take {share.number:.1f}% of GPU busy time ({share.detail}); "
                   f"{overlap.detail}; {exposed_ms:,.1f} ms ({100 * span_share:.1f}% of the GPU span) run with no "
                   f"computation beside them. Communication streams: {streams.get('comm_streams')}; shared with "
                   f"computation: {streams.get('shared_streams') or 'none'}"),
        "evidence": {"names": ["gpu.comm_time"], "ranks": [rank], "communication_ms": time.number, "overlap_pct": overlap.number,
                     "exposed_ms": exposed_ms, "share_of_busy_pct": share.number, "table": "kineto_overlap",
                     "comm_streams": streams.get("comm_streams"), "shared_streams": streams.get("shared_streams"),
                     "steps": []},
        "suggestion": text,
        "facts": [f"comm.overlap:{tag}", f"comm.time:{tag}", f"comm.exposed:{tag}", f"comm.share:{tag}",
                  *kernel_facts],
        "impact": impact(exposed_ms / steps if steps else None, step_ms,
                         f"the exposed communication time per profiled step ({exposed_ms:,.1f} ms over "
                         f"{steps} step(s)): what full overlap would hide", steps, "torch_profiler"),
        "advice": [{"text": text, "because": _rows(overlap) + _rows(share), "facts": [overlap.id, share.id],
                    "kind": "communication:no_overlap"}],
    }]


def _host_bound(facts: Mapping[str, Fact], tag: str, rank: int | None, steps: int | None,
                step_ms: float | None) -> list[dict[str, Any]]:
    idle, host = facts.get(f"gpu.idle:{tag}"), facts.get(f"gpu.idle_host_wait:{tag}")
    if idle is None or host is None or idle.number is None or host.number is None:
        return []
    if idle.number < MIN_IDLE or host.number < MIN_HOST_SHARE:
        return []
    span_ms = idle.denominator_value or 0.0
    idle_ms = span_ms * idle.number / 100.0
    host_ms = idle_ms * host.number / 100.0
    short = facts.get(f"launch.short_kernels:{tag}")
    sync = facts.get(f"sync.host:{tag}")
    advice: list[dict[str, Any]] = [{"text": IDLE_ADVICE["host_wait"], "because": _rows(idle) + _rows(host),
                                     "facts": [idle.id, host.id], "kind": "idle:host_wait"}]
    detail = (f"the GPU was idle {idle.number:.1f}% of its span ({idle.detail}); {host.number:.0f}% of that idle "
              f"({host_ms:,.1f} ms) it waited for the host to launch the next activity")
    facts_used = [f"gpu.idle:{tag}", f"gpu.idle_host_wait:{tag}", f"launch:{tag}"]
    waited = facts.get(f"idle.host_op:{tag}")
    if waited is not None and waited.number is not None:
        detail += f"; on the compute stream it waited longest under: {waited.detail}"
        facts_used.append(waited.id)
    if short is not None and short.number is not None and short.number >= 25.0:
        n = int(short.denominator_value or 0)
        k = round(n * short.number / 100.0)
        line = IDLE_ADVICE["short_kernels"].format(short=k, launches=n)
        detail += f"; {line}"
        advice.append({"text": f"{line}: {IDLE_ADVICE['short_kernels_fix']}", "because": _rows(short),
                       "facts": [short.id], "kind": "idle:short_kernels"})
        facts_used.append(short.id)
    if sync is not None and (sync.number or 0.0) > 0.05 * host_ms:
        names = ", ".join(sorted({str(e.key.get("name")) for e in sync.evidence}))
        line = IDLE_ADVICE["sync"].format(sync_ms=sync.number, names=names)
        advice.append({"text": line, "because": _rows(sync), "facts": [sync.id], "kind": "idle:sync"})
        facts_used.append(sync.id)
    return [{
        "id": f"gpu:host_bound:{tag}", "category": "optimization",
        "severity": "critical" if idle.number * host.number / 100.0 >= 30.0 else "warning",
        "title": (f"GPU idle {idle.number:.0f}% of its span on {_where(rank)}, {host.number:.0f}% of it waiting "
                  "for the host"),
        "detail": detail,
        "evidence": {"names": ["gpu.idle"], "ranks": [rank], "idle_pct": idle.number, "host_wait_pct_of_idle": host.number,
                     "host_wait_ms": host_ms, "span_ms": span_ms, "table": "kineto_idle_device", "steps": []},
        "suggestion": " ".join(str(a["text"]) for a in advice),
        "facts": facts_used,
        "impact": impact(host_ms / steps if steps else None, step_ms,
                         f"the GPU's host-wait idle per profiled step ({host_ms:,.1f} ms over {steps} step(s)): "
                         "what launching ahead of the GPU would fill", steps, "torch_profiler"),
        "advice": advice,
    }]


def _comm_spikes(series: Mapping[Any, Series]) -> list[dict[str, Any]]:
    out = []
    for (name, rank, source), s in series.items():
        if name != "gpu.comm_time" or len(s.values) < 3:
            continue
        worst = max(range(len(s.values)), key=s.values.__getitem__)
        others = s.values[:worst] + s.values[worst + 1:]
        med = statistics.median(others)
        spread = MAD_TO_SIGMA * mad(others, med)
        if med <= 0 or s.values[worst] < SPIKE * med or (spread > 0 and (s.values[worst] - med) / spread < SPIKE_Z):
            continue
        ratio = s.values[worst] / med
        step = s.steps[worst]
        text = COMM_ADVICE["spike"].format(ratio=ratio)
        row = {"table": "series", "key": {"name": name, "source": source, "rank": rank, "steps": [step]},
               "values": {"value": s.values[worst], "median_of_other_steps": med}}
        steps, step_ms = len(s.values), None
        step_series = series.get((STEP_TIME, rank, source))
        if step_series is not None and step_series.values:
            step_ms = statistics.median(step_series.values)
        out.append({
            "id": f"communication:spike:{_tag(rank)}", "category": "anomaly", "severity": "warning",
            "title": (f"communication time {ratio:.1f}× its median at step {step} on {_where(rank)} "
                      f"({s.values[worst]:,.1f} ms against {med:,.1f} ms)"),
            "detail": (f"{name} per step over {steps} profiled step(s): step {step} took {s.values[worst]:,.1f} "
                       f"{s.unit}, the median of the others {med:,.1f} {s.unit}"),
            "evidence": {"names": [name], "ranks": [rank], "steps": [step], "ratio": round(ratio, 3),
                         "value": s.values[worst], "median_of_other_steps": med, "source": source},
            "suggestion": text,
            "facts": [f"series:{source}:{name}:{_tag(rank)}:outliers"],
            "impact": impact((s.values[worst] - med) / steps, step_ms,
                             "the spike's time above the median, spread over the profiled steps", steps, source),
            "advice": [{"text": text, "because": [row], "facts": [], "kind": "communication:spike"}],
        })
    return out
