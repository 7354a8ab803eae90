"""MFU of an nsys export: model FLOPs the user states per iteration, over the NVTX iteration time and the dense peak.

The Kineto MFU (``kineto.mfu``) counts FLOPs from the operators' recorded input shapes;
an nsys export records no shapes, and a GEMM kernel's name gives its tile, not its problem size,
so nothing in the export counts FLOPs. They are given (:class:`ModelFlops`): the FLOPs one GPU
does in one iteration (``--flops-per-iteration``), or ``6·N·T`` from the model's parameters ``N``
and the tokens one GPU processes per iteration ``T`` (``--model-params``, ``--tokens-per-iteration``:
the usual training estimate, forward and backward, attention left out). The math precision is
given too (``--dtype``): the Kineto MFU reads it from the operators' input types, which nsys does
not record, so there is no default — a bf16 peak is 2–15× a fp32 one, and a guessed denominator
would be a guessed MFU.

Per process with NVTX iterations (:mod:`.iterations`): MFU = F / (mean iteration time × the
GPU's dense peak for the dtype), the peak read from the one hardware table through
``hardware.peaks`` (the row cited by its line in ``hardware.csv``), the ratio by
``hardware.table.mfu``. The GPU is the one the iterations' kernels ran on (the export's GPU
table), or the export's only model, or ``--gpu`` when the export names none (sliced exports drop
the table). Whatever is missing — the FLOPs, the dtype, the iterations, the GPU, its peak — makes
the row "not measured" with every reason, never a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError

if TYPE_CHECKING:
    from my_utils.profiling.nsys.model import Iterations
    from my_utils.profiling.nsys.schema import GpuInfo

#: 6·N·T: forward (2) and backward (4) FLOPs per parameter and token (Kaplan et al. 2020, "Scaling Laws", §2.1).
FLOPS_PER_PARAM_TOKEN = 6.0
NO_FLOPS = ("no model FLOPs given: an nsys export records no operator shapes to count them from (give "
            "--flops-per-iteration, the FLOPs of one GPU in one iteration, or --model-params with "
            "--tokens-per-iteration for 6·N·T)")
NO_DTYPE = ("no math precision given: nsys records no operator input types (the Kineto MFU reads its dtype from "
            "them); name it with --dtype")


def _dtypes() -> tuple[str, ...]:
    from my_utils.profiling.hardware.table import DTYPES

    return DTYPES


def positive(text: object, option: str) -> float:
    """``text`` as a positive finite number (``3.2e15``); one-line UsageError naming ``option`` otherwise."""
    try:
        value = float(str(text).replace("_", "").strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} {text!r}: expected a positive finite number (e.g. 3.2e15)")
    return value


@dataclass(frozen=True)
class ModelFlops:
    """What one iteration of the model costs on one GPU, the precision it runs in, and the GPU when exports lack it."""

    flops_per_iteration: float | None = None
    params: float | None = None
    tokens_per_iteration: float | None = None
    dtype: str | None = None
    gpu: str | None = None

    @classmethod
    def parse(cls, *, flops: object = None, params: object = None, tokens: object = None, dtype: str | None = None,
              gpu: str | None = None) -> ModelFlops:
        """Checked options (numbers as text or numbers); a one-line UsageError naming the bad option."""
        if flops is not None and (params is not None or tokens is not None):
            raise UsageError("give --flops-per-iteration, or --model-params with --tokens-per-iteration, not both")
        if (params is None) != (tokens is None):
            raise UsageError("--model-params and --tokens-per-iteration go together (FLOPs per iteration = 6·N·T)")
        if dtype is not None and dtype not in _dtypes():
            raise UsageError(f"--dtype {dtype!r}: expected one of {', '.join(_dtypes())} (the hardware table's names)")
        if gpu is not None and not gpu.strip():
            raise UsageError("--gpu '': expected the GPU's name as tools report it (e.g. 'NVIDIA H100 80GB HBM3')")
        return cls(None if flops is None else positive(flops, "--flops-per-iteration"),
                   None if params is None else positive(params, "--model-params"),
                   None if tokens is None else positive(tokens, "--tokens-per-iteration"), dtype,
                   gpu.strip() if gpu else None)

    @property
    def flops(self) -> float | None:
        """FLOPs of one GPU in one iteration (None: not given)."""
        if self.flops_per_iteration is not None:
            return self.flops_per_iteration
        if self.params is not None and self.tokens_per_iteration is not None:
            return FLOPS_PER_PARAM_TOKEN * self.params * self.tokens_per_iteration
        return None

    @property
    def flops_source(self) -> str:
        """Where :attr:`flops` comes from, in words."""
        if self.flops_per_iteration is not None:
            return "--flops-per-iteration (given)"
        if self.params is not None and self.tokens_per_iteration is not None:
            return f"6·N·T with N = {self.params:.4g} parameters, T = {self.tokens_per_iteration:.4g} tokens (given)"
        return ""


@dataclass(frozen=True)
class MfuRow:
    """One process's MFU (``nsys_mfu``), or every reason it is not measured (``mfu_pct`` None)."""

    rank: int | None
    pid: int | None
    gpu: str | None
    gpu_source: str
    dtype: str | None
    flops_per_iteration: float | None
    flops_source: str
    iteration_range: str | None
    iterations: int
    time_ns: int  # the iterations' summed duration
    mean_iteration_ns: float | None
    achieved_tflops: float | None
    peak_tflops: float | None
    peak_row: str  # the hardware.csv row of the peak, by line
    peak_source: str
    mfu_pct: float | None
    not_measured: str


