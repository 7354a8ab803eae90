"""The Kineto facts of the diagnosis contract (HELPERS-CONTRACT.md), read from the report's ``kineto_*`` tables.

One function per fact family, each per rank (``:rank<r>``, ``:norank`` without a rank) and for the
run; a family the tables could have given but did not is a :class:`NotMeasured` fact with the
reason, never left out. Ids: ``critical_path.coverage``, ``kernels.top``, ``setup.share``,
``setup.idle``, ``setup.one_shot``, ``context.hosts``, ``stragglers.host``, ``stragglers.rank``
and ``comm.wait`` (a rank's time inside collectives spent waiting for a later rank).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]
_KERNEL_KINDS = ("computation", "communication")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _tag(rank: Any) -> str:
    return f":rank{rank}" if rank is not None else ":norank"


def _who(ranks: Sequence[Any]) -> str:
    known = [r for r in ranks if r is not None]
    if not known:
        return "the run (no rank)"
    return f"rank {known[0]}" if len(known) == 1 else "ranks " + ", ".join(map(str, known))


def _scopes(rows: Rows) -> list[tuple[str, list[Mapping[str, Any]], tuple[Any, ...], str]]:
    """(tag, rows, ranks, aggregate) per rank, then the run's when there are rows."""
    by: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(r.get("rank"), []).append(r)
    out = [(_tag(rank), rs, (rank,), _who([rank])) for rank, rs in by.items()]
    if by:
        ranks = tuple(by)
        out.append(("", [r for rs in by.values() for r in rs], ranks,
                    _who(ranks) if len(ranks) == 1 else f"sum over {_who(ranks)}"))
    return out


def coverage_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``critical_path.coverage``: the path's length over its window's, or why there is no path."""
    facts: list[Fact] = []
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_critical_path") or []):
        ev = tuple(EvidenceRow("kineto_critical_path", {"rank": r.get("rank")},
                               {"length_us": r.get("length_us"), "window_us": r.get("window_us"),
                                "window": r.get("window")}) for r in rows)
        empty = [r for r in rows if r.get("not_measured") or not (_num(r.get("length_us")) or 0.0) > 0]
        if empty:
            reason = "; ".join(f"{_who([r.get('rank')])}: {r.get('not_measured') or 'empty path'}" for r in empty)
            facts.append(Fact(f"critical_path.coverage{tag}", "critical path coverage of its window",
                              NotMeasured(reason), "%", "kineto", ranks=ranks, aggregate=aggregate, evidence=ev))
            continue
        length = sum(float(r["length_us"]) for r in rows)
        window = sum(_num(r.get("window_us")) or 0.0 for r in rows)
        if window <= 0:
            continue
        detail = "; ".join(f"path {float(r['length_us']) / 1e3:,.1f} ms of a {float(r['window_us']) / 1e3:,.1f} ms "
                           f"window ({r.get('window')})" for r in rows)
        facts.append(Fact(f"critical_path.coverage{tag}", "critical path coverage of its window",
                          100.0 * length / window, "%", "kineto", "the analysed window (a step by default)",
                          window / 1e3, "ms", ranks, aggregate, evidence=ev, detail=detail))
    return facts


def kernel_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``kernels.top``: the kernel with the largest share of kernel time (copies and sets left out)."""
    facts: list[Fact] = []
    kinds = [r for r in tables.get("kineto_kernel_kinds") or [] if r.get("kind") in _KERNEL_KINDS]
    top = [r for r in tables.get("kineto_top_kernels") or []
           if r.get("kind") in _KERNEL_KINDS and r.get("name") != "others"]
    ranks_seen: set[int] = {int(r["rank"]) for r in kinds if r.get("rank") is not None}
    scopes: list[tuple[str, Any]] = [(_tag(rank), rank) for rank in sorted(ranks_seen)]
    scopes.append(("", None if len(ranks_seen) != 1 else next(iter(ranks_seen))))
    for tag, rank in scopes:
        if not ranks_seen and tag:
            continue
        total = sum(float(r.get("total_us") or 0.0) for r in kinds if r.get("rank") == rank)
        candidates = [r for r in top if r.get("rank") == rank]
        who = _who([rank]) if rank is not None else f"sum over {_who(sorted(ranks_seen))}"
        if total <= 0 or not candidates:
            if total <= 0 and not kinds:
                continue
            facts.append(Fact(f"kernels.top{tag}", "largest kernel", NotMeasured("no kernel time in the traces"), "%",
                              "kineto", ranks=(rank,), aggregate=who))
            continue
        best = max(candidates, key=lambda r: (float(r.get("total_us") or 0.0), str(r.get("name"))))
        us = float(best.get("total_us") or 0.0)
        name = str(best.get("name"))
        facts.append(Fact(f"kernels.top{tag}", f"kernel time in {name}", 100.0 * us / total, "%", "kineto",
                          "all kernel time (computation and communication; copies and sets left out)", total / 1e3,
                          "ms", (rank,) if rank is not None else tuple(sorted(ranks_seen)), who,
                          evidence=(EvidenceRow("kineto_top_kernels", {"rank": rank, "name": name},
                                                {"total_us": us, "count": best.get("count")}),),
                          detail=f"{name}: {us / 1e3:,.1f} ms of {total / 1e3:,.1f} ms kernel time in "
                                 f"{int(best.get('count') or 0):,} launches"))
    return facts


