"""``analysis.diff_context``: the like-for-like checks, each on inputs built to trip it and on look-alikes that must not.

Thresholds are tested at the threshold itself (``LITTLE_IN_COMMON``, ``MIN_FAMILY``,
``DTYPE_READ``), as well as on either side of it.
"""

from __future__ import annotations

import pytest

from my_utils.profiling.analysis.diff_context import (
    DTYPE_READ,
    LITTLE_IN_COMMON,
    MIN_FAMILY,
    dtype_warning,
    family_of,
    gpu_architecture,
    gpu_from_kernel_names,
    gpu_warnings,
    gpus_differ,
    little_in_common_warning,
    similarity,
    window_difference,
)


@pytest.mark.parametrize(("shared", "warns"), [(LITTLE_IN_COMMON, False), (LITTLE_IN_COMMON - 0.01, True),
                                                (1.0, False), (0.0, True)])
def test_little_in_common_is_the_share_of_the_base_operator_time(shared: float, warns: bool) -> None:
    base = {"cpu_op:a": 100 * shared, "cpu_op:b": 100 * (1 - shared), "kernel:k": 1e6}  # kernels do not count
    target = {"cpu_op:a": 5.0, "cpu_op:c": 50.0, "kernel:k2": 1.0}
    s = similarity(base, target)
    assert s.base_time_shared == pytest.approx(shared)
    assert s.little_in_common is warns and (little_in_common_warning(s) is not None) is warns
    assert s.shared_names == 1 and s.jaccard == pytest.approx(1 / 5)


def test_without_operator_names_every_name_counts() -> None:
    s = similarity({"kernel:a": 3.0, "kernel:b": 1.0}, {"kernel:a": 1.0})
    assert s.base_time_shared == pytest.approx(0.75) and not s.little_in_common
    assert similarity({}, {}).base_time_shared == 1.0


@pytest.mark.parametrize(("names", "arch"), [
    (["sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"], "Ampere"),
    (["ampere_sgemm_32x32_sliced1x4_tn"], "Ampere"),
    (["void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>(Params)"], "Ampere"),
    (["volta_sgemm_128x64_nn", "elementwise"], "Volta"),
    (["sm90_xmma_gemm_bf16bf16_bf16f32", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"], "Hopper"),
    (["turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"], "Turing"),
    (["at::native::vectorized_elementwise_kernel<4>", "ncclKernel_AllReduce_RING_LL_Sum_float"], None),
    (["kernel_sm800"], None),  # a digit run that only starts like an architecture is none
])
def test_gpu_from_kernel_names(names: list[str], arch: str | None) -> None:
    found = gpu_from_kernel_names(names)
    assert (found[0] if found else None) == arch


def test_gpu_architecture_of_model_names() -> None:
    assert gpu_architecture("NVIDIA A100-PG509-200") == "Ampere"
    assert gpu_architecture("Tesla V100-SXM2-16GB") == "Volta"
    assert gpu_architecture("NVIDIA H100 80GB HBM3") == "Hopper"
    assert gpu_architecture("Some Accelerator") is None


def test_gpu_warnings_for_an_unknown_side() -> None:
    ampere, volta = ["ampere_sgemm_64x64_nn"], ["volta_sgemm_128x64_nn"]
    (w,) = gpu_warnings({}, {"gpu": "Tesla V100-SXM2-16GB"}, ampere, volta)
    assert w.startswith("GPU unknown on the base side, but its kernel names are built for Ampere") and \
        "the GPUs differ" in w
    (w,) = gpu_warnings({}, {"gpu": "NVIDIA A100-SXM4-80GB"}, ampere, ampere)
    assert "like the other side" in w and "may still differ" in w
    (w,) = gpu_warnings({}, {"gpu": "x"}, ["elementwise_kernel"], ["k"])
    assert "the GPUs may differ" in w
    (w,) = gpu_warnings({}, {}, ampere, ampere)
    assert w.startswith("GPU model unknown on both sides")
    (w,) = gpu_warnings({}, {}, ampere, volta)
    assert "the GPUs differ" in w
    assert gpu_warnings({"gpu": "a"}, {"gpu": "b"}, [], []) == []  # both known: the hardware warning's job
    assert gpu_warnings({}, {"gpu": "b"}, [], volta) == []  # no kernel on the unknown side: nothing to say


def test_gpus_differ_by_model_else_by_architecture() -> None:
    ampere, volta = ["ampere_sgemm_64x64_nn"], ["volta_sgemm_128x64_nn"]
    a100, v100 = {"gpu": "NVIDIA A100-SXM4-80GB"}, {"gpu": "Tesla V100-SXM2-16GB"}
    assert gpus_differ(a100, v100, [], [])
    assert not gpus_differ(a100, dict(a100), volta, volta)  # both models known and equal: the names do not overrule
    assert gpus_differ({"gpu": "NVIDIA A100-SXM4-80GB"}, {"gpu": "NVIDIA A100-PCIE-40GB"}, [], [])  # two models
    assert gpus_differ({}, v100, ampere, [])  # the unknown side's kernels are built for another architecture
    assert not gpus_differ({}, a100, ampere, [])  # ... for the same one: cannot tell the models apart
    assert gpus_differ({}, {}, ampere, volta) and not gpus_differ({}, {}, ampere, ampere)
    assert not gpus_differ({}, {}, ["elementwise_kernel"], volta)  # one side cannot be placed: unknown, not "differ"


def test_a_different_precision_is_read_from_matrix_kernels_only() -> None:
    bf16 = {"sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn": 80.0, "elementwise_kernel<float>": 20.0}
    fp32 = {"ampere_sgemm_128x64_nn": 80.0, "elementwise_kernel<float>": 20.0}
    assert "bf16" in (dtype_warning(bf16, fp32) or "") and "fp32" in (dtype_warning(bf16, fp32) or "")
    assert dtype_warning(fp32, fp32) is None
    # NCCL's int8 send/receive is no precision of the math, and TF32 is fp32 data
    nccl = {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t": 1000.0, "cutlass_80_tensorop_s1688gemm_64x64": 10.0}
    assert dtype_warning(nccl, fp32) is None
    # too little of the matrix time states a precision: no verdict (DTYPE_READ)
    vague = {"cutlass::gemm_kernel_generic": 100 * (1 - DTYPE_READ) + 1, "ampere_h16816gemm_nn": 100 * DTYPE_READ - 1}
    assert dtype_warning(vague, fp32) is None


def test_numbered_families_and_windows() -> None:
    assert family_of("FSDP::pre_forward (blocks.7._checkpoint_wrapped_module)") == \
        "FSDP::pre_forward (blocks.#._checkpoint_wrapped_module)"
    assert family_of("model.layers.12.mlp") == "model.layers.#.mlp" and family_of("aten::mm") is None
    assert family_of("sm80_xmma_gemm_128x128") is None  # kernel tile sizes are no module index
    a = [f"nvtx:blocks.{i}.attn" for i in range(2, 20)]
    b = [f"nvtx:blocks.{i}.attn" for i in range(8, 24)]
    w = window_difference(a, b)
    assert w is not None and (w.base, w.target, w.what) == ((2, 19), (8, 23), "blocks")
    assert "blocks 2–19 against 8–23" in w.describe()
    assert window_difference(a, a) is None
    # at MIN_FAMILY indices a side is a window; one fewer is not
    assert window_difference(a, b[:MIN_FAMILY]) is not None
    assert window_difference(a, b[:MIN_FAMILY - 1]) is None
