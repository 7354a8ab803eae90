"""The verdict: what the run is (``model.report.BOUNDS``), in 2–3 lines with the facts behind it.

Capture validity comes first (``diagnosis/CASES.md``, principle 1), then the bound:

1. ``cpu``: ``context.cpu_only`` is 1 (a trace or export that would show GPU work holds none);
2. ``setup``: one-off work fills the capture (``setup.share`` ≥ :data:`SETUP_SHARE` % of what it
   states, or ``setup.one_shot`` is 1: no repeated work); the line says what the setup was, and
   no launch-overhead fix applies;
3. ``not measured``: no GPU timeline;
4. otherwise four pressures, each a share of the GPU span (the run's facts, without ``:rank``):
   *host* — idle time waiting for the host to launch work (``gpu.idle`` × ``gpu.idle_host_wait``,
   a share of the *span*, never of the idle alone, less the idle inside one-off work, ``setup.idle``);
   *communication* — communication not under
   computation; *memory* — copy/set busy time; *compute* — time with a computation kernel running.
   The largest names the bound. When the two largest are within :data:`TIE` points and the
   critical path covers the step (``critical_path.coverage`` ≥ :data:`PATH_COVERAGE` %) and is
   mostly one of them, the path decides.

The first line starts with a keyword an automatic check can read (:data:`KEYWORDS`). The path is
quoted only when it covers the step; otherwise its coverage is stated instead. On a compute-bound
run the kernel with the largest share of kernel time (``kernels.top``) is named in the first line, and
the GPU-time mix by operator category (``gpu.mix``), saying when elementwise kernels and copies
outweigh the GEMMs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from my_utils.profiling.analysis.nsight.advice import short_kernel
from my_utils.profiling.analysis.severity import WARNING_SHARE
from my_utils.profiling.model.report import Fact, Finding, NotMeasured, Verdict

#: The first word(s) of each verdict class's first line.
KEYWORDS: dict[str, str] = {"setup": "Setup-dominated", "host": "Host-bound", "communication": "Communication-bound",
                            "memory": "Memory-transfer-bound", "compute": "Compute-bound", "cpu": "CPU-only",
                            "not measured": "Not measured"}
#: ``setup.share`` at or above this (% of what it states) makes the capture setup-dominated.
SETUP_SHARE = 50.0
#: Pressures this close (points of the span) are a tie the critical path breaks.
TIE = 10.0
#: The critical path is quoted (and breaks ties) only when it covers at least this % of its window.
PATH_COVERAGE = 90.0
#: Which pressure each part of the critical path stands for.
_PATH_BOUND = {"critical_path.cpu": "host", "critical_path.overhead": "host",
               "critical_path.communication": "communication", "critical_path.gpu_compute": "compute"}


def pressures(facts: Mapping[str, Fact]) -> dict[str, float] | None:
    """The four pressures as % of the GPU span (module docstring); None without a GPU timeline."""
    busy, idle = facts.get("gpu.busy"), facts.get("gpu.idle")
    if busy is None or idle is None or busy.number is None or idle.number is None:
        return None
    span_ms = busy.denominator_value or 0.0
    host_share = facts.get("gpu.idle_host_wait")
    # a share of the span: idle% × (host-wait share of the idle); the idle share alone would call a
    # compute-bound run with a little, mostly host-wait idle "host-bound"
    host = idle.number * (host_share.number or 0.0) / 100.0 if host_share is not None else 0.0
    # principle 1: idle inside one-off work (setup.idle, a part of the idle) is no launch overhead; it is
    # taken out as a share of the idle, so the facts' aggregation over ranks and devices need not match
    in_setup = facts.get("setup.idle")
    if host and in_setup is not None and in_setup.number is not None and in_setup.denominator_value:
        setup_pct_of_span = idle.number * min(in_setup.number / in_setup.denominator_value, 1.0)
        host = max(host - setup_pct_of_span, 0.0)
    exposed = facts.get("comm.exposed")
    comm = 100.0 * (exposed.number or 0.0) / span_ms if exposed is not None and span_ms else 0.0
    copies = facts.get("memory.copy_share")
    memory = (copies.number or 0.0) * busy.number / 100.0 if copies is not None else 0.0
    compute_fact = facts.get("gpu.compute")
    compute = (compute_fact.number or 0.0) if compute_fact is not None else 0.0
    return {"host": host, "communication": comm, "memory": memory, "compute": compute}


def _setup_idle_left_out(facts: Mapping[str, Fact], used: list[str]) -> str:
    """", idle inside setup left out" when :func:`pressures` took setup idle out of the host pressure."""
    in_setup = facts.get("setup.idle")
    if in_setup is None or not in_setup.number:
        return ""
    used.append(in_setup.id)
    return f", {in_setup.number:,.1f} ms of idle inside setup left out"


def setup_dominated(facts: Mapping[str, Fact]) -> bool:
    """``setup.share`` ≥ :data:`SETUP_SHARE` or ``setup.one_shot`` = 1."""
    share, one_shot = facts.get("setup.share"), facts.get("setup.one_shot")
    return (share is not None and share.number is not None and share.number >= SETUP_SHARE) or (
        one_shot is not None and one_shot.number is not None and one_shot.number >= 1)


def classify(facts: Mapping[str, Fact]) -> str:
    """The verdict class alone (one of ``BOUNDS``)."""
    return _classify(facts)[0]


def _classify(facts: Mapping[str, Fact]) -> tuple[str, dict[str, float] | None, list[str]]:
    cpu = facts.get("context.cpu_only")
    if cpu is not None and cpu.number == 1:
        return "cpu", None, [cpu.id]
    if setup_dominated(facts):
        return "setup", pressures(facts), [i for i in ("setup.share", "setup.one_shot") if i in facts]
    p = pressures(facts)
    if p is None:
        return "not measured", None, []
    bound = max(p, key=lambda k: p[k])
    runner_up = sorted(p, key=lambda k: -p[k])[1]
    path_bound, path_ids = _critical_path_bound(facts)
    if path_bound == runner_up and p[bound] - p[runner_up] <= TIE:
        return path_bound, p, path_ids
    return bound, p, []


def path_covers(facts: Mapping[str, Fact]) -> bool:
    """Whether the critical path covers its window (``critical_path.coverage`` ≥ :data:`PATH_COVERAGE`)."""
    cover = facts.get("critical_path.coverage")
    return cover is not None and cover.number is not None and cover.number >= PATH_COVERAGE


def _critical_path_bound(facts: Mapping[str, Fact]) -> tuple[str | None, list[str]]:
    """The pressure a covering critical path mostly is (over half of it), and the facts saying so."""
    if not path_covers(facts):
        return None, []
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
    return (best, [*ids[best], "critical_path.coverage"]) if shares[best] > 50.0 else (None, [])


def _path_text(facts: Mapping[str, Fact], used: list[str]) -> str:
    """The critical path's CPU share when the path covers the step; its coverage otherwise; "" without a path."""
    cpu_path = facts.get("critical_path.cpu")
    cover = facts.get("critical_path.coverage")
    if cover is None or cpu_path is None or cpu_path.number is None:
        return ""
    if path_covers(facts):
        used += [cpu_path.id, cover.id]
        return f"; {cpu_path.number:.0f}% of the critical path is CPU work"
    if cover.number is None:
        reason = cover.value.reason if isinstance(cover.value, NotMeasured) else "not measured"
        return f"; no critical path quoted ({reason})"
    used.append(cover.id)
    return (f"; the critical path (path {_ms(cover.number * (cover.denominator_value or 0.0) / 100.0)} of a "
            f"{_ms(cover.denominator_value)} step) does not cover the step, so it is not quoted")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f} ms"