def setup_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``setup.share``, ``setup.idle``, ``setup.one_shot`` from ``kineto_setup``."""
    facts: list[Fact] = []
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_setup") or []):
        ev = tuple(EvidenceRow("kineto_setup", {"rank": r.get("rank")},
                               {k: r.get(k) for k in ("setup_us", "capture_us", "setup_idle_us", "gpu_idle_us",
                                                      "one_shot")}) for r in rows)
        capture = sum(_num(r.get("capture_us")) or 0.0 for r in rows)
        setup = sum(_num(r.get("setup_us")) or 0.0 for r in rows)
        detail = "; ".join(f"{_who([r.get('rank')])}: {r.get('detail')}" for r in rows) if len(rows) > 1 \
            else str(rows[0].get("detail") or "")
        if capture > 0:
            facts.append(Fact(f"setup.share{tag}", "one-off work (setup)", 100.0 * setup / capture, "%", "kineto",
                              "capture span (first to last event)", capture / 1e3, "ms", ranks, aggregate,
                              evidence=ev, detail=detail))
        else:
            facts.append(Fact(f"setup.share{tag}", "one-off work (setup)", NotMeasured("the trace holds no events"),
                              "%", "kineto", ranks=ranks, aggregate=aggregate, evidence=ev))
        idle = sum(_num(r.get("gpu_idle_us")) or 0.0 for r in rows)
        inside = sum(_num(r.get("setup_idle_us")) or 0.0 for r in rows)
        has_gpu = any((_num(r.get("gpu_span_us")) or 0.0) > 0 for r in rows)
        facts.append(Fact(f"setup.idle{tag}", "GPU idle inside one-off work",
                          inside / 1e3 if has_gpu else NotMeasured("the traces hold no GPU activity"), "ms", "kineto",
                          "device-level GPU idle (span minus busy union)" if has_gpu else "",
                          idle / 1e3 if has_gpu else None, "ms" if has_gpu else "", ranks, aggregate, evidence=ev,
                          detail=f"{inside / 1e3:,.1f} ms of {idle / 1e3:,.1f} ms idle" if has_gpu else ""))
        shots = [r.get("one_shot") for r in rows]
        why = "; ".join(f"{_who([r.get('rank')])}: {r.get('one_shot_reason')}" for r in rows) if len(rows) > 1 \
            else str(rows[0].get("one_shot_reason") or "")
        value: int | NotMeasured = NotMeasured(why) if any(s is None for s in shots) else int(all(s == 1 for s in shots))
        facts.append(Fact(f"setup.one_shot{tag}", "no repeated work to judge", value, "count", "kineto", ranks=ranks,
                          aggregate=aggregate + (" (1 only when every rank is)" if len(rows) > 1 else ""),
                          evidence=ev, detail=why))
    return facts


def host_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``context.hosts``, ``stragglers.host`` or ``stragglers.rank``, and ``comm.wait`` per rank."""
    facts: list[Fact] = []
    contexts = [c for c in tables.get("kineto_context") or [] if isinstance(c, Mapping)]
    if contexts:
        hosts = {c.get("host") for c in contexts}
        sources = sorted({str(c.get("host_source")) for c in contexts if c.get("host_source")})
        if len(contexts) == 1 and None in hosts:
            facts.append(Fact("context.hosts", "hosts", 1, "count", "kineto", aggregate="one trace: one host",
                              detail="one trace, one process"))
        elif None in hosts:
            unknown = [c.get("rank") for c in contexts if c.get("host") is None]
            facts.append(Fact("context.hosts", "hosts", NotMeasured(
                f"no host recorded for {_who(unknown)} (no host_name in the trace, no tensorboard_trace_handler "
                "file name)"), "count", "kineto"))
        else:
            named = sorted(str(h) for h in hosts)
            facts.append(Fact("context.hosts", "hosts", len(named), "count", ", ".join(sources), aggregate=_who(
                [c.get("rank") for c in contexts]), detail=", ".join(named)))
    arrivals = list(tables.get("kineto_host_arrivals") or [])
    late_host = next((r for r in arrivals if r.get("straggler")), None)
    if late_host is not None:
        spreads = "; ".join(f"{r.get('host')} (ranks {r.get('ranks')}): {float(r.get('mean_lag_us') or 0) / 1e3:,.2f} ms "
                            f"behind, spread {float(r.get('mean_spread_us') or 0) / 1e3:,.2f} ms inside"
                            for r in arrivals)
        facts.append(Fact("stragglers.host", f"host {late_host.get('host')} arrives late at collectives",
                          float(late_host.get("mean_lag_us") or 0.0) / 1e3, "ms", "kineto",
                          ranks=tuple(int(x) for x in str(late_host.get("ranks")).split(", ") if x.isdigit()),
                          aggregate=f"mean over {late_host.get('collectives')} collectives; clocks of different hosts "
                                    "are not synchronised",
                          evidence=tuple(EvidenceRow("kineto_host_arrivals", {"host": r.get("host")},
                                                     {"mean_lag_us": r.get("mean_lag_us"),
                                                      "mean_spread_us": r.get("mean_spread_us")}) for r in arrivals),
                          detail=spreads))
    waits = [r for r in tables.get("kineto_collective_wait") or [] if r.get("step") is None]
    regions = list(tables.get("kineto_collective_wait_regions") or [])
    for r in waits:
        comm = _num(r.get("comm_us")) or 0.0
        if comm <= 0:
            continue
        wait = _num(r.get("wait_us")) or 0.0
        waited_for = r.get("waited_for")
        mine = [g for g in regions if g.get("rank") == r.get("rank") and (_num(g.get("wait_us")) or 0.0) > 0]
        where = max(mine, key=lambda g: float(g["wait_us"])) if mine else None
        inside = f"; most of it under {where.get('region')} ({float(where['wait_us']) / 1e3:,.1f} ms of its " \
                 f"{float(where.get('comm_us') or 0.0) / 1e3:,.1f} ms in collectives)" if where is not None else ""
        facts.append(Fact(f"comm.wait{_tag(r.get('rank'))}", "time inside collectives waiting for a later rank",
                          wait / 1e3, "ms", "kineto", "communication kernel time", comm / 1e3, "ms",
                          (r.get("rank"),), _who([r.get("rank")]) + f", {r.get('collectives')} collectives matched "
                                                                     "across the ranks analysed",
                          evidence=(EvidenceRow("kineto_collective_wait", {"rank": r.get("rank"), "step": None},
                                                {"wait_us": wait, "working_us": r.get("working_us"),
                                                 "waited_for": waited_for}),),
                          detail=(f"waiting {wait / 1e3:,.1f} ms (mostly for rank {waited_for}), working "
                                  f"{(comm - wait) / 1e3:,.1f} ms{inside}" if waited_for is not None
                                  else f"never waited; working {comm / 1e3:,.1f} ms")))
    if late_host is None and len(waits) >= 2:
        facts.extend(_rank_straggler(waits))
    return facts


