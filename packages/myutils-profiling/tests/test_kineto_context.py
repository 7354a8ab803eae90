"""``kineto.read.context``: GPU model, device count, world size, rank, host and versions of real traces.

Expected values are read from the same files with the stdlib ``json`` module (an
independent reader), and the pair diffed in the docs is checked against what its
registry entry states (A100 rank 3 of 8 against V100 rank 1 of 2).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.read.context import (
    TraceContext,
    cuda_version,
    read_trace_context,
    run_hardware,
    trace_context,
)

TRACES = [
    "kineto/hta/trace_diff__control.json.gz", "kineto/hta/trace_diff__test.json.gz",
    "kineto/hta/df_index_resolver.json.gz", "kineto/hta/nccl_parser_config__nccl_data.json.gz",
    "kineto/hta/cpu_only__rank-34.pt.trace.json.gz", "kineto/hta/mtia_inference_rank_0.json.gz",
    "kineto/hta/triton_example.json.gz", "kineto/hta/distributed_info_not_found.json.gz",
    "kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/kineto_repo/after_fix_trace.json",
    "kineto/kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz",
]


def _top_level(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    data.pop("traceEvents")
    return dict(data)


@pytest.mark.parametrize("rel", TRACES)
def test_context_matches_the_top_level_keys_read_independently(real_fixtures: Any, rel: str) -> None:
    path = real_fixtures / rel
    meta = _top_level(path)
    ctx = read_trace_context(path)
    devices = meta.get("deviceProperties")
    if isinstance(devices, list):
        assert ctx.device_count == len(devices)
        assert ctx.gpus == tuple(d["name"] for d in sorted(devices, key=lambda d: d["id"]))
    else:
        assert ctx.device_count is None and ctx.gpus == ()
    info = meta.get("distributedInfo", {})
    assert ctx.world_size == info.get("world_size")
    assert ctx.backend == info.get("backend")
    if "rank" in info:
        assert (ctx.rank, ctx.rank_source) == (info["rank"], "distributedInfo")
    assert ctx.host == meta.get("host_name")
    assert ctx.nccl == info.get("nccl_version")
    for key in ("cuda_runtime", "cuda_driver"):
        raw = meta.get(f"{key}_version")
        assert getattr(ctx, key) == (None if raw is None else f"{raw // 1000}.{raw % 1000 // 10}")
    # reading the metadata the pass already holds gives the same
    assert trace_context(meta, path) == ctx


def test_the_control_test_pair_differs_in_gpu_device_count_and_world_size(real_fixtures: Any) -> None:
    control = read_trace_context(real_fixtures / "kineto/hta/trace_diff__control.json.gz").hardware()
    test = read_trace_context(real_fixtures / "kineto/hta/trace_diff__test.json.gz").hardware()
    # device 0's properties: totalGlobalMem 42,505,273,344 B / 16,945,512,448 B, CC 8.0 / 7.0, 108 / 80 SMs
    assert control == {"gpu": "NVIDIA A100-PG509-200", "gpu_count": 8, "world_size": 8, "rank": 3,
                       "backend": "nccl", "rank_source": "distributedInfo", "gpu_memory_gib": 39.6,
                       "compute_capability": "8.0", "sms": 108}
    assert test == {"gpu": "Tesla V100-SXM2-16GB", "gpu_count": 2, "world_size": 2, "rank": 1,
                    "backend": "nccl", "rank_source": "distributedInfo", "gpu_memory_gib": 15.8,
                    "compute_capability": "7.0", "sms": 80}


def test_rank_from_the_file_name_when_distributed_info_has_none(real_fixtures: Any) -> None:
    ctx = read_trace_context(real_fixtures / "kineto/kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz")
    assert (ctx.rank, ctx.rank_source) == (0, "file name")
    missing = read_trace_context(real_fixtures / "kineto/hta/distributed_info_not_found.json.gz")
    assert (missing.rank, missing.rank_source) == (None, "unknown") and "rank" not in missing.hardware()


@pytest.mark.parametrize("meta", [
    {"deviceProperties": "x", "distributedInfo": [1], "cuda_runtime_version": True, "host_name": 5},
    {"deviceProperties": [1, None, {"id": "a"}], "distributedInfo": {"rank": True, "world_size": -1}},
    {"cupti_version": "18", "distributedInfo": {"nccl_version": 2}},
])
def test_odd_metadata_is_unknown_never_an_error(meta: dict[str, Any]) -> None:
    ctx = trace_context(meta)
    assert ctx.rank is None and ctx.world_size is None and ctx.host is None and ctx.nccl is None
    assert ctx.cuda_runtime is None and ctx.cupti is None


def test_cuda_versions_and_several_models() -> None:
    assert [cuda_version(v) for v in (12090, 11080, 13000, "12.4", 0, None)] == ["12.9", "11.8", "13.0", "12.4",
                                                                                 None, None]
    mixed = TraceContext(gpus=("A100", "A100", "H100"), device_count=3)
    assert mixed.gpu_models == ("A100", "H100") and mixed.hardware()["gpu"] == "A100 + H100"


def test_run_hardware_of_several_ranks_keeps_agreeing_fields_once(real_fixtures: Any) -> None:
    ranks = [read_trace_context(real_fixtures / f"kineto/hta/trace_filter__sampled_rank-{r}.json.gz") for r in (0, 1)]
    hw = run_hardware(ranks)
    assert hw["world_size"] == 128 and hw["backend"] == "nccl" and hw["ranks"] == [0, 1]
    assert "rank" not in hw