def verdict(facts: Mapping[str, Fact], findings: Sequence[Finding] = (), top: Sequence[Finding] | None = None) -> Verdict:
    """The verdict of the run (module docstring); ``top``: the findings to fix first (default: the first
    three of ``findings`` that state a saving of at least 1% of the step; capture checks and breakdowns left out)."""
    bound, p, used = _classify(facts)
    lines = [_first_line(bound, p, facts, used)]
    if p is not None and bound in p:
        second = sorted((k for k in p if k != bound), key=lambda k: -p[k])[0]
        if p[second] >= 10.0:
            lines.append(f"Next: {second} ({p[second]:.0f}% of the span against {p[bound]:.0f}% for {bound}).")
    elif bound == "setup":
        outside = _outside_setup(facts, used)
        if outside:
            lines.append(outside)
    lines += fix_first_line(fix_first(findings) if top is None else top)
    return Verdict(bound, tuple(lines[:3]), tuple(dict.fromkeys(used)))


def _first_line(bound: str, p: Mapping[str, float] | None, facts: Mapping[str, Fact], used: list[str]) -> str:
    idle, busy = facts.get("gpu.idle"), facts.get("gpu.busy")
    where = f" ({idle.aggregate})" if idle is not None and idle.aggregate else ""
    span_ms = (busy.denominator_value or 0.0) if busy is not None else 0.0
    if bound == "cpu":
        cpu = facts["context.cpu_only"]
        median = facts.get("step_time.median")
        step = (f"; the step ({median.number:,.2f} ms median over {median.steps} steps) and its variability are the "
                f"host's (scheduler, garbage collector, other processes)"
                if median is not None and median.number is not None else "")
        return f"CPU-only run: {cpu.detail or 'no GPU activity and no GPU device in the inputs'}{step}; GPU advice " \
               "does not apply."
    if bound == "setup":
        return _setup_line(facts)
    if bound == "not measured" or p is None or idle is None or busy is None:
        reason = busy.value.reason if busy is not None and isinstance(busy.value, NotMeasured) else \
            "no GPU activity in the inputs"
        return (f"Not measured: {reason}; the bound of the run needs a GPU timeline (a torch.profiler trace or an "
                "nsys export with GPU activity).")
    used += [idle.id, busy.id]
    if bound == "host":
        host_share = facts.get("gpu.idle_host_wait")
        line = (f"Host-bound{where}: the GPU was idle {idle.number:.0f}% of its {span_ms:,.0f} ms span, "
                f"{host_share.number if host_share else 0:.0f}% of that idle waiting for the host to launch work "
                f"({p['host']:.0f}% of the span{_setup_idle_left_out(facts, used)})")
        used += [host_share.id] if host_share else []
        short = facts.get("launch.short_kernels")
        if short is not None and short.number:
            line += f"; {short.detail} ran shorter than their launch call"
            used.append(short.id)
        waited = facts.get("idle.host_op")
        if waited is not None and waited.number is not None:
            line += f"; it waited longest under {waited.label.removeprefix('GPU waited on ')} ({waited.number:,.1f} ms)"
            used.append(waited.id)
        return line + _path_text(facts, used)
    if bound == "communication":
        exposed, overlap = facts.get("comm.exposed"), facts.get("comm.overlap")
        line = (f"Communication-bound{where}: {exposed.number if exposed else 0:,.0f} ms of communication ran with "
                f"no computation beside it ({p['communication']:.0f}% of the {span_ms:,.0f} ms GPU span"
                + (f"; {overlap.number:.0f}% of communication overlapped)" if overlap and overlap.number is not None
                   else ")"))
        used += [f.id for f in (exposed, overlap) if f is not None]
        link = facts.get("comm.busbw_link")
        if link is not None and link.number is not None:
            line += f"; the slowest collective reached {link.number:.0f}% of its link ({link.detail})"
            used.append(link.id)
        return line
    if bound == "memory":
        copies = facts.get("memory.copy_share")
        used += [copies.id] if copies else []
        return (f"Memory-transfer-bound{where}: copies and sets kept the GPU busy {p['memory']:.0f}% of its "
                f"{span_ms:,.0f} ms span ({copies.number if copies else 0:.0f}% of its busy time)")
    compute_fact = facts.get("gpu.compute")
    line = (f"Compute-bound{where}: a computation kernel ran {p['compute']:.0f}% of the {span_ms:,.0f} ms GPU span "
            f"(idle {idle.number:.0f}%)")
    used += [compute_fact.id] if compute_fact else []
    top = facts.get("kernels.top")
    if top is not None and top.number is not None:
        name = short_kernel(top.label.removeprefix("kernel time in "))
        line += f"; {name} takes {top.number:.0f}% of kernel time" + (f" ({top.detail})" if top.detail else "")
        used.append(top.id)
    mfu = facts.get("mfu")
    if mfu is not None and mfu.number is not None:
        line += f"; MFU {mfu.number:.0f}%"
        used.append(mfu.id)
    return line + _mix_text(facts, used)


