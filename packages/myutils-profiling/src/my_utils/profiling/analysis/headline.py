"""The headline: the first screen of a report, a fact set built here and drawn by ``reports/``.

``build_headline(facts, findings, title)`` picks, from the run's facts, the context (GPU ×
world size, ranks, host, CUDA), the figures (step time median / p90 / worst with its source,
GPU busy / idle, communication share and overlap) and writes a verdict of 2–3 lines: what
bounds the run, with the numbers behind it, then the top findings.

The verdict compares four pressures, each a share of the GPU span (the run's facts with no
``:rank`` suffix, i.e. all ranks): *host* — idle time spent waiting for the host to launch
work; *communication* — communication time not under computation; *memory* — copy/set kernel
busy time; *compute* — time with a computation kernel running. The largest names the bound;
without GPU activity the verdict is "not measured". When the two largest are within
:data:`TIE` points of each other and the critical path (``critical_path.*`` facts) is mostly
one of them (CPU work and launch gaps → host, NCCL → communication, GPU computation →
compute), the critical path decides. The bound's line quotes the evidence the Kineto analyses
add: the host operator the GPU waited on longest and the critical path's CPU share (host), the
slowest collective against its link (communication), the MFU (compute).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from my_utils.profiling.analysis.model import Fact, Finding, Headline, NotMeasured, Verdict, not_measured_fact

#: Context facts shown, in order.
CONTEXT = ("context.gpu", "context.gpu_count", "context.world_size", "context.ranks", "context.host",
           "context.cuda_runtime", "context.cuda_driver", "context.backend")
#: Figures shown, in order.
FIGURES = ("step_time.median", "step_time.p90", "step_time.worst", "gpu.busy", "gpu.idle", "comm.share",
           "comm.overlap")
TOP = 3
#: Pressures this close (points of the span) are a tie the critical path breaks.
TIE = 10.0
#: Which pressure each part of the critical path stands for.
_PATH_BOUND = {"critical_path.cpu": "host", "critical_path.overhead": "host",
               "critical_path.communication": "communication", "critical_path.gpu_compute": "compute"}


def _get(facts: Mapping[str, Fact], fact_id: str, label: str) -> Fact:
    return facts.get(fact_id) or not_measured_fact(fact_id, label, "no input gives it")


def verdict(facts: Mapping[str, Fact], findings: Sequence[Finding]) -> Verdict:
    """The bound and 2–3 lines (module docstring)."""
    busy, idle = facts.get("gpu.busy"), facts.get("gpu.idle")
    if busy is None or idle is None or busy.number is None or idle.number is None:
        reason = busy.value.reason if busy is not None and isinstance(busy.value, NotMeasured) else \
            "no GPU activity in the inputs"
        lines = [f"Not measured: {reason}; the bound of the run needs a GPU timeline (a torch.profiler trace or an "
                 "nsys export with GPU activity)."]
        lines += _top_line(findings)
        return Verdict("not measured", tuple(lines), ())
    span_ms = busy.denominator_value or 0.0
    host_share = facts.get("gpu.idle_host_wait")
    host = idle.number * (host_share.number or 0.0) / 100.0 if host_share is not None else 0.0
    exposed = facts.get("comm.exposed")
    comm = 100.0 * (exposed.number or 0.0) / span_ms if exposed is not None and span_ms else 0.0
    copies = facts.get("memory.copy_share")
    memory = (copies.number or 0.0) * busy.number / 100.0 if copies is not None else 0.0
    compute_fact = facts.get("gpu.compute")
    compute = compute_fact.number or 0.0 if compute_fact is not None else 0.0
    pressures = {"host": host, "communication": comm, "memory": memory, "compute": compute}
    bound = max(pressures, key=lambda k: pressures[k])
    used = [idle.id, busy.id]
    runner_up = sorted(pressures, key=lambda k: -pressures[k])[1]
    path_bound, path_ids = _critical_path_bound(facts)
    if path_bound == runner_up and pressures[bound] - pressures[runner_up] <= TIE:
        bound = path_bound
        used += path_ids
    where = f" ({idle.aggregate})" if idle.aggregate else ""
    if bound == "host":
        short = facts.get("launch.short_kernels")
        line = (f"Host-bound{where}: the GPU was idle {idle.number:.0f}% of its {span_ms:,.0f} ms span, "
                f"{host_share.number if host_share else 0:.0f}% of that idle waiting for the host to launch work")
        if short is not None and short.number is not None:
            line += f"; {short.detail} ran shorter than their launch call"
            used.append(short.id)
        used += [host_share.id] if host_share else []
        waited = facts.get("idle.host_op")
        if waited is not None and waited.number is not None:
            line += f"; it waited longest under {waited.label.removeprefix('GPU waited on ')} ({waited.number:,.1f} ms)"
            used.append(waited.id)
        cpu_path = facts.get("critical_path.cpu")
        if cpu_path is not None and cpu_path.number is not None:
            line += f"; {cpu_path.number:.0f}% of the critical path is CPU work"
            used.append(cpu_path.id)
    elif bound == "communication":
        overlap = facts.get("comm.overlap")
        line = (f"Communication-bound{where}: {exposed.number if exposed else 0:,.0f} ms of communication ran with "
                f"no computation beside it ({comm:.0f}% of the {span_ms:,.0f} ms GPU span"
                + (f"; {overlap.number:.0f}% of communication overlapped)" if overlap and overlap.number is not None
                   else ")"))
        used += [f.id for f in (exposed, overlap) if f is not None]
        link = facts.get("comm.busbw_link")
        if link is not None and link.number is not None:
            line += f"; the slowest collective reached {link.number:.0f}% of its link ({link.detail})"
            used.append(link.id)
    elif bound == "memory":
        line = (f"Memory-transfer-bound{where}: copies and sets kept the GPU busy {memory:.0f}% of its "
                f"{span_ms:,.0f} ms span ({copies.number if copies else 0:.0f}% of its busy time)")
        used += [copies.id] if copies else []
    else:
        line = (f"Compute-bound{where}: a computation kernel ran {compute:.0f}% of the {span_ms:,.0f} ms GPU span "
                f"(idle {idle.number:.0f}%)")
        used += [compute_fact.id] if compute_fact else []
        mfu = facts.get("mfu")
        if mfu is not None and mfu.number is not None:
            line += f"; MFU {mfu.number:.0f}%"
            used.append(mfu.id)
    second = sorted((k for k in pressures if k != bound), key=lambda k: -pressures[k])[0]
    lines = [line]
    if pressures[second] >= 10.0:
        lines.append(f"Next: {second} ({pressures[second]:.0f}% of the span against {pressures[bound]:.0f}% "
                     f"for {bound}).")
    lines += _top_line(findings)
    return Verdict(bound, tuple(lines[:3]), tuple(used))


def _critical_path_bound(facts: Mapping[str, Fact]) -> tuple[str | None, list[str]]:
    """The pressure the critical path mostly is (over half of it), and the facts saying so."""
    shares: dict[str, float] = {}
    ids: dict[str, list[str]] = {}
    for fact_id, bound in _PATH_BOUND.items():
        f = facts.get(fact_id)
        if f is not None and f.number is not None:
            shares[bound] = shares.get(bound, 0.0) + f.number
            ids.setdefault(bound, []).append(fact_id)
    if not shares:
        return None, []
    best = max(shares, key=lambda k: shares[k])
    return (best, ids[best]) if shares[best] > 50.0 else (None, [])


def _top_line(findings: Sequence[Finding]) -> list[str]:
    top = [f for f in findings if f.category != "capture"][:TOP]
    if not top:
        return []
    return ["Fix first: " + "; ".join(f.title for f in top) + "."]


def build_headline(facts: Sequence[Fact], findings: Sequence[Finding], title: str) -> Headline:
    """The headline of a report whose findings are already ranked (largest impact first)."""
    by_id = {f.id: f for f in facts}
    context = tuple(_get(by_id, i, i.split(".", 1)[1].replace("_", " ")) for i in CONTEXT)
    figures = tuple(_get(by_id, i, i.replace("_", " ").replace(".", " ")) for i in FIGURES)
    top = tuple(f.id for f in findings if f.category != "capture")[:TOP]
    return Headline(title, context, figures, verdict(by_id, findings), top)
