"""The options each built-in reader declares, one table shared by the readers and the plugin.

``plugins show`` lists them; ``--option``, configs and Python keywords are checked against them
(``formats._files.checked``). They live here, below the readers, so that a reader checks its options
without importing the plugin module (which brings pluggy) and the plugin describes the readers
without importing them. A test compares them with the providers' constructors.
"""

from __future__ import annotations

from my_utils.core.plugin_types import OptionSpec

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