def _mix_text(facts: Mapping[str, Fact], used: list[str]) -> str:
    """"; GPU time: 31% elementwise and copies, 23% GEMM, ..." (``gpu.mix``), saying when elementwise kernels and
    copies outweigh the GEMMs: a compute-bound verdict must not read as "the matrix units are the limit" then."""
    mix, gemm = facts.get("gpu.mix"), facts.get("gpu.gemm_share")
    if mix is None or not mix.detail:
        return ""
    used.append(mix.id)
    text = f"; GPU time: {mix.detail}"
    if gemm is not None and mix.number is not None and gemm.number is not None and mix.number > gemm.number:
        used.append(gemm.id)
        text += (f" (elementwise kernels and copies outweigh the GEMMs: {mix.number:.0f}% against "
                 f"{gemm.number:.0f}%)")
    return text


def _setup_line(facts: Mapping[str, Fact]) -> str:
    share, one_shot = facts.get("setup.share"), facts.get("setup.one_shot")
    parts = []
    if share is not None and share.number is not None:
        # the denominator's full definition is on the fact (and in the JSON); the line names it in two words
        words = (share.denominator or "").lower()
        whole = "the capture" if "capture" in words or not words else "the GPU span" if "gpu span" in words else \
            share.denominator
        if share.denominator_value and " ms of " not in share.detail:  # the detail states its own totals
            whole += f" ({share.denominator_value:,.0f} ms)"
        parts.append(f"one-off work took {share.number:.0f}% of {whole}" + (f" ({share.detail})" if share.detail
                                                                              else ""))
    if one_shot is not None and one_shot.number is not None and one_shot.number >= 1:
        parts.append("no repeated work to judge" + (f" ({one_shot.detail})" if one_shot.detail else ""))
    return ("Setup-dominated, no steady state to judge: " + "; ".join(parts)
            + ". Nothing here is saved by launching work faster.")


