"""The kernel-kind table against Holistic Trace Analysis' rules (September 2025 and later).

Two checks. Names whose kinds were read off HTA's ``hta/common/types.py`` by hand (each line
says which clause decides it), which always run. And, where HTA's source can be read (HTA
installed, or ``MYUTILS_HTA_SOURCE`` naming a checkout), its three grouping patterns are
parsed from the file with ``ast`` (HTA is not imported: it pulls pandas) and applied with its
own ``re.match`` order to the same names, every kernel name of the real traces and generated
names, which must all get the same kind from our table.
"""

from __future__ import annotations

import ast
import gzip
import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.kineto.kinds import KIND_RULES, KernelKind, kind_of

COMM, MEM, COMP, OTHER = "communication", "memory", "computation", "other"

# name -> kind, derived by reading HTA's rules (comm, then memory, then "not a non-compute name")
BY_HAND = [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", COMM),  # ^nccl
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", COMM),  # ^nccl
    ("nccl:all_reduce", COMM),  # ^nccl (new: was computation under the old ^nccl.*Kernel rule)
    ("hipKernelLaunch", COMM),  # ^hip (new)
    ("hcclAllReduce", COMM),  # ^hccl (new)
    ("void at::ncclKernel_wrapper<float>()", COMM),  # .*ncclKernel.* (new)
    ("Memcpy HtoD (Pageable -> Device)", MEM),  # ^Memcpy
    ("Memset (Device)", MEM),  # ^Memset
    ("dma_copy_h2d", MEM),  # ^dma
    ("hipMemcpyAsync", COMM),  # ^hip wins: communication is tried first
    ("void at::native::vectorized_elementwise_kernel<4, float>", COMP),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", COMP),
    ("triton_poi_fused_add_0", COMP),
    ("Stream Sync", OTHER),  # .*Sync
    ("Event Sync", OTHER),
    ("Context Sync", OTHER),
    ("Stream Wait Event", OTHER),  # ^Stream Wait Event (new)
    ("cudaLaunchKernel", OTHER),  # cuda.*LaunchKernel
    ("runFunction - job_prep_and_submit_for_execution", OTHER),  # ^runFunction
    ("pe_exe_fused_op", OTHER),  # ^pe_exe (new)
    ("job_exe_123", OTHER),  # ^job_exe (new)
    ("packet_send", OTHER),  # ^packet (new)
    ("cpum_exe_subgraph_7", OTHER),  # ^cpum_exe_subgraph (new)
    ("collective_subgraph_execution_2", OTHER),  # ^collective_subgraph_execution (new)
    ("fused_dma_gather", OTHER),  # .*dma: not ^dma, so not memory
    ("cudaMemcpyAsync", OTHER),  # .*Memcpy, not ^Memcpy
    ("my_kernel\nwith Sync on line 2", COMP),  # HTA's .* stops at a line break
]


@pytest.mark.parametrize(("name", "kind"), BY_HAND)
def test_kinds_read_off_htas_rules(name: str, kind: str) -> None:
    assert kind_of(name).value == kind


def test_the_rules_are_one_table_in_htas_order() -> None:
    assert [k for k, _ in KIND_RULES] == [KernelKind.COMMUNICATION, KernelKind.MEMORY, KernelKind.COMPUTATION]


def _hta_types_file() -> Path | None:
    checkout = os.environ.get("MYUTILS_HTA_SOURCE")
    if checkout:
        return Path(checkout) / "hta" / "common" / "types.py"
    spec = importlib.util.find_spec("hta")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "common" / "types.py"


