"""Short kernel names: demangled, templates folded, distinct, never longer than the chart's margin."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.reports.names import MAX_LABEL, ellipsize, short_kernel_name, short_names

ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
       "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
       "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
       "at::detail::Array<char*, 3>)")


@pytest.mark.parametrize("name, short", [
    (ADD, "vectorized_elementwise_kernel<…>"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),  # not a signature: kept
    ("volta_sgemm_128x32_nt", "volta_sgemm_128x32_nt"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, "
     "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>)",
     "CatArrayBatchedCopy<…>"),
    ("void permute_pooled_embs_kernel<float>(float const*, long const*, float*, long)",
     "permute_pooled_embs_kernel<float>"),  # one short argument names the kernel: kept
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>("
     "cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)",
     "Kernel<cutlass_80_tensorop_s1688gemm…x64_32x6_nt_align1>"),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_",
     "vectorized_elementwise_kernel<…>"),  # mangled: demangled as far as the name goes
    ("_Z10matrix_mulPfS_S_i", "matrix_mul"),
    ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
])
def test_short_kernel_name(name: str, short: str) -> None:
    assert short_kernel_name(name) == short


def test_names_that_fold_alike_say_what_tells_them_apart() -> None:
    assert short_names([ADD, MUL]) == ["vectorized_elementwise_kernel<…CUDAFunctor_add…>",
                                       "vectorized_elementwise_kernel<…BinaryFunctor…>"]
    long_a = "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<float>(float*)"
    long_b = "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_cta_per_row_1<float>(float*)"
    a, b = short_names([long_a, long_b])
    assert "unweighted" in a and "weighted" in b and "unweighted" not in b  # the cut keeps the difference
    assert short_names(["k<int>(int)", "k<int>(float)"]) == ["k<int> #1", "k<int> #2"]  # overloads: numbered


def test_real_kernel_names_are_short_and_distinct(real_fixtures: Any) -> None:
    import gzip
    import json

    names: set[str] = set()
    for trace in ("kineto/hta/df_index_resolver.json.gz", "kineto/hta/trace_filter__sampled_rank-0.json.gz"):
        with gzip.open(real_fixtures / trace, "rt", encoding="utf-8") as fh:
            names.update(e["name"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel")
    ordered = sorted(names)
    shorts = short_names(ordered)
    assert len(set(shorts)) == len(ordered) > 30
    assert max(len(s) for s in shorts) <= MAX_LABEL
    assert not any(s.startswith("void ") or "at::native::" in s or (s.endswith(")") and "(" in s and " (" not in s)
                   for s in shorts)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.text(alphabet="ab<>(), :_#1", max_size=40), max_size=12, unique=True))
def test_short_names_are_distinct_and_bounded(names: list[str]) -> None:
    shorts = short_names(names)
    assert len(shorts) == len(names)
    assert all(len(s) <= MAX_LABEL for s in shorts)
    assert len(set(shorts)) == len(names)  # distinct inputs stay distinct (a hint, the cut moved, or a number)


def test_ellipsize_keeps_both_ends() -> None:
    assert ellipsize("abcdefghij", 7) == "abcd…ij" and ellipsize("short", 7) == "short"