def mfu_rows(rank: int | None, gpus: Sequence[GpuInfo], iterations: Iterations | None, model: ModelFlops | None,
             iterations_reason: str) -> list[MfuRow]:
    """One row per process with iterations (one row for the export when it has none); module docstring."""
    model = model or ModelFlops()
    flops = model.flops
    base: dict[str, Any] = dict(rank=rank, dtype=model.dtype, flops_per_iteration=flops,
                                flops_source=model.flops_source,
                                iteration_range=iterations.pattern if iterations is not None else None)
    per = _per_process(iterations) if iterations is not None and iterations.stats else {None: (0, 0, ())}
    out = []
    for pid, (count, time_ns, devices) in per.items():
        gpu, gpu_source, gpu_reason = _gpu(gpus, devices, model.gpu)
        reasons = [r for r in (None if flops else NO_FLOPS, None if count else iterations_reason or "no NVTX "
                               "iterations", None if model.dtype else NO_DTYPE, gpu_reason) if r]
        peak_row = peak_source = ""
        peak_tflops = None
        if gpu is not None and model.dtype is not None:
            found = _peak(gpu, model.dtype)
            if isinstance(found, str):
                reasons.append(found)
            else:
                peak_tflops, peak_row, peak_source = found
        mean = time_ns / count if count else None
        mfu = achieved = None
        if not reasons and flops and mean:
            from my_utils.profiling.hardware.table import mfu as mfu_ratio

            ratio = mfu_ratio(flops, mean * 1e-9, str(gpu), str(model.dtype))
            achieved = flops / (mean * 1e-9) / 1e12
            if ratio is not None and ratio > 1.0:  # above the peak: the FLOPs or the dtype given are not this run's
                reasons.append(f"the FLOPs given imply {achieved:,.1f} TFLOP/s, above the {model.dtype} peak "
                               f"({peak_tflops:g} TFLOP/s): check --flops-per-iteration (one GPU, one iteration) "
                               "and --dtype")
            else:
                mfu = None if ratio is None else 100.0 * ratio
        out.append(MfuRow(pid=pid, gpu=gpu, gpu_source=gpu_source, iterations=count, time_ns=time_ns,
                          mean_iteration_ns=mean, achieved_tflops=achieved, peak_tflops=peak_tflops, peak_row=peak_row,
                          peak_source=peak_source, mfu_pct=mfu, not_measured="; ".join(reasons), **base))
    return out


def _per_process(iterations: Iterations) -> dict[Any, tuple[int, int, tuple[int, ...]]]:
    """pid → (iterations, their summed duration, the devices their kernels ran on), from the per-iteration table."""
    seen: dict[Any, dict[int, int]] = {}
    devices: dict[Any, set[int]] = {}
    for r in iterations.table.records():
        seen.setdefault(r["pid"], {})[r["iteration"]] = int(r["cpu_ns"] or 0)
        if isinstance(r.get("device"), int):
            devices.setdefault(r["pid"], set()).add(r["device"])
    return {pid: (len(its), sum(its.values()), tuple(sorted(devices.get(pid, ())))) for pid, its in seen.items()}


def _gpu(gpus: Sequence[GpuInfo], devices: Sequence[int], given: str | None) -> tuple[str | None, str, str | None]:
    """(GPU name, where it was read, reason when unknown) for a process whose kernels ran on ``devices``."""
    named = {g.device: g.name for g in gpus if g.name}
    used = sorted({named[d] for d in devices if d in named})
    if len(used) == 1:
        where = ", ".join(str(d) for d in devices)
        return used[0], f"the export's GPU table (device {where}, where the iterations' kernels ran)", None
    if len(used) > 1:
        return None, "", f"the iterations ran on GPUs of different models ({', '.join(used)})"
    models = sorted(set(named.values()))
    if len(models) == 1:
        return models[0], f"the export's GPU table (its only model, {len(named)} GPU(s))", None
    if len(models) > 1:
        return None, "", (f"the export lists GPUs of different models ({', '.join(models)}) and the iterations "
                          "launched no GPU work to tell which one")
    if given:
        return given, "--gpu (given: the export has no GPU table)", None
    return None, "", "the export names no GPU (no GPU table: a sliced export drops it); give --gpu"


def _peak(gpu: str, dtype: str) -> tuple[float, str, str] | str:
    """(peak TFLOP/s, its hardware.csv row, its source) of ``gpu`` in ``dtype``, or why the table has none."""
    from my_utils.profiling.hardware.peaks import peak_flops
    from my_utils.profiling.hardware.table import TABLE_PATH, figures, gpu_model

    peak = peak_flops(gpu, dtype)
    if peak is None:
        if gpu_model(gpu) is None:
            return f"{gpu!r} is not in the hardware table ({TABLE_PATH.name}): its peak is unknown"
        return f"no dense {dtype} peak for {gpu_model(gpu)} in the hardware table ({TABLE_PATH.name})"
    line = next((i + 2 for i, f in enumerate(figures()) if f.model == peak.model and f.quantity == "peak_flops"
                 and f.dtype == dtype), None)  # + header line, 1-based
    row = f"{TABLE_PATH.name} line {line}: {peak.model}, peak_flops, {dtype} = {peak.value:.4g} {peak.unit}"
    return peak.value / 1e12, row, f"{peak.source} <{peak.source_url}>"
