"""The metric taxonomy: each tool's name leads to one canonical metric, with the scale to its unit."""

from __future__ import annotations

import pytest

from my_utils.core.metric_names import TAXONOMY, aliases, event_metric, lookup


@pytest.mark.parametrize(("tool", "name", "metric", "scale"), [
    ("dcgm", "SMACT", "gpu.sm_active", 100.0),             # a ratio 0-1 in DCGM
    ("dcgm", "DCGM_FI_PROF_SM_ACTIVE", "gpu.sm_active", 100.0),
    ("dcgm", "1002", "gpu.sm_active", 100.0),
    ("nsys", "SMs Active [Throughput %]", "gpu.sm_active", 1.0),  # the unit in brackets is not the name
    ("nsys", "sms active", "gpu.sm_active", 1.0),
    ("dcgm", "GPUTL", "gpu.utilization", 1.0),
    ("nvml", "utilization.gpu", "gpu.utilization", 1.0),
    ("memory_monitor", "gpu_util_pct", "gpu.utilization", 1.0),
    ("nvml", "nvmlDeviceGetPowerUsage", "gpu.power", 1e-3),  # milliwatts
    ("nvml", "nvmlDeviceGetTotalEnergyConsumption", "gpu.energy", 1e-3),  # millijoules
    ("dcgm", "FBUSD", "gpu.memory_used", float(1 << 20)),  # MiB
    ("cupti", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "gpu.sm_active", 1.0),
])
def test_each_tools_name_finds_the_canonical_metric(tool: str, name: str, metric: str, scale: float) -> None:
    found = lookup(tool, name)
    assert found is not None and found[0].name == metric and found[1].scale == scale


def test_close_cousins_are_not_merged() -> None:
    """NVML's utilisation (any kernel running) is not SM activity; GR Active is neither."""
    assert lookup("dcgm", "GPUTL")[0] is not lookup("dcgm", "SMACT")[0]  # type: ignore[index]
    assert lookup("nsys", "GR Active")[0].name == "gpu.gr_engine_active"  # type: ignore[index]
    assert lookup("nsys", "Unknown Metric [%]") is None and lookup("nvml", "SMACT") is None


def test_the_table_is_consistent() -> None:
    names = [m.name for m in TAXONOMY]
    assert len(names) == len(set(names)) and all(n.startswith("gpu.") for n in names)
    seen: set[tuple[str, str]] = set()
    for m in TAXONOMY:
        assert m.unit and m.meaning and m.source and m.aliases
        for a in m.aliases:
            key = (a.tool, a.name.casefold())
            assert key not in seen, f"{a} names two metrics"
            seen.add(key)
    assert {a.tool for a in aliases("gpu.sm_active")} >= {"dcgm", "nsys", "cupti", "dcgm_dmon"}
    with pytest.raises(KeyError, match=r"known: gpu\.dram_active"):
        aliases("gpu.nope")


@pytest.mark.parametrize(("source", "name", "metric", "scale"), [
    ("dcgm_dmon", "dcgm.sm_active:gpu1", "gpu.sm_active", 1.0),   # the provider already scaled SMACT to %
    ("dcgm_dmon", "dcgm.fb_used:gpu0", "gpu.memory_used", float(1 << 20)),
    ("memory_monitor", "monitor/gpu_util_pct", "gpu.utilization", 1.0),
    ("nsys_sqlite", "gpu.sm_active:GPU 0", "gpu.sm_active", 1.0),  # named canonically by its provider
    ("anything", "gpu.power", "gpu.power", 1.0),
])
def test_events_of_every_provider_map(source: str, name: str, metric: str, scale: float) -> None:
    found = event_metric(source, name)
    assert found is not None and (found[0].name, found[1]) == (metric, scale)


def test_other_events_map_to_nothing() -> None:
    assert event_metric("mytimer", "forward") is None
    assert event_metric("dcgm_dmon", "dcgm.gpu_temp:gpu0") is None
    assert event_metric(None, "monitor/gpu_util_pct") is None