def _outside_setup(facts: Mapping[str, Fact], used: list[str]) -> str:
    """What ran outside setup: the kernel with the most kernel time, and the GPU's busy time."""
    bits = []
    top = facts.get("kernels.top")
    if top is not None and top.number is not None:
        bits.append(f"{short_kernel(top.label.removeprefix('kernel time in '))} took {top.number:.0f}% of kernel time"
                    + (f" ({top.detail})" if top.detail else ""))
        used.append(top.id)
    busy = facts.get("gpu.busy")
    if busy is not None and busy.number is not None:
        bits.append(f"the GPU was busy {busy.number:.1f}% of its {busy.denominator_value or 0:,.0f} ms span")
        used.append(busy.id)
    return ("Besides setup: " + "; ".join(bits) + ".") if bits else ""


def states_saving(f: Finding) -> bool:
    """Whether a finding states a saving worth fixing first: at least :data:`~.severity.WARNING_SHARE` of the step
    (a breakdown, a verdict restated, a capture check or a saving too small to matter does not)."""
    share = f.impact.share_of_step
    return f.category != "capture" and not f.impact.breakdown and share is not None and share >= WARNING_SHARE


def fix_first(findings: Sequence[Finding], n: int = 3) -> list[Finding]:
    """The findings to fix first: the first ``n`` (ranked) that state a saving worth it, and any tied with the last."""
    savers = [f for f in findings if states_saving(f)]
    top = savers[:n]
    if top and len(savers) > n:
        last = top[-1].impact.rank_value
        top += [f for f in savers[n:] if tied(f.impact.rank_value, last)]
    return top


#: Two savings this close (a share of the step) are a tie: they read the same at the report's precision.
TIE_SHARE = 0.0005


def tied(a: float, b: float) -> bool:
    """Whether two savings read the same (within :data:`TIE_SHARE`)."""
    return abs(a - b) <= TIE_SHARE


def fix_first_line(top: Sequence[Finding]) -> list[str]:
    """``Fix first: a; b (a tie); c.`` — nothing when no finding states a saving."""
    if not top:
        return []
    parts = []
    for i, f in enumerate(top):
        tie = any(tied(f.impact.rank_value, g.impact.rank_value) for j, g in enumerate(top) if j != i)
        parts.append(f.title + (" (a tie)" if tie else ""))
    return ["Fix first: " + "; ".join(parts) + "."]
