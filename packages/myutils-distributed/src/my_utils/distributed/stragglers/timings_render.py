"""A ``TimingsReport`` as text for people (``myutils stragglers`` on Kineto traces / nsys exports)."""

from __future__ import annotations

from my_utils.distributed.stragglers.render import shown, table_lines
from my_utils.distributed.stragglers.timings import HOST_FACTOR
from my_utils.distributed.stragglers.timings_model import CollectiveStats, TimingsReport

__all__ = ["render_timings"]

#: Collective occurrences listed (the largest lags); the JSON keeps more.
SHOWN_OCCURRENCES = 5


def _host(host: str | None) -> str:
    return shown(host) if host is not None else "-"


def render_timings(report: TimingsReport) -> str:
    """The ranks and their files, the step analysis, the collective arrivals by host and rank, then the verdict."""
    ranks = report.ranks
    kinds = sorted({r.kind for r in ranks})
    hosts: dict[str, list[int]] = {}
    for r in ranks:
        if r.host is not None:
            hosts.setdefault(r.host, []).append(r.rank)
    where = (f" on {len(hosts)} host(s) ({'; '.join(f'{shown(h)}: ' + ', '.join(map(str, rs)) for h, rs in hosts.items())})"
             if hosts and all(r.host is not None for r in ranks) else " (hosts not recorded in every file)")
    lines = [f"{len(ranks)} ranks ({ranks[0].rank}..{ranks[-1].rank}) from {' and '.join(kinds)} files{where}"]
    lines += [f"clock: {c}" for c in report.clocks]
    lines.append("")
    lines += _steps(report)
    lines.append("")
    lines += _collectives(report)
    for note in report.notes:
        lines.append(f"note: {shown(note)}")
    return "\n".join(lines)


def _steps(report: TimingsReport) -> list[str]:
    s = report.steps
    head = f"steps ({report.step_source}):"
    if s is None and all(r.steps == 0 for r in report.ranks):
        return [f"steps: {report.steps_note}"]
    if s is None:
        return [f"{head} {report.steps_note}"]
    host = {r.rank: r.host for r in report.ranks}
    lines = [f"{head} {s.steps} compared of {s.seen_steps} seen; per rank its median step time: min {s.min.ms:.3f} ms "
             f"(r{s.min.rank}), median {s.median.ms:.3f} ms, max {s.max.ms:.3f} ms (r{s.max.rank}); slowest rank "
             f"r{s.slowest_rank} at {s.slowdown:.2f}x the other ranks' median, late (>= {report.min_slowdown:.2f}x) "
             f"on {s.late_steps} of {s.steps} steps"]
    if s.straggler is not None:
        where = f" on host {shown(h)}" if (h := host.get(s.straggler)) else ""
        lines.append(f"  straggler: rank {s.straggler}{where} (+{s.slowest_excess_ms:.3f} ms per step; chance of as "
                     f"many late steps p = {s.sign_test_p:.3g})")
    else:
        lines.append(f"  no persistent straggler in step times (no rank at >= {report.min_slowdown:.2f}x the others' "
                     f"median in >= {report.persistent_fraction:.0%} of steps, more often than chance)")
    for o in s.outliers[:SHOWN_OCCURRENCES]:
        lines.append(f"  outlying step {o.step}: rank {o.rank} {o.ms:.3f} ms against {o.reference_ms:.3f} ms")
    if report.steps_note:
        lines.append(f"  {report.steps_note}")
    return lines


