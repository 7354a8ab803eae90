"""The advice gate, the capture's contents and the diagnosis on the inputs the other tests leave out (issue 36).

Each test is a plausible bug of ``.ci/mutants/diagnosis.toml`` that ``test_analysis_advice_gate.py``
let pass: unknown (a MyTimer-only run: no GPU or framework known) never rules advice out, fusion
applies to a memory-transfer-bound run, a torch.profiler trace is a PyTorch program whatever its
names, no computation kernel ran when the kinds table counts none or ``gpu.compute`` is 0, a
triage finding agreeing with the verdict in one of its kinds is kept, and a small e-notation
number keeps its three significant digits.
"""

from __future__ import annotations

from my_utils.profiling.analysis.advice_gate import removed_pieces
from my_utils.profiling.analysis.contents import CaptureContents, capture_contents
from my_utils.profiling.analysis.diagnosis import diagnose, plain_number
from my_utils.profiling.model.report import Advice, Fact, Finding


def test_unknown_gpu_and_framework_rule_nothing_out() -> None:
    """A MyTimer-only run: no input says whether a GPU ran or the program is PyTorch, so CUDA graphs and
    torch.compile(mode="reduce-overhead") stay; known absent, they go."""
    unknown = removed_pieces("host", CaptureContents(gpu=None, pytorch=None))
    assert "cuda_graphs" not in unknown and "reduce_overhead" not in unknown
    assert "cuda_graphs" in removed_pieces("host", CaptureContents(gpu=False, pytorch=None))
    assert "reduce_overhead" in removed_pieces("host", CaptureContents(gpu=True, pytorch=False))


def test_fusion_applies_to_a_memory_transfer_bound_run() -> None:
    contents = CaptureContents(gpu=True, pytorch=True, compute_kernels=True)
    assert "compile_fusion" not in removed_pieces("memory", contents)
    assert "compile_fusion" in removed_pieces("host", contents)
    assert "mixed_precision" in removed_pieces("memory", contents)  # only where the kernels' own time bounds


def test_a_torch_profiler_trace_is_pytorch_whatever_its_names() -> None:
    """Kernel names alone read as "not PyTorch" (another framework or plain CUDA); the same names from a
    torch.profiler trace are a PyTorch program."""
    tables = {"operations": [{"name": "kernel:my_cuda_kernel(float*)"}]}
    assert capture_contents(tables, {}).pytorch is False
    assert capture_contents({**tables, "kineto_inputs": [{"file": "rank0.json"}]}, {}).pytorch is True


def test_no_computation_kernel_ran_when_none_is_counted() -> None:
    zero = {"kineto_kernel_kinds": [{"kind": "computation", "count": 0}, {"kind": "communication", "count": 4}]}
    assert capture_contents(zero, {}).compute_kernels is False
    some = {"kineto_kernel_kinds": [{"kind": "computation", "count": 2}]}
    assert capture_contents(some, {}).compute_kernels is True
    idle = Fact("gpu.compute", "GPU computing", 0.0, "%")
    assert capture_contents({}, {idle.id: idle}).compute_kernels is False
    busy = Fact("gpu.compute", "GPU computing", 0.5, "%")
    assert capture_contents({}, {busy.id: busy}).compute_kernels is True


def _gpu(compute: float) -> dict[str, Fact]:
    out = [Fact("gpu.busy", "GPU busy", 90.0, "%", "kineto", "GPU span", 1000.0, "ms"),
           Fact("gpu.idle", "GPU idle", 10.0, "%", "kineto", "GPU span", 1000.0, "ms"),
           Fact("gpu.compute", "GPU computing", compute, "%", "kineto", "GPU span", 1000.0, "ms")]
    return {f.id: f for f in out}


def test_a_triage_that_also_states_the_verdict_reached_is_kept() -> None:
    """A compute-bound run: a finding stating both compute and host triages agrees in one and stays; one stating
    only host is dropped, with the reason."""
    both = Finding("triage:mixed", "optimization", "info", "t", "",
                   advice=(Advice("a", kind="triage:host"), Advice("b", kind="triage:compute")))
    host = Finding("triage:host", "optimization", "info", "t", "", advice=(Advice("a", kind="triage:host"),))
    d = diagnose([both, host], _gpu(85.0), {})
    assert d.bound == "compute"
    assert [f.id for f in d.findings] == ["triage:mixed"] and [x["id"] for x in d.dropped] == ["triage:host"]


def test_a_small_e_notation_number_keeps_three_significant_digits() -> None:
    assert plain_number("took 1.23e-05 s") == "took 0.0000123 s"
    assert plain_number("took 4.56e-03 s") == "took 0.00456 s"
