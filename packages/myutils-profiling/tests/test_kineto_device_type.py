"""The device type of a trace (``kineto.context.device_type``): HTA's ``infer_gpu_type`` rule and its test cases
(``tests/test_trace_parse.py::test_infer_gpu_type``), then what HTA leaves unknown, on the real traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.context import device_type

#: HTA's labels for the same families.
HTA = {"CUDA": "NVIDIA GPU", "ROCm": "AMD GPU", "MTIA": "MTIA", "unknown": "UNKNOWN GPU"}


@pytest.mark.parametrize(("metadata", "names", "hta"), [
    ({"distributedInfo": {"backend": "mtia:hccl"}}, {"some_event"}, "MTIA"),
    ({}, {"some_event", "runFunction - job_prep_and_submit_for_execution"}, "MTIA"),
    ({}, {"cudaLaunchKernel", "other_event"}, "NVIDIA GPU"),
    ({}, {"hipLaunchKernel", "another_event"}, "AMD GPU"),
    ({}, {"some_event"}, "UNKNOWN GPU"),
])
def test_htas_cases(metadata: dict[str, Any], names: set[str], hta: str) -> None:
    family, _why = device_type(metadata, names, ["GPU 0"])
    assert HTA[family] == hta


def _runtime_names(path: Path) -> set[str]:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return {e["name"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver", "mtia_runtime", "Runtime")}


@pytest.mark.parametrize(("name", "family"), [
    ("mtia_inference_rank_0.json.gz", "MTIA"),
    ("trace_filter__sampled_rank-0.json.gz", "CUDA"),
    ("triton_example.json.gz", "CUDA"),  # cuLaunchKernel only: HTA says UNKNOWN GPU
    ("cpu_only__rank-34.pt.trace.json.gz", "none"),
])
def test_real_traces(real_fixtures: Any, name: str, family: str) -> None:
    path = Path(real_fixtures / "kineto" / "hta" / name)
    ctx = analyze_traces(path, executor="serial", analyses=[]).to_rows()["kineto_context"][0]
    assert ctx["device_type"] == family
    names = _runtime_names(path)
    if family == "MTIA":
        assert "runFunction - job_prep_and_submit_for_execution" in names
    if name.startswith("triton"):
        assert "cudaLaunchKernel" not in names and "cuLaunchKernel" in names
        assert "cuLaunchKernel" in ctx["device_type_source"] or "cuda" in ctx["device_type_source"]
    if family == "none":
        assert not names
