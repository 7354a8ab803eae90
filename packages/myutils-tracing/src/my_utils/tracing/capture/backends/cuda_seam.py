"""The seam to cudaProfilerStart/Stop: torch.cuda.profiler, else libcudart through ctypes.

Each seam answers ``available()`` with a reason when it is not, so the backend can degrade
(once, with that reason) on machines without a GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Availability:
    """Whether a hardware seam can be used, and why not."""

    ok: bool
    reason: str = ""


class CudaProfilerSeam(Protocol):
    """The three calls ``CudaProfilerBackend`` needs."""

    def available(self) -> Availability:
        """Whether the calls below work here."""

    def synchronize(self) -> None:
        """Wait for the device to finish queued work."""

    def profiler_start(self) -> None:
        """cudaProfilerStart."""

    def profiler_stop(self) -> None:
        """cudaProfilerStop."""


class TorchCudaSeam:
    """``torch.cuda.synchronize`` and ``torch.cuda.profiler.start/stop``."""

    def available(self) -> Availability:
        """Available when torch imports and sees a CUDA device."""
        try:
            import torch
        except ImportError as exc:
            return Availability(False, f"torch is not importable ({exc})")
        if not torch.cuda.is_available():
            build = torch.version.cuda or "none (CPU build)"
            return Availability(False, f"torch {torch.__version__} sees no CUDA device (CUDA build: {build})")
        return Availability(True)

    def synchronize(self) -> None:
        """torch.cuda.synchronize()."""
        import torch

        torch.cuda.synchronize()

    def profiler_start(self) -> None:
        """torch.cuda.profiler.start()."""
        import torch.cuda.profiler

        torch.cuda.profiler.start()

    def profiler_stop(self) -> None:
        """torch.cuda.profiler.stop()."""
        import torch.cuda.profiler

        torch.cuda.profiler.stop()


class CudartSeam:
    """The CUDA runtime library through ctypes (no torch needed)."""

    def __init__(self, library: str | None = None) -> None:
        self._library = library
        self._lib: ctypes.CDLL | None = None

    def _load(self) -> ctypes.CDLL:
        if self._lib is None:
            names = [self._library] if self._library else [
                ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12", "libcudart.so.13",
                "libcudart.so.11.0"]
            errors = []
            for name in names:
                if not name:
                    continue
                try:
                    self._lib = ctypes.CDLL(name)
                    break
                except OSError as exc:
                    errors.append(str(exc))
            if self._lib is None:
                raise OSError("; ".join(errors) or "libcudart not found")
        return self._lib

    def _call(self, name: str) -> None:
        code = getattr(self._load(), name)()
        if code != 0:
            raise RuntimeError(f"{name} returned CUDA error {code}")

    def available(self) -> Availability:
        """Available when libcudart loads and reports at least one device."""
        try:
            lib = self._load()
        except OSError as exc:
            return Availability(False, f"the CUDA runtime library is not loadable ({exc})")
        count = ctypes.c_int(0)
        code = lib.cudaGetDeviceCount(ctypes.byref(count))
        if code != 0 or count.value == 0:
            return Availability(False, f"cudaGetDeviceCount returned error {code} with {count.value} devices")
        return Availability(True)

    def synchronize(self) -> None:
        """cudaDeviceSynchronize."""
        self._call("cudaDeviceSynchronize")

    def profiler_start(self) -> None:
        """cudaProfilerStart."""
        self._call("cudaProfilerStart")

    def profiler_stop(self) -> None:
        """cudaProfilerStop."""
        self._call("cudaProfilerStop")


def default_cuda_seam() -> CudaProfilerSeam:
    """The torch seam when torch sees a GPU, else the ctypes seam when it works, else the torch one.

    The fallback keeps the torch seam's reason, the more useful one on a CPU machine.
    """
    torch_seam = TorchCudaSeam()
    if torch_seam.available().ok:
        return torch_seam
    cudart = CudartSeam()
    if cudart.available().ok:
        return cudart
    return torch_seam