def _rank_straggler(waits: Sequence[Mapping[str, Any]]) -> list[Fact]:
    """``stragglers.rank``: the rank that arrives last most often, when its lateness stands out from its host's."""
    last = max(waits, key=lambda r: (int(r.get("last_count") or 0), float(r.get("mean_lateness_us") or 0.0)))
    mates = [r for r in waits if r is not last and r.get("host") == last.get("host")]
    others = [float(r.get("mean_lateness_us") or 0.0) for r in mates] or [0.0]
    own = float(last.get("mean_lateness_us") or 0.0)
    if own <= 2.0 * max(others) or int(last.get("last_count") or 0) * 2 <= int(last.get("collectives") or 0):
        return []
    host = last.get("host")
    return [Fact("stragglers.rank", f"rank {last.get('rank')} arrives last at collectives", own / 1e3, "ms", "kineto",
                 ranks=(last.get("rank"),),
                 aggregate=f"mean lateness over {last.get('collectives')} collectives, among the {len(waits)} ranks "
                           "analysed" + (f"; on host {host}" if host else " (hosts not recorded)"),
                 evidence=tuple(EvidenceRow("kineto_collective_wait", {"rank": r.get("rank"), "step": None},
                                            {"last_count": r.get("last_count"),
                                             "mean_lateness_us": r.get("mean_lateness_us")}) for r in waits),
                 detail=f"last in {last.get('last_count')} of {last.get('collectives')} collectives, "
                        f"{own / 1e3:,.2f} ms after the first rank on average")]


def contract_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """Every fact of this module (module docstring)."""
    return coverage_facts(tables) + kernel_facts(tables) + setup_facts(tables) + host_facts(tables)
