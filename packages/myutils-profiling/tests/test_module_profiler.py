"""ModuleProfilerMetricsProvider: deltas of a profiler's cumulative summary, never counted twice.

ModuleProfiler itself needs CUDA; its contract here is ``summary() -> DataFrame`` with the
seed's columns, which this cumulative recorder reproduces from real per-run timings.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.providers.module_profiler import ModuleProfilerMetricsProvider


class _Recorder:
    def __init__(self) -> None:
        self.runs: dict[str, list[float]] = {}

    def record(self, name: str, ms: float) -> None:
        self.runs.setdefault(name, []).append(ms)

    def summary(self) -> Any:
        import pandas as pd

        rows = [{"module_name": n, "mean_ms": sum(v) / len(v), "median_ms": sorted(v)[len(v) // 2], "std_ms": 0.0,
                 "total_ms": sum(v), "run_count": len(v), "percentage": 0.0} for n, v in self.runs.items()]
        return pd.DataFrame(rows, columns=["module_name", "mean_ms", "median_ms", "std_ms", "total_ms",
                                           "run_count", "percentage"])


def test_deltas_between_collects() -> None:
    rec = _Recorder()
    provider = ModuleProfilerMetricsProvider(rec, rank=1)
    assert provider.collect(0) == []
    rec.record("attn", 10.0)
    rec.record("attn", 14.0)
    rec.record("ffn", 5.0)
    first = {e.name: e for e in provider.collect(1)}
    assert first["module:attn"].value == pytest.approx(12.0) and first["module:attn"].attrs["runs"] == 2
    assert first["module:ffn"].value == 5.0 and first["module:ffn"].step == 1
    rec.record("attn", 30.0)
    second = provider.collect(2)
    assert [(e.name, e.value, e.attrs["runs"]) for e in second] == [("module:attn", 30.0, 1)]
    assert provider.collect(3) == []


def test_misuse_and_bad_summary() -> None:
    with pytest.raises(UsageError, match=r"ModuleProfilerMetricsProvider.*summary"):
        ModuleProfilerMetricsProvider(object())

    class Broken:
        def summary(self) -> Any:
            import pandas as pd

            return pd.DataFrame({"module_name": ["a"]})

    with pytest.raises(InputError, match="missing"):
        ModuleProfilerMetricsProvider(Broken()).collect()
