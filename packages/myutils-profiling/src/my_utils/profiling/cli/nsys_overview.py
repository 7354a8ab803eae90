"""What ``nsys summary`` prints first for a run of several ranks: one row per rank, then what holds across them.

A screen, not a dump: the ranks' table (``nsys.overview``), the run's one-off work
(``setup.share``), the kernel with the most time, NCCL across ranks (a late host before a late
rank), and what could not be measured, each said once with how many exports it concerns.
Every figure comes from the analysis; each export's own tables are behind ``--detail``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from my_utils.profiling.reports.formatting import counted

if TYPE_CHECKING:
    from my_utils.profiling.nsys.run import RunSummary

RANK_WORDS = {"file order": "numbered by file order: no rank in the file names",
              "file name": "from the file names", "none": "not recorded"}


def _ranks_line(run: RunSummary) -> str:
    exports = len(run.exports)
    sources = sorted({i.rank_source for i in run.inputs})
    ranks = len(run.nccl.participants) if run.nccl is not None and exports == 1 else exports
    how = "; ".join(RANK_WORDS.get(x, f"from the launch environment ({x.removeprefix('environment ')})"
                                   if x.startswith("environment ") else f"from the {x}") for x in sources)
    if exports == 1:
        how = "one export holding them, numbered by device"
    hosts = sorted({s.host for s in run.exports if s.host})
    where = (f" on {counted(len(hosts), 'host')} ({', '.join(hosts)})" if hosts and len(hosts) == len({s.host for s in
                                                                                              run.exports})
             else " (hosts not recorded)")
    versions = ", ".join(sorted({s.meta.era for s in run.exports}))
    gpus = ", ".join(sorted({g.name for s in run.exports for g in s.gpus
                             if g.device in set(s.table("nsys_busy_device").column("device") or [])}))
    return (f"== {counted(exports, 'export')}, {counted(ranks, 'rank')} ({how}){where}; nsys {versions}; "
            f"GPUs: {gpus or 'not recorded'}")


def _not_measured(run: RunSummary) -> list[str]:
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for s in run.exports:
        for topic, why in s.not_measured.items():
            seen[(topic, why)] += 1
    n = len(run.exports)
    return [f"  {topic} ({count} of {counted(n, 'export')}): {why}" for (topic, why), count in sorted(seen.items())]


def render_overview(run: RunSummary) -> str:
    """The overview of a multi-rank run (module docstring)."""
    from my_utils.profiling.analysis.nsight.analyze import nsys_tables
    from my_utils.profiling.analysis.nsight.facts import run_facts
    from my_utils.profiling.nsys.render import text_table

    tables = run.tables()
    overview = tables["nsys_rank_overview"]
    facts = {f.id: f for f in run_facts(nsys_tables(run))}
    parts = [_ranks_line(run), text_table(overview.columns, overview.rows, title="one row per rank (device)")]
    lines = []
    share = facts.get("setup.share")
    if share is not None and share.number is not None:
        lines.append(f"setup: {share.number:.0f}% of the capture is one-off work ({share.detail})"
                     if share.number >= 0.5 else "setup: no one-off work found in the capture")
    shot = facts.get("setup.one_shot")
    if shot is not None and shot.number == 1:
        lines.append(f"one-shot: {shot.detail}: no steady state to judge")
    top = facts.get("kernels.top")
    if top is not None and top.number is not None:
        lines.append(f"top kernel: {top.detail}, {top.number:.0f}% of all kernel time")
    a = run.nccl
    if a is not None:
        lines.append(f"NCCL across {counted(len(a.participants), 'rank')}: "
                     f"{counted(a.collectives, 'collective')} matched"
                     + ("" if a.aligned else " (no UTC clock anchor: arrival order not measured)"))
        host = next((f for f in a.facts() if f.id == "stragglers.host"), None)
        if host is not None and host.measured:
            lines.append(f"  {host.label}: {host.value:,.1f} ms ({host.detail})")
        else:
            for f in a.facts():
                if f.id.startswith("nsys.nccl_last_rank") and f.measured:
                    lines.append(f"  {f.label}: rank {f.value} ({f.detail})")
                elif f.id.startswith("nsys.nccl_wait") and f.measured and isinstance(f.value, (int, float)):
                    lines.append(f"  {f.label}: {f.value:.1f}% of their time")
        for f in a.facts():
            if f.id.startswith("nsys.nccl_busbw"):
                lines.append(f"  {f.label}: " + (f"{f.value:,.1f} {f.unit}" if f.measured
                                                 else f"not measured ({f.not_measured})"))
    missing = _not_measured(run)
    if missing:
        lines.append("not measured:")
        lines += missing
    return "\n\n".join(parts) + ("\n\n" + "\n".join(lines) if lines else "")
