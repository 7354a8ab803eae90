"""Advice conditioned on the verdict and on what the capture holds (issue 33, principle 3).

What the capture holds is read from names as the tools write them (ATen operators, C++ kernel
signatures, NVTX ranges, CUDA API calls); the gate is one table (``advice_gate.GATES``), checked
here per verdict and per family, and as a property over every advice text the rules can attach.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.analysis.advice import (
    COMM_ADVICE,
    FAMILIES,
    IDLE_ADVICE,
    JITTER_ADVICE,
    JITTER_BY_FAMILY,
    PIECES,
    TORCH_OPTIMIZERS,
    optimizer_advice,
)
from my_utils.profiling.analysis.advice_gate import GATES, gate_findings, strip
from my_utils.profiling.analysis.contents import CaptureContents, capture_contents
from my_utils.profiling.model.report import BOUNDS, Advice, Fact, Finding

#: What a careful engineer must never read, by condition (diagnosis/CASES.md).
GPU_ADVICE = re.compile(r"caching allocator|autocast|mixed precision|CUDA graph|reduce-overhead|pin_memory|"
                        r"pinned memory|torch\.cuda|fuse (small )?kernels|kernel fusion|scaled_dot_product|"
                        r"non_blocking", re.I)
MIXED_PRECISION = re.compile(r"mixed precision|autocast|bf16|fp16", re.I)
ATTENTION = re.compile(r"scaled_dot_product_attention|flash", re.I)
LAUNCH = re.compile(r"CUDA graph|torch\.compile", re.I)
OVERLAP = re.compile(r"overlap gradient|DDP buckets|prefetch the next all-gather|backward_prefetch", re.I)
PYTORCH = re.compile(r"torch|DataLoader|DDP|FSDP|autocast|find_unused_parameters|fused=True|foreach=True", re.I)


def _every_text() -> list[str]:
    """Every advice text the rules can attach (formatted where they take numbers)."""
    texts = [f.advice for f in FAMILIES if f.advice]
    texts += [optimizer_advice(c) for c in [None, "Shampoo", *TORCH_OPTIMIZERS]]
    texts += [JITTER_ADVICE["unexplained"], JITTER_ADVICE["periodic"], JITTER_ADVICE["faster"]]
    texts += [JITTER_ADVICE["spread"].format(name="x", advice=a) for a in JITTER_BY_FAMILY.values()]
    texts += [JITTER_ADVICE["explained"].format(name="x", advice=a) for a in JITTER_BY_FAMILY.values()]
    texts += [IDLE_ADVICE["host_wait"], IDLE_ADVICE["other"],
              IDLE_ADVICE["short_kernels"].format(short=3, launches=9) + ": " + IDLE_ADVICE["short_kernels_fix"]]
    texts += [COMM_ADVICE["no_overlap_own_stream"].format(overlap=0.0), COMM_ADVICE["no_overlap_shared_stream"]]
    return texts


def _finding(texts: list[str]) -> Finding:
    return Finding("f", "optimization", "warning", "t", "", suggestion=" ".join(texts),
                   advice=tuple(Advice(t, kind="k") for t in texts))


def test_the_gate_table_names_only_pieces_and_every_piece_is_used() -> None:
    assert set(GATES) <= set(PIECES)
    joined = "\n".join(_every_text())
    assert [k for k, text in PIECES.items() if text not in joined] == []  # no orphan piece
    for a in PIECES.values():  # no piece inside another: removing one never cuts another
        assert [b for b in PIECES.values() if a != b and a in b] == []


def test_strip_keeps_the_rest_and_drops_a_lead_alone() -> None:
    text = IDLE_ADVICE["host_wait"]
    assert strip(text, ["reduce_overhead"]) == ("the GPU waits for the CPU to launch work: " + PIECES["cuda_graphs"]
                                                + "; " + PIECES["larger_batch_launch"])
    assert strip(text, ["cuda_graphs", "reduce_overhead", "larger_batch_launch"]) == ""
    assert strip(text, []) == text


contents_st = st.builds(
    CaptureContents, families=st.frozensets(st.sampled_from(
        ["attention", "convolution", "embedding", "gemm", "communication", "data_loading", "copies", "optimizer"])),
    pytorch=st.sampled_from([True, False, None]), gpu=st.sampled_from([True, False, None]),
    compute_kernels=st.sampled_from([True, False, None]),
    features=st.frozensets(st.sampled_from(["cuda_graphs", "compiled", "flash_attention"])))


@settings(max_examples=200, deadline=None)
@given(bound=st.sampled_from(BOUNDS), contents=contents_st)
def test_no_advice_that_the_verdict_or_the_capture_rules_out(bound: str, contents: CaptureContents) -> None:
    (f,) = gate_findings([_finding(_every_text())], bound, contents)
    texts = [a.text for a in f.advice] + [f.suggestion]
    said = "\n".join(texts)
    if contents.gpu is False:  # a CPU-only run: no GPU advice at all
        assert not GPU_ADVICE.search(said), said
    if bound in ("host", "setup", "cpu", "communication"):  # the GPU waits or has no steady state
        assert not MIXED_PRECISION.search(said)
    if "attention" not in contents.families or "flash_attention" in contents.features:
        assert not ATTENTION.search(said)
    if bound in ("setup", "cpu") or "cuda_graphs" in contents.features:
        assert "CUDA graph" not in said and "reduce-overhead" not in said
    if contents.compute_kernels is False:
        assert not OVERLAP.search(said)
    if contents.pytorch is False:
        assert not PYTORCH.search(said), said
    assert all(a.text and not a.text.endswith(":") for a in f.advice)


def test_a_run_without_attention_operators_never_gets_attention_advice() -> None:
    """The MLP and the TorchRec pair: compute-bound or not, no SDPA/flash without an attention operator."""
    text = [FAMILIES[6].advice]  # compute
    mlp = CaptureContents(families=frozenset({"gemm", "optimizer"}), pytorch=True, gpu=True, compute_kernels=True)
    (f,) = gate_findings([_finding(text)], "compute", mlp)
    assert f.advice and "scaled_dot_product_attention" not in f.advice[0].text and "autocast" in f.advice[0].text
    transformer = CaptureContents(families=frozenset({"attention", "gemm"}), pytorch=True, gpu=True)
    (f,) = gate_findings([_finding(text)], "compute", transformer)
    assert "scaled_dot_product_attention" in f.advice[0].text  # the look-alike with attention keeps it
    already = CaptureContents(families=frozenset({"attention"}), pytorch=True, gpu=True,
                              features=frozenset({"flash_attention"}))
    (f,) = gate_findings([_finding(text)], "compute", already)
    assert "scaled_dot_product_attention" not in f.advice[0].text  # flash kernels already run


def test_host_bound_gets_launch_advice_and_no_mixed_precision() -> None:
    texts = [IDLE_ADVICE["host_wait"], FAMILIES[5].advice]  # host wait, backward
    c = CaptureContents(families=frozenset({"communication"}), pytorch=True, gpu=True, compute_kernels=True)
    (f,) = gate_findings([_finding(texts)], "host", c)
    assert "CUDA graph" in f.suggestion and "autocast" not in f.suggestion
    assert "find_unused_parameters" in f.suggestion  # DDP is there (communication): kept
    (f,) = gate_findings([_finding(texts)], "compute", c)
    assert "autocast" in f.suggestion


def test_nothing_applies_means_no_advice() -> None:
    """The ring: a setup-dominated NCCL example, no compute kernel, not PyTorch: no advice left at all."""
    texts = [IDLE_ADVICE["host_wait"], COMM_ADVICE["no_overlap_own_stream"].format(overlap=0.0)]
    ring = CaptureContents(families=frozenset({"communication"}), pytorch=False, gpu=True, compute_kernels=False)
    (f,) = gate_findings([_finding(texts)], "setup", ring)
    assert f.advice == () and f.suggestion == ""


@pytest.mark.parametrize(("names", "families", "pytorch", "features"), [
    (["cpu_op:aten::linear", "cpu_op:aten::addmm", "cpu_op:aten::gelu", "annotation:Optimizer.step#SGD.step"],
     {"gemm", "optimizer"}, True, set()),
    (["kernel:void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel<float>(int)",
      "cpu_op:fbgemm::split_embedding_codegen_lookup_sgd_function", "kernel:ncclDevKernel_SendRecv(x)"],
     {"embedding", "communication"}, True, set()),
    (["kernel:void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(flash::Flash_fwd_params)",
      "nvtx:FlashAttnFunc, seq = 45368"], {"attention"}, False, {"flash_attention"}),
    (["cpu_op:aten::_scaled_dot_product_efficient_attention", "cpu_op:aten::conv2d",
      "cpu_op:aten::cudnn_convolution"], {"attention", "convolution"}, True, {"flash_attention"}),
    (["kernel:ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)",
      "nvtx:ncclCommInitRank", "runtime:cudaGraphLaunch_v10000"], {"communication"}, False, {"cuda_graphs"}),
    (["cpu_op:aten::broadcast_tensors", "cpu_op:aten::convert_element_type", "annotation:metadata"],
     set(), True, set()),
    (["cpu_op:CompiledFunction", "kernel:triton_poi_fused_add_0"], set(), True, {"compiled"}),
])
def test_families_framework_and_features_from_the_names(names: list[str], families: set[str], pytorch: bool,
                                                         features: set[str]) -> None:
    c = capture_contents({"operations": [{"name": n} for n in names]}, {})
    assert set(c.families) == families and c.pytorch is pytorch and set(c.features) == features, c


def test_a_cpu_only_run_has_no_gpu_and_a_trace_makes_it_pytorch() -> None:
    cpu = Fact("context.cpu_only", "CPU-only run", 1, "flag")
    c = capture_contents({"kineto_inputs": [{"file": "rank0.json"}], "operations": [{"name": "cpu_op:aten::mm"}]},
                         {cpu.id: cpu})
    assert c.gpu is False and c.pytorch is True
    assert capture_contents({"operations": [{"name": "forward"}]}, {}).pytorch is None  # MyTimer alone: unknown
