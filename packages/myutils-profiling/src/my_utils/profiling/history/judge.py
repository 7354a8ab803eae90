"""The gate against a store: which run is new, which runs are its baseline, then ``gate.run_gate``.

The new run is a report (stored or not: its values are read from the report, its context as
``history add`` would build it), a stored run by id, or the newest stored run. Its baseline per
metric is ``StoreReads.baseline``: the same series exactly (workload, hardware, world size) and the
same config hash when the run has one, stored before it (for a report not stored yet: every run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError
from my_utils.profiling.history.context import SeriesKey, context_of
from my_utils.profiling.history.figures import short
from my_utils.profiling.history.gate import GATE_METRICS, GateResult, GateSettings, choose_baseline, run_gate
from my_utils.profiling.history.metrics import report_metrics
from my_utils.profiling.history.records import report_fingerprint

if TYPE_CHECKING:
    from my_utils.profiling.history.reads import StoreReads
    from my_utils.profiling.model.report import AnalysisReport


def judge_run(store: StoreReads, settings: GateSettings, report: tuple[Path, AnalysisReport] | None = None,
              run_id: int | None = None, workload: str | None = None, hardware: str | None = None,
              metrics: Sequence[str] = (), given: Mapping[str, Any] | None = None) -> GateResult:
    """Judge the new run (a report, ``run_id``, or the newest stored run) against its baseline."""
    before: int | None
    if report is not None:
        path, loaded = report
        ctx = context_of(loaded, {**(given or {}), "workload": workload}, file_time=path.stat().st_mtime)
        before = store.find(report_fingerprint(loaded))
        values = {m.name: (m.value, m.unit) for m in report_metrics(loaded)}
        key, config = ctx.series, ctx.config_hash
        label = (f"run {before}" if before is not None else f"report {path}") + f", commit {short(ctx.git_commit)}"
    else:
        run = store.run(run_id) if run_id is not None else store.latest(workload, hardware)
        if run is None:
            raise InputError(store.where, None, "a stored run to judge (add one with `myutils-profile history add` "
                                                "or `analyze --record`)")
        before = run.id
        values = {m.name: (m.value, m.unit) for m in store.facts_of(run.id)}
        key, config = run.series, run.context.config_hash
        label = f"run {run.id}, commit {short(run.context.git_commit)}"
    chosen = list(metrics) or [m for m in GATE_METRICS if m in values]
    baselines = {}
    for metric in chosen:
        ids, series = store.baseline(metric, key, config, settings.last, before)
        baselines[metric] = choose_baseline(ids, series, settings.min_runs)
    result = run_gate(label, key, values, baselines, settings)
    if not chosen:
        return GateResult(label + f" (it measured none of {', '.join(GATE_METRICS)}; name one with --metric)",
                          SeriesKey(key.workload, key.hardware, key.world_size), (), settings)
    return result
