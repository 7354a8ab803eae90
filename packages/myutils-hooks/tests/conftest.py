"""Fixtures for the myutils-hooks tests: small real torch models, and the NVTX recorder of myutils-tracing.

The NVTX injection recorder (build and subprocess runner) is the one the tracing tests use,
loaded from their conftest by path rather than written twice.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

_TRACING_CONFTEST = Path(__file__).resolve().parents[2] / "myutils-tracing" / "tests" / "conftest.py"


def _tracing_conftest() -> Any:
    name = "myutils_tracing_test_conftest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _TRACING_CONFTEST)
        assert spec is not None and spec.loader is not None, _TRACING_CONFTEST
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


nvtx_recorder = _tracing_conftest().nvtx_recorder
run_recorded = _tracing_conftest().run_recorded


class Sleep(torch.nn.Module):
    """A leaf whose forward takes at least ``ms`` milliseconds (a known duration to measure)."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.ms = ms
        self.spent: list[float] = []  # ms each call really took, measured inside forward

    def forward(self, x: Any) -> Any:
        t0 = time.perf_counter()
        time.sleep(self.ms / 1000)
        self.spent.append((time.perf_counter() - t0) * 1000)
        return x


class Boom(torch.nn.Module):
    """A leaf that raises ``error`` while ``armed`` is set."""

    def __init__(self, error: BaseException | None = None) -> None:
        super().__init__()
        self.armed = False
        self.error = error if error is not None else ValueError("boom")

    def forward(self, x: Any) -> Any:
        if self.armed:
            raise self.error
        return x + 1


@pytest.fixture
def sleep_cls() -> type[Sleep]:
    """The ``Sleep`` leaf module class."""
    return Sleep


@pytest.fixture
def boom_cls() -> type[Boom]:
    """The ``Boom`` leaf module class."""
    return Boom


@pytest.fixture
def mlp() -> Any:
    """A nested real model: two blocks of Linear+ReLU, and a head (5 leaves, 3 containers)."""
    torch.manual_seed(0)

    def block() -> Any:
        return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())

    return torch.nn.Sequential(block(), block(), torch.nn.Linear(16, 4))


def hook_count(model: Any) -> int:
    """Forward pre/post hooks registered on any module of ``model``."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture
def count_hooks() -> Any:
    """``count_hooks(model)``: how many forward hooks remain registered on the model."""
    return hook_count
