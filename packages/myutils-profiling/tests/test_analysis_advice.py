"""Advice keyed by the kind of evidence: operator families by tokens, the optimizer in use, jitter causes."""

from __future__ import annotations

import inspect
import random

import pytest

from my_utils.core.events import MetricEvent
from my_utils.core.testing.contract import check_analysis_rule
from my_utils.profiling.analysis.advice import (
    TORCH_OPTIMIZERS,
    advice_for,
    family_of,
    optimizer_advice,
    optimizer_class,
    tokens,
)


def _d(name: str, value: float, step: int, depth: int | None = 0, source: str = "mytimer") -> MetricEvent:
    return MetricEvent(name, value, "duration", "ms", source, 0, step, attrs={"depth": depth} if depth is not None else {})


@pytest.mark.parametrize(("name", "family"), [
    ("DistributedDataParallel.forward", "model_wrapper"),  # before: "data loading" (substring "Data")
    ("annotation:DistributedDataParallel.forward", "model_wrapper"),
    ("FullyShardedDataParallel.forward", "model_wrapper"),
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "data_loading"),
    ("data", "data_loading"),
    ("data_loading", "data_loading"),
    ("metadata_update", None),
    ("cpu_op:aten::batch_norm", None),
    ("cpu_op:c10d::allreduce_", "communication"),
    ("kernel:ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication"),
    ("cpu_op:record_param_comms", "communication"),
    ("memcpy:Memcpy HtoD (Pageable -> Device)", "copies"),
    ("cpu_op:aten::item", "copies"),
    ("annotation:Optimizer.step#AdamW.step", "optimizer"),
    ("Shampoo.step", "optimizer"),
    ("optimizer", "optimizer"),
    ("annotation:## backward ##", "backward"),
    ("cpu_op:autograd::engine::evaluate_function: NllLossBackward0", "backward"),
    ("annotation:## forward ##", "compute"),
    ("kernel:sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "compute"),
    ("save_checkpoint", "io"),
    ("ProfilerStep#5", None),
])
def test_families_match_whole_tokens_never_substrings(name: str, family: str | None) -> None:
    found = family_of(name)
    assert (found.key if found else None) == family, tokens(name)


def test_ddp_forward_gets_no_data_loading_advice_or_finding() -> None:
    events = []
    for s in range(10):
        events += [_d("DistributedDataParallel.forward", 40.0, s), _d("backward", 60.0, s),
                   _d("step_time", 100.0, s, depth=None)]
    assert [f for f in check_analysis_rule("suggestions", events) if "data_loading" in f["id"]] == []
    (f,) = [f for f in check_analysis_rule("bottleneck", events) if "Distributed" in f["id"]]
    assert "DataLoader" not in f["suggestion"] and "num_workers" not in f["suggestion"]
    assert f["advice"][0]["kind"] == "model_wrapper"


def test_the_optimizer_table_matches_torch() -> None:
    torch_optim = pytest.importorskip("torch.optim", reason="the table is checked against torch's own signatures")
    found = {}
    for name in dir(torch_optim):
        cls = getattr(torch_optim, name)
        if isinstance(cls, type) and issubclass(cls, torch_optim.Optimizer) and cls is not torch_optim.Optimizer:
            params = inspect.signature(cls.__init__).parameters
            found[name] = ("fused" in params, "foreach" in params)
    assert found == TORCH_OPTIMIZERS


@pytest.mark.parametrize(("name", "cls", "says", "never"), [
    ("annotation:Optimizer.step#SGD.step", "SGD", "SGD(..., fused=True)", "AdamW"),
    ("annotation:Optimizer.step#AdamW.step", "AdamW", "AdamW(..., fused=True)", "no fused"),
    ("annotation:Optimizer.step#Adadelta.step", "Adadelta", "no fused implementation", "fused=True"),
    ("annotation:Optimizer.step#LBFGS.step", "LBFGS", "neither a fused nor a foreach", "fused=True"),
    ("annotation:Optimizer.step#Shampoo.step", "Shampoo", "not a torch.optim class", "fused=True"),
    ("Shampoo.step", "Shampoo", "not a torch.optim class", "AdamW"),
])
def test_optimizer_advice_is_for_the_optimizer_in_use(name: str, cls: str, says: str, never: str) -> None:
    assert optimizer_class(name) == cls
    kind, text = advice_for(name)
    assert kind == "optimizer" and says in text and never not in text  # before: AdamW(fused=True) for all


def test_a_timer_region_named_optimizer_takes_the_class_from_the_trace() -> None:
    _kind, text = advice_for("optimizer", {"annotation:Optimizer.step#SGD.step", "forward"})
    assert text == optimizer_advice("SGD")
    _kind, text = advice_for("optimizer", {"forward"})
    assert "does not name the optimizer class" in text
    _kind, text = advice_for("annotation:## optimizer ##", {"annotation:Optimizer.step#EMAOptimizer.step",
                                                             "annotation:Optimizer.step#Shampoo.step"})
    assert "EMAOptimizer" in text and "Shampoo" in text  # a wrapper around the optimizer: advice for both


def _jittery(spike_in: str | None, steps: int = 60, every: int = 0) -> list[MetricEvent]:
    rng = random.Random(5)
    events = []
    for s in range(steps):
        parts = {"data": 10 * (1 + rng.gauss(0, 0.02)), "forward": 30 * (1 + rng.gauss(0, 0.02)),
                 "backward": 60 * (1 + rng.gauss(0, 0.02))}
        if spike_in and (s == 31 or (every and s % every == 0 and s)):
            parts[spike_in] += 200.0
        events += [_d(n, v, s) for n, v in parts.items()]
        events.append(_d("step_time", sum(parts.values()) + (200.0 if spike_in == "" and s == 31 else 0.0), s,
                         depth=None))
    return events


def test_jitter_gets_jitter_advice_from_its_evidence_never_bottleneck_remedies() -> None:
    (f,) = check_analysis_rule("anomalies", _jittery("data"))
    assert f["evidence"]["explained_by"]["name"] == "data" and f["advice"][0]["kind"] == "jitter:explained"
    assert "num_workers" in f["suggestion"] and "checkpointing" not in f["suggestion"]
    (f,) = check_analysis_rule("anomalies", _jittery(""))  # the step alone: no timed region explains it
    assert f["advice"][0]["kind"] == "jitter:unexplained" and "garbage collector" in f["suggestion"]
    (f,) = [f for f in check_analysis_rule("anomalies", _jittery("backward", every=10))
            if f["id"].endswith("step_time:rank0")]
    assert "backward" in f["suggestion"] and "activation checkpointing trades" not in f["suggestion"].split(":")[0]
    periodic = [f for f in check_analysis_rule("anomalies", _jittery("backward", every=10), warmup_steps=0)
                if f["id"].endswith("step_time:rank0")]
    assert periodic and ("every 10 steps" in periodic[0]["suggestion"] or "backward" in periodic[0]["suggestion"])
    events = [e for e in _jittery(None) if e.name != "data"]
    rng = random.Random(9)
    events += [_d("data", 10 * (1 + abs(rng.gauss(0, 1.5))), s) for s in range(60)]
    spread = [f for f in check_analysis_rule("variability", events) if f["id"].startswith("variability:")]
    assert spread and all("checkpointing" not in f["suggestion"] for f in spread)
    assert any(f["advice"][0]["kind"] == "jitter:spread" and "num_workers" in f["suggestion"] for f in spread)
