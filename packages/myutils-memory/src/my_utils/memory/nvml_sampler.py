"""The NVML seam of the monitor: utilisation, memory-bandwidth utilisation, power, energy of one GPU.

``nvidia-ml-py`` (module ``pynvml``) is imported when a sampler opens, never at import.
``open()`` answers None or the reason NVML cannot be used (no library, no driver, no such
device), which the monitor records once as ``NVML unavailable: <reason>``. A call that the
driver lacks (``NVMLError_FunctionNotFound``, an old driver) or that the GPU does not
support drops that one metric, noted once; the others go on.

Energy is ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded; reported
from the first sample) where the driver has it, else power integrated over time; the
method is in ``energy_method``, so a missing reading is never a silent 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ENERGY_INTEGRATED", "ENERGY_NONE", "ENERGY_NVML", "NvmlSampler"]

ENERGY_NVML = "nvml_total_energy"
ENERGY_INTEGRATED = "integrated_power"
ENERGY_NONE = "unavailable"


class NvmlSampler:
    """Samples one GPU through pynvml (which finds ``libnvidia-ml.so.1`` the usual way)."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self.device_name = ""
        self.energy_method = ENERGY_NONE
        self.notes: list[str] = []  # metrics dropped, each said once
        self._nvml: Any = None
        self._handle: Any = None
        self._dropped: set[str] = set()
        self._energy0: float | None = None
        self._energy_j = 0.0
        self._last_t: float | None = None

    def open(self) -> str | None:
        """Initialise NVML and find the device; None when ready, else why not (never raises)."""
        try:
            import pynvml
        except ImportError as exc:
            return f"nvidia-ml-py is not installed ({exc}); pip install 'myutils-memory[nvml]'"
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return str(exc) or type(exc).__name__
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
            name = pynvml.nvmlDeviceGetName(self._handle)
            self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:
            pynvml.nvmlShutdown()
            return f"GPU {self.device_index}: {exc}"
        self._nvml = pynvml
        self._pick_energy_method()
        return None

    def _pick_energy_method(self) -> None:
        nv = self._nvml
        try:
            self._energy0 = float(nv.nvmlDeviceGetTotalEnergyConsumption(self._handle))
            self.energy_method = ENERGY_NVML
            return
        except nv.NVMLError as exc:
            self.notes.append(f"nvmlDeviceGetTotalEnergyConsumption: {exc}; energy is integrated power")
        try:
            nv.nvmlDeviceGetPowerUsage(self._handle)
            self.energy_method = ENERGY_INTEGRATED
        except nv.NVMLError as exc:
            self.notes.append(f"nvmlDeviceGetPowerUsage: {exc}; no power and no energy")
            self._dropped.add("power_w")

    def _read(self, metric: str, call: Callable[[], Any]) -> Any:
        """``call()``, or None after dropping ``metric`` when the driver lacks or does not support it."""
        nv = self._nvml
        try:
            return call()
        except (nv.NVMLError_FunctionNotFound, nv.NVMLError_NotSupported) as exc:
            self._dropped.add(metric)
            self.notes.append(f"{metric} dropped: {exc}")
            return None

    def sample(self, t: float) -> dict[str, float]:
        """The metrics at time ``t`` (seconds, monotonic); a driver error other than "missing" raises."""
        nv, h, out = self._nvml, self._handle, {}
        if nv is None:
            return {}
        if "utilization" not in self._dropped:
            u = self._read("utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h))
            if u is not None:
                out["gpu_util_pct"] = float(u.gpu)
                out["mem_bw_util_pct"] = float(u.memory)
        if "gpu_mem_used_bytes" not in self._dropped:
            m = self._read("gpu_mem_used_bytes", lambda: nv.nvmlDeviceGetMemoryInfo(h))
            if m is not None:
                out["gpu_mem_used_bytes"] = float(m.used)
        if "power_w" not in self._dropped:
            p = self._read("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h))
            if p is not None:
                out["power_w"] = p / 1000.0
        if self.energy_method == ENERGY_NVML:
            e = self._read("energy_j", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
            if e is not None and self._energy0 is not None:
                out["energy_j"] = (float(e) - self._energy0) / 1000.0
        elif self.energy_method == ENERGY_INTEGRATED and "power_w" in out:
            if self._last_t is not None:
                self._energy_j += out["power_w"] * (t - self._last_t)
            out["energy_j"] = self._energy_j
        self._last_t = t
        return out

    def close(self) -> None:
        """Shut NVML down (its init is reference-counted); never raises."""
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None