def _collectives(report: TimingsReport) -> list[str]:
    c = report.collectives
    if c is None:
        return [f"collective arrivals: {report.collectives_note}"]
    kinds = ", ".join(f"{shown(n)} x{k}" for n, k in sorted(c.names.items(), key=lambda kv: -kv[1])[:5])
    lines = [f"collective arrivals: {c.occurrences} occurrence(s) matched on 2+ ranks ({kinds})"
             + (f"; {c.unmatched} seen on one rank only" if c.unmatched else "")]
    if c.per_host:
        rows: list[tuple[str, ...]] = [("host", "ranks", "last", "lag ms", "separation ms", "spread ms", "setup end lag ms")]
        for h in c.per_host:
            rows.append((shown(h.host), ", ".join(map(str, h.ranks)), f"{h.late}/{h.occurrences}", f"{h.lag_ms:+.3f}",
                         f"{h.separation_ms:+.3f}", f"{h.spread_ms:.3f}",
                         "-" if h.setup_end_lag_ms is None else f"{h.setup_end_lag_ms:+.3f}"))
        lines += ["  " + line for line in table_lines(rows)]
        lines.append("  lag: the host's median arrival minus the other hosts' ranks' (median over occurrences); "
                     "separation: its first rank minus the others' last (least over occurrences); spread: its own "
                     "ranks' last minus first (largest)")
    rank_rows: list[tuple[str, ...]] = [("rank", "host", "last", "late ms", "waits ms")]
    for r in c.per_rank:
        rank_rows.append((str(r.rank), _host(r.host), f"{r.last}/{r.occurrences}", f"{r.late_ms:+.3f}",
                          f"{r.wait_ms:.3f}"))
    lines += ["  " + line for line in table_lines(rank_rows)]
    lines.append("  late: the rank's arrival minus the other ranks' median; waits: the last arrival minus its own "
                 "(time inside the collective waiting for the last rank); medians over occurrences")
    for o in c.worst[:SHOWN_OCCURRENCES]:
        at = f" in step {o.step}" if o.step is not None else ""
        lines.append(f"  {shown(o.name)} #{o.seq}{at}: last rank {o.last_rank}"
                     f"{f' ({_host(o.last_host)})' if o.last_host else ''}, {o.lag_ms:.3f} ms after the first, "
                     f"{o.behind_ms:.3f} ms after the others' median")
    lines.append(_verdict(c, report))
    return lines


def _verdict(c: CollectiveStats, report: TimingsReport) -> str:
    many = c.occurrences >= 3
    caveat = "" if many else f" {report.collectives_note}."
    if c.late_host is not None:
        h = next(x for x in c.per_host if x.host == c.late_host)
        others = [x for x in c.per_host if x.host != c.late_host]
        spread = max(x.spread_ms for x in c.per_host)
        setup = (f"; its communicator setup ended {h.setup_end_lag_ms:.3f} ms after the other hosts'"
                 if h.setup_end_lag_ms is not None and h.setup_end_lag_ms > 0 else "")
        held = (f"last on {h.late} of {h.occurrences} occurrences (chance p = {c.sign_test_p:.3g}), persistent"
                if c.persistent else f"last on {h.late} of {h.occurrences}")
        return (f"late host: {shown(h.host)} (ranks {', '.join(map(str, h.ranks))}): its ranks arrive {h.lag_ms:.3f} ms "
                f"after the other hosts' (median), each after every rank of "
                f"{', '.join(shown(x.host) for x in others)} by >= {h.separation_ms:.3f} ms, while the ranks of one "
                f"host differ by <= {spread:.3f} ms (< 1/{HOST_FACTOR:g} of that){setup}; the other hosts' ranks wait "
                f"for it inside the collective; {held}. The host is late, not one of its ranks.{caveat}")
    if c.late_rank is not None:
        r = next(x for x in c.per_rank if x.rank == c.late_rank)
        where = f" on host {shown(r.host)}" if r.host else ""
        held = (f"last on {r.last} of {r.occurrences} occurrences (chance p = {c.sign_test_p:.3g}), persistent"
                if c.persistent else f"last on {r.last} of {r.occurrences}")
        return (f"late rank: {r.rank}{where}, {r.late_ms:.3f} ms after the other ranks' median arrival; {held}."
                f"{caveat}")
    if many:
        return (f"no persistent late rank or host at the collectives (none last in >= "
                f"{report.persistent_fraction:.0%} of occurrences more often than chance, by >= 0.1 ms)")
    return f"no rank or host stands apart at the collectives.{caveat}"