def _hta_patterns(path: Path) -> dict[str, tuple[re.Pattern[str], bool]]:
    """``{group: (compiled pattern, inverse_match)}`` of HTA's kernel grouping patterns, read with ast."""
    out: dict[str, tuple[re.Pattern[str], bool]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        target = node.targets[0]
        name = target.id if isinstance(target, ast.Name) else ""
        if name not in ("CommunicateKernelGroupingPattern", "MemoryKernelGroupingPattern",
                        "ComputeKernelGroupingPattern"):
            continue
        kw = {k.arg: k.value for k in node.value.keywords}
        pattern = kw["pattern"]
        assert isinstance(pattern, ast.Call)  # re.compile("...")
        out[name] = (re.compile(ast.literal_eval(pattern.args[0])), bool(ast.literal_eval(kw["inverse_match"])))
    return out


HTA_FILE = _hta_types_file()
needs_hta = pytest.mark.skipif(HTA_FILE is None, reason="HTA's source is not here: holistictraceanalysis is "
                                                          "a bench-only requirement (bench/requirements.txt) and "
                                                          "MYUTILS_HTA_SOURCE is not set")


def _hta_kind(patterns: dict[str, tuple[re.Pattern[str], bool]], name: str) -> str:
    def hit(group: str) -> bool:
        pattern, inverse = patterns[group]
        return (pattern.match(name) is not None) != inverse

    if hit("CommunicateKernelGroupingPattern"):
        return COMM
    if hit("MemoryKernelGroupingPattern"):
        return MEM
    if hit("ComputeKernelGroupingPattern"):
        return COMP
    return OTHER


def _patterns_or_skip() -> dict[str, tuple[re.Pattern[str], bool]]:
    assert HTA_FILE is not None
    patterns = _hta_patterns(HTA_FILE)
    assert set(patterns) == {"CommunicateKernelGroupingPattern", "MemoryKernelGroupingPattern",
                             "ComputeKernelGroupingPattern"}, f"HTA's patterns moved in {HTA_FILE}"
    if "ncclKernel" not in patterns["CommunicateKernelGroupingPattern"][0].pattern:
        try:
            version = importlib.metadata.version("holistictraceanalysis")
        except importlib.metadata.PackageNotFoundError:
            version = "of unknown version"
        pytest.skip(f"the HTA found ({version}, {HTA_FILE}) predates the September 2025 kind rules this table "
                    "follows (HTA 0.6.0); install holistictraceanalysis>=0.6.0")
    return patterns


def _trace_kernel_names(real_fixtures: Any) -> set[str]:
    names: set[str] = set()
    for rel in ("hta/trace_filter__sampled_rank-0.json.gz", "hta/nccl_parser_config__nccl_data.json.gz",
                "hta/critical_path__alexnet_trace.json.gz", "hta/mtia_inference_rank_0.json.gz",
                "hta/triton_example.json.gz"):
        path = real_fixtures / "kineto" / rel
        with gzip.open(path, "rb") as fh:
            events = json.load(fh)["traceEvents"]
        names.update(e["name"] for e in events if e.get("cat") in (
            "kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "mtia_ccp_events"))
    return names


@needs_hta
def test_the_table_gives_htas_kinds_on_hand_picked_and_real_names(real_fixtures: Any) -> None:
    patterns = _patterns_or_skip()
    names = {n for n, _ in BY_HAND} | _trace_kernel_names(real_fixtures)
    wrong = {n: (kind_of(n).value, _hta_kind(patterns, n)) for n in names if kind_of(n).value != _hta_kind(patterns, n)}
    assert not wrong, f"kind table differs from HTA's ({HTA_FILE}): name -> (ours, HTA's): {wrong}"


_TOKENS = ["nccl", "hip", "hccl", "ncclKernel", "Memcpy", "hipMemcpy", "Memset", "hipMemset", "dma", "Sync",
           "Stream Wait Event", "cuda", "LaunchKernel", "runFunction", "job_exe", "packet", "pe_exe",
           "cpum_exe_subgraph", "collective_subgraph_execution", "\n", "x", " ", "Kernel", "_"]


@needs_hta
@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=5))
def test_the_table_gives_htas_kinds_on_generated_names(parts: list[str]) -> None:
    patterns = _patterns_or_skip()
    name = "".join(parts)
    assert kind_of(name).value == _hta_kind(patterns, name), repr(name)
