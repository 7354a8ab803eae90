"""ModuleProfilerMetricsProvider on a real ModuleProfiler: deltas of its cumulative summary, never counted twice.

The profiler (myutils-hooks) times a real torch model on the CPU; the expected values come
from its own per-call record (``durations_ms()``), independently of the summary table the
provider reads.
"""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.formats.module_profiler import ModuleProfilerMetricsProvider


@pytest.fixture
def profiled() -> Any:
    """A real model (one layer called twice per forward) under a real ModuleProfiler."""
    torch = pytest.importorskip("torch", reason="ModuleProfiler times torch modules (pip install torch)")
    hooks = pytest.importorskip("my_utils.hooks.module_profiler",
                                reason="ModuleProfiler ships in myutils-hooks (pip install myutils-hooks)")

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.Linear(8, 8)
            self.ffn = torch.nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            return self.ffn(self.attn(self.attn(x)))

    model = Twice()
    with hooks.ModuleProfiler(model) as profiler:
        yield model, profiler, torch.ones(2, 8)


def _forwards(profiled: Any, n: int) -> None:
    model, profiler, x = profiled
    for _ in range(n):
        profiler.start()
        model(x)
        profiler.stop()


def test_deltas_between_collects(profiled: Any) -> None:
    _, profiler, _ = profiled
    provider = ModuleProfilerMetricsProvider(profiler, rank=1)
    assert provider.collect(0) == []
    _forwards(profiled, 3)
    first = {e.name: e for e in provider.collect(1)}
    calls = profiler.durations_ms()
    assert sorted(first) == ["module:attn", "module:ffn"]
    assert first["module:attn"].attrs["runs"] == 6 and first["module:ffn"].attrs["runs"] == 3  # every call counts
    for name in ("attn", "ffn"):
        event = first[f"module:{name}"]
        assert event.value == pytest.approx(sum(calls[name]) / len(calls[name]))
        assert (event.step, event.rank, event.unit, event.source) == (1, 1, "ms", "module_profiler")
    _forwards(profiled, 2)
    second = {e.name: e for e in provider.collect(2)}
    new_calls = {name: values[len(calls[name]):] for name, values in profiler.durations_ms().items()}
    assert second["module:attn"].attrs["runs"] == 4 and second["module:attn"].attrs["cumulative_runs"] == 10
    for name in ("attn", "ffn"):
        assert second[f"module:{name}"].value == pytest.approx(sum(new_calls[name]) / len(new_calls[name]))
        assert second[f"module:{name}"].attrs["total_ms"] == pytest.approx(sum(new_calls[name]))
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
