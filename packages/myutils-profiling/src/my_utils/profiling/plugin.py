"""The built-in plugin of myutils-profiling, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it only describes components (``"module:Class"`` strings and their
declared options); the providers' modules are imported when a provider is used, never
when plugins are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind

if TYPE_CHECKING:
    import typer

_F = "my_utils.profiling.formats"

# The options each built-in provider declares (``plugins show`` lists them; ``--option``,
# configs and Python keywords are checked against them). A test compares them with the
# providers' constructors.
RANK = OptionSpec("rank", int, None,
                  "rank for events whose file carries none (no rank in the data or the file name)")
KINDS = ("duration", "counter", "gauge", "ratio", "info")

PROVIDER_OPTIONS: dict[str, tuple[OptionSpec, ...]] = {
    "mytimer": (RANK,),
    "torch_profiler": (
        RANK,
        OptionSpec("executor", str, None,
                   "where rank files are parsed: 'serial', 'process' (default for several files), "
                   "'dask' (joins $DASK_SCHEDULER_ADDRESS, else starts a local cluster on 127.0.0.1) "
                   "or a Dask scheduler address such as tcp://host:8786 (Dask needs the [dask] extra)"),
    ),
    "module_profiler": (RANK,),
    "table_csv": (
        OptionSpec("name_column", str, None, "column naming each row (default: 'name', else the first column)"),
        OptionSpec("value_columns", list, None,
                   "columns read as values (a list, or one name); default: every numeric column"),
        OptionSpec("step_column", str, "step", "column holding the step, when present"),
        OptionSpec("rank_column", str, "rank", "column holding the rank, when present"),
        OptionSpec("ts_column", str, "ts", "column holding unix seconds, when present"),
        OptionSpec("unit_column", str, "unit", "column holding each row's unit, when present"),
        OptionSpec("unit", str, "", "unit of the values when there is no unit column"),
        OptionSpec("kind", str, "gauge", "how the values aggregate", KINDS),
        OptionSpec("name_prefix", str, "", "text put before every event name"),
        OptionSpec("delimiter", str, ",", "the one character between cells"),
        RANK,
    ),
    "ncu_csv": (RANK,),
    "nsys_sqlite": (RANK,),
    "cprofile": (RANK,),
    "dcgm_dmon": (RANK,),
    "nccl_log": (RANK,),
    "nccl_inspector": (RANK,),
    "nccl_ras": (RANK,),
    "perf_stat": (RANK,),
}


def _provider(name: str, factory: str, summary: str, inputs: tuple[str, ...],
              extras: tuple[str, ...] = ()) -> PluginDescription:
    return PluginDescription(name=name, kind=PluginKind.METRICS_PROVIDER, factory=factory,
                             summary=summary, inputs=inputs, extras=extras, options=PROVIDER_OPTIONS[name])


@hookimpl
def myutils_metrics_providers() -> Sequence[PluginDescription]:
    """The built-in metrics providers (twelve)."""
    return [
        _provider("mytimer", f"{_F}.mytimer:MyTimerMetricsProvider",
                  "MyTimer regions (CPU/CUDA ms per step), live or from profile CSVs",
                  ("live MyTimer", "profile_rank_*.csv")),
        _provider("torch_profiler", "my_utils.profiling.kineto.read.provider:TorchProfilerMetricsProvider",
                  "torch.profiler / Kineto traces: step time, kernels, ops, memory peaks",
                  ("live torch.profiler.profile", "*.json", "*.json.gz"), ("dask",)),
        _provider("module_profiler", f"{_F}.module_profiler:ModuleProfilerMetricsProvider",
                  "per-module forward times of a live ModuleProfiler", ("live ModuleProfiler",)),
        _provider("table_csv", f"{_F}.table_csv:TableCsvMetricsProvider",
                  "any CSV table through a column mapping", ("*.csv",)),
        _provider("ncu_csv", "my_utils.profiling.ncu.provider:NcuCsvMetricsProvider",
                  "Nsight Compute CSV exports (details or raw page)", ("*.csv", "*.txt", "*.log")),
        _provider("nsys_sqlite", "my_utils.profiling.nsys.provider:NsysSqliteMetricsProvider",
                  "Nsight Systems SQLite exports, aggregated in SQL", ("*.sqlite", "*.db")),
        _provider("cprofile", f"{_F}.cprofile:CProfileStatsProvider",
                  "cProfile / pstats dumps: self and cumulative time per function",
                  ("*.pstats", "*.prof", "*.cprofile")),
        _provider("dcgm_dmon", f"{_F}.dcgm:DcgmDmonProvider",
                  "saved `dcgmi dmon` tables: SM/tensor/DRAM activity, power, temperature per GPU and sample",
                  ("*.txt", "*.log", "*.dmon", "*.csv")),
        _provider("nccl_log", f"{_F}.nccl_log:NcclLogProvider",
                  "NCCL_DEBUG=INFO logs: version, network, rings/trees, communicators and transports per rank",
                  ("*.log", "*.txt", "*.out", "*.err")),
        _provider("nccl_inspector", f"{_F}.nccl_inspector:NcclInspectorProvider",
                  "NCCL Inspector plugin logs: time, size, algbw and busbw per collective",
                  ("*.log", "*.jsonl", "*.json")),
        _provider("nccl_ras", "my_utils.profiling.nccl.ras_provider:NcclRasProvider",
                  "NCCL RAS client output (ncclras, NCCL 2.24+): problems per severity, counted once, and the job",
                  ("*.txt", "*.log", "*.json", "*.out")),
        _provider("perf_stat", f"{_F}.perf_stat:PerfStatProvider",
                  "`perf stat` output (human or -x CSV): counters, derived IPC, not-counted as not measured",
                  ("*.txt", "*.log", "*.csv", "*.perf")),
    ]


_R = "my_utils.profiling.analysis.rules"
_WARMUP = OptionSpec("warmup_steps", int, 1, "first steps of each series left out (warm-up)")

# The options each built-in rule declares; a workload profile (analysis.workloads) sets them.
RULE_OPTIONS: dict[str, tuple[OptionSpec, ...]] = {
    "bottleneck": (
        OptionSpec("share", float, 0.10, "fraction of step (or device) time above which a name is a bottleneck"),
        OptionSpec("critical_share", float, 0.30, "fraction above which the finding is marked large (findings are "
                   "info: a breakdown)"),
        OptionSpec("max_findings", int, 20, "most bottleneck findings reported"),
        OptionSpec("merge_same_cost", bool, True,
                   "report operators of (within 3 %) the same cost, without nesting information, as one chain"),
    ),
    "memory_growth": (
        OptionSpec("confidence", float, 0.95, "confidence of the Theil-Sen slope interval"),
        OptionSpec("min_growth", float, 0.05, "smallest fitted growth over the range, as a fraction of the start"),
        OptionSpec("min_steps", int, 6, "fewest steps a memory series needs"),
        OptionSpec("critical_growth", float, 0.5, "growth above which the finding is critical"),
    ),
    "anomalies": (
        OptionSpec("sigma", float, 3.0, "|x - mean| above this many standard deviations is an outlier"),
        OptionSpec("mad_z", float, 3.5, "robust z-score (median/MAD) above which a step is an outlier"),
        OptionSpec("method", str, "either", "which tests must flag a step", ("sigma", "mad", "either", "both")),
        _WARMUP,
        OptionSpec("min_steps", int, 8, "fewest steps a series needs"),
        OptionSpec("max_names", int, 20, "names tested besides step_time (largest totals first)"),
        OptionSpec("min_excess", float, 0.10, "smallest distance from the median, as a fraction of it"),
        OptionSpec("min_share", float, 0.01, "host names under this share of step time are left out"),
        OptionSpec("jitter_ms", float, 20.0, "least excess (ms) a step needs to count beyond the host's jitter"),
    ),
    "variability": (
        OptionSpec("cv", float, 0.15, "robust coefficient of variation above which a name is unstable"),
        OptionSpec("critical_cv", float, 0.5, "robust CV above which the finding is critical"),
        _WARMUP,
        OptionSpec("min_steps", int, 5, "fewest steps a series needs"),
        OptionSpec("min_share", float, 0.01, "names under this share of step time are left out"),
        OptionSpec("max_findings", int, 20, "most variability findings reported"),
        OptionSpec("jitter_ms", float, 10.0, "a robust spread (ms) no larger than the host's jitter, and at least "
                   "this, is info"),
    ),
    "rank_imbalance": (
        OptionSpec("excess", float, 0.05, "median step-time excess over the other ranks' median above which a "
                   "rank is slow"),
        OptionSpec("critical_excess", float, 0.25, "step-time excess above which the finding is critical (runs "
                   "without collectives; with them severity follows the others' wait)"),
        OptionSpec("min_steps", int, 3, "fewest shared steps to compare"),
        OptionSpec("min_slowdown", float, 1.2, "median ratio of a rank's working time in a region to the other "
                   "ranks' above which it is slow there"),
    ),
    "suggestions": (
        OptionSpec("share", float, 0.2, "share of time above which a pattern (data loading, copies...) is reported"),
        OptionSpec("short_kernel_ms", float, 0.01, "mean kernel time under which kernels count as tiny"),
        OptionSpec("many_kernels", int, 500, "kernels per step above which tiny kernels are reported"),
    ),
    "source_checks": (
        OptionSpec("sm_active_low", float, 40.0, "mean DCGM SM activity (percent) under which a GPU is reported idle"),
        OptionSpec("min_samples", int, 5, "fewest DCGM samples a GPU needs before it is judged"),
        OptionSpec("ipc_low", float, 1.0, "perf stat instructions per cycle under which host code is reported"),
    ),
}


def _rule(name: str, factory: str, summary: str) -> PluginDescription:
    return PluginDescription(name=name, kind=PluginKind.ANALYSIS_RULE, factory=f"{_R}.{factory}",
                             summary=summary, inputs=("metric events",), options=RULE_OPTIONS[name])


@hookimpl
def myutils_analysis_rules() -> Sequence[PluginDescription]:
    """The seven built-in analyzer rules (the analyzer finds them through this hook, like any plugin's)."""
    return [
        _rule("bottleneck", "bottleneck:BottleneckRule", "names above a share (10 %) of step or device time"),
        _rule("memory_growth", "memory_trend:MemoryGrowthRule",
              "memory that keeps growing (Theil-Sen slope with a confidence bound, step range named)"),
        _rule("anomalies", "anomalies:AnomalyRule", "outlying steps by 3-sigma and by median/MAD robust z-score"),
        _rule("variability", "variability:VariabilityRule", "operations whose time per step is unstable"),
        _rule("rank_imbalance", "imbalance:RankImbalanceRule",
              "ranks whose step time is consistently above the all-ranks median (stragglers)"),
        _rule("suggestions", "suggestions:SuggestionsRule",
              "optimisation advice: data loading, copies, communication, tiny kernels"),
        _rule("source_checks", "sources:SourceChecksRule",
              "DCGM, NCCL log and perf stat checks: idle SMs, TCP sockets between nodes, low host IPC"),
    ]


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    """Mount the ``myutils-profile`` commands as ``myutils profile``."""
    from my_utils.profiling.cli import app as profile_app

    app.add_typer(profile_app, name="profile")
