"""op_stats: the seed's per-name statistics (against a slow hand computation) and safe file stems."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.errors import ConfigError
from my_utils.legacy.op_stats import OpStats, compile_ops, group_matches, safe_file_stem, unique_stems

floats = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@given(st.lists(floats, min_size=1, max_size=60))
def test_stats_match_a_slow_computation(values: list[float]) -> None:
    stats = OpStats.of("cpu_time_total", values)
    n = len(values)
    mean = sum(values) / n
    ordered = sorted(values)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    assert stats.count == n and stats.min_us == ordered[0] and stats.max_us == ordered[-1]
    assert math.isclose(stats.total_us, sum(values), rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(stats.mean_us, mean, rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(stats.median_us, median, rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(stats.std_us, std, rel_tol=1e-6, abs_tol=1e-3)
    assert list(stats.to_json()) == ["metric", "count", "total_us", "mean_us", "median_us", "std_us", "min_us",
                                     "max_us"]


def _event(cpu: float, device: float) -> SimpleNamespace:
    return SimpleNamespace(cpu_time_total=cpu, self_cpu_time_total=cpu / 2, device_time_total=device,
                           self_device_time_total=device / 2)


def test_grouping_by_full_name_with_cpu_fallback() -> None:
    ops = compile_ops({r"tile_encoder_\d+": "cuda_time_total", r"aten::linear": "self_cuda_time_total"})
    samples = [("tile_encoder_0", _event(10, 0)), ("tile_encoder_1", _event(20, 0)),
               ("tile_encoder_0", _event(30, 0)), ("aten::linear", _event(8, 0)), ("aten::mm", _event(5, 0))]
    on_cpu = group_matches(samples, ops, has_device_time=False)
    assert sorted(on_cpu) == ["aten::linear", "tile_encoder_0", "tile_encoder_1"]
    assert (on_cpu["tile_encoder_0"].metric, on_cpu["tile_encoder_0"].count, on_cpu["tile_encoder_0"].total_us) == (
        "cpu_time_total", 2, 40.0)
    assert (on_cpu["aten::linear"].metric, on_cpu["aten::linear"].total_us) == ("self_cpu_time_total", 4.0)
    on_gpu = group_matches([("tile_encoder_0", _event(10, 7))], ops, has_device_time=True)
    assert (on_gpu["tile_encoder_0"].metric, on_gpu["tile_encoder_0"].total_us) == ("cuda_time_total", 7.0)


@pytest.mark.parametrize(("ops", "place"), [({"(": "cpu_time_total"}, "key '('"),
                                             ({"x": "gpu_time"}, "key 'x'")])
def test_bad_ops_name_the_key(ops: dict[str, str], place: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"ops_to_analyze:{place}")):
        compile_ops(ops)


@given(st.text(min_size=0, max_size=300))
def test_any_name_becomes_a_file_inside_the_folder(name: str) -> None:
    stem = safe_file_stem(name)
    folder = Path("/out/DIT")
    target = (folder / f"{stem}_rank0_analysis.json").resolve()
    assert target.parent == folder and not stem.startswith(".") and len(stem) <= 130
    assert re.fullmatch(r"[A-Za-z0-9._-]+", stem)


def test_traversal_and_collisions() -> None:
    assert "/" not in safe_file_stem("../../x") and safe_file_stem("../../x") == "x"
    stems = unique_stems(["a/b", "a_b", "aten::linear"])
    assert stems["aten::linear"] == "aten_linear"
    assert len({stems["a/b"], stems["a_b"]}) == 2
