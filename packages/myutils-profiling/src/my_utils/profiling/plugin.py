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

_P = "my_utils.profiling.providers"

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
                   "where rank files are parsed: 'serial', 'process' (default for several files) "
                   "or a Dask scheduler address such as tcp://host:8786 (needs the [dask] extra)"),
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
}


def _provider(name: str, factory: str, summary: str, inputs: tuple[str, ...],
              extras: tuple[str, ...] = ()) -> PluginDescription:
    return PluginDescription(name=name, kind=PluginKind.METRICS_PROVIDER, factory=f"{_P}.{factory}",
                             summary=summary, inputs=inputs, extras=extras, options=PROVIDER_OPTIONS[name])


@hookimpl
def myutils_metrics_providers() -> Sequence[PluginDescription]:
    """The seven built-in metrics providers."""
    return [
        _provider("mytimer", "mytimer:MyTimerMetricsProvider",
                  "MyTimer regions (CPU/CUDA ms per step), live or from profile CSVs",
                  ("live MyTimer", "profile_rank_*.csv")),
        _provider("torch_profiler", "kineto:TorchProfilerMetricsProvider",
                  "torch.profiler / Kineto traces: step time, kernels, ops, memory peaks",
                  ("live torch.profiler.profile", "*.json", "*.json.gz"), ("dask",)),
        _provider("module_profiler", "module_profiler:ModuleProfilerMetricsProvider",
                  "per-module forward times of a live ModuleProfiler", ("live ModuleProfiler",)),
        _provider("table_csv", "table_csv:TableCsvMetricsProvider",
                  "any CSV table through a column mapping", ("*.csv",)),
        _provider("ncu_csv", "ncu:NcuCsvMetricsProvider",
                  "Nsight Compute CSV exports (details or raw page)", ("*.csv", "*.txt", "*.log")),
        _provider("nsys_sqlite", "nsys:NsysSqliteMetricsProvider",
                  "Nsight Systems SQLite exports, aggregated in SQL", ("*.sqlite", "*.db")),
        _provider("cprofile", "cprofile:CProfileStatsProvider",
                  "cProfile / pstats dumps: self and cumulative time per function",
                  ("*.pstats", "*.prof", "*.cprofile")),
    ]


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    """Mount the ``myutils-profile`` commands as ``myutils profile``."""
    from my_utils.profiling.cli import app as profile_app

    app.add_typer(profile_app, name="profile")
