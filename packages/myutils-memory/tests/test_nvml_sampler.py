"""NvmlSampler through the real pynvml: no driver at all, then a fake libnvidia-ml.so.1 built with gcc."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from my_utils.memory.nvml_sampler import ENERGY_INTEGRATED, ENERGY_NONE, ENERGY_NVML, NvmlSampler

pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (the [nvml] extra)")


def test_no_driver_is_a_reason_not_an_error() -> None:
    """A fresh process on this machine: pynvml finds no library; open() says so."""
    code = textwrap.dedent("""
        import ctypes.util
        from my_utils.memory.nvml_sampler import NvmlSampler
        print(ctypes.util.find_library("nvidia-ml") is None, NvmlSampler().open())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    if out.startswith("False"):
        pytest.skip("this machine has a real libnvidia-ml")
    assert out == "True NVML Shared Library Not Found"


def test_full_driver(use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("full")
    s = NvmlSampler(1)
    assert s.open() is None
    try:
        assert s.device_name == "Fake GPU 1" and s.energy_method == ENERGY_NVML and s.notes == []
        first, second = s.sample(0.0), s.sample(1.0)
        assert first == {"gpu_util_pct": 42.0, "mem_bw_util_pct": 25.0, "gpu_mem_used_bytes": float(3 << 30),
                         "power_w": 250.0, "energy_j": 1.0}  # the counter grows 1 J per reading
        assert second["energy_j"] == 2.0
    finally:
        s.close()


def test_driver_without_the_energy_counter_integrates_power(use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("no_energy")
    s = NvmlSampler(0)
    assert s.open() is None
    try:
        assert s.energy_method == ENERGY_INTEGRATED
        assert s.notes == ["nvmlDeviceGetTotalEnergyConsumption: Function Not Found; energy is integrated power"]
        assert s.sample(10.0)["energy_j"] == 0.0
        assert s.sample(12.0)["energy_j"] == pytest.approx(500.0)  # 250 W for 2 s
        assert s.sample(12.5)["power_w"] == 250.0
    finally:
        s.close()


def test_driver_without_power_drops_power_and_energy_only(use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("no_power")
    s = NvmlSampler(0)
    assert s.open() is None
    try:
        assert s.energy_method == ENERGY_NONE
        sample = s.sample(0.0)
        assert set(sample) == {"gpu_util_pct", "mem_bw_util_pct", "gpu_mem_used_bytes"}
        assert any("no power and no energy" in n for n in s.notes)
    finally:
        s.close()


def test_no_such_gpu(use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("full")
    reason = NvmlSampler(7).open()
    assert reason == "GPU 7: Invalid Argument"


def test_subprocess_finds_the_fake_by_library_path(fake_nvml_libs: dict[str, Path]) -> None:
    """How a separate process (a training job) would load it: the loader's search path."""
    code = "from my_utils.memory.nvml_sampler import NvmlSampler as S; s = S(2); print(s.open(), s.device_name)"
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_nvml_libs["full"].parent), "FAKE_NVML_GPUS": "3"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "None Fake GPU 2"
