"""Clock choice for ModuleProfiler: the CUDA seam answers with a reason on a CPU build and never raises."""

from __future__ import annotations

import logging
import time

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.hooks.timing import CpuClock, CudaEventClock, choose_clock, cuda_status


def test_cpu_clock_measures_real_time() -> None:
    clock = CpuClock()
    a = clock.mark()
    time.sleep(0.005)
    b = clock.mark()
    clock.settle()
    assert 5.0 <= clock.elapsed_ms(a, b) < 1000.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-build answer")
def test_cuda_status_says_why_not_on_a_cpu_build() -> None:
    status = cuda_status()
    assert not status.ok
    assert f"torch {torch.__version__} sees no CUDA device" in status.reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-build fallback")
def test_use_cuda_true_without_gpu_warns_with_the_reason(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "my_utils.hooks"):
        clock = choose_clock(torch.nn.Linear(1, 1), use_cuda=True)
    assert isinstance(clock, CpuClock)
    assert "ModuleProfiler(use_cuda=True) times on the CPU" in caplog.text and "no CUDA device" in caplog.text


def test_cpu_model_gets_the_cpu_clock() -> None:
    assert isinstance(choose_clock(torch.nn.Linear(1, 1), use_cuda=None), CpuClock)
    assert isinstance(choose_clock(torch.nn.ReLU(), use_cuda=None), CpuClock)  # no parameters at all
    assert isinstance(choose_clock(torch.nn.Linear(1, 1), use_cuda=False), CpuClock)


def test_bad_use_cuda_is_refused() -> None:
    with pytest.raises(UsageError, match=r"use_cuda='yes'.*True, False or None"):
        choose_clock(torch.nn.Linear(1, 1), use_cuda="yes")  # type: ignore[arg-type]


@pytest.mark.cuda
def test_cuda_model_gets_cuda_events() -> None:
    model = torch.nn.Linear(64, 64).cuda()
    clock = choose_clock(model, use_cuda=None)
    assert isinstance(clock, CudaEventClock)
    a = clock.mark()
    x = model(torch.randn(256, 64, device="cuda"))
    b = clock.mark()
    clock.settle()
    assert clock.elapsed_ms(a, b) > 0 and x.shape == (256, 64)
