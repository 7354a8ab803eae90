"""What ran where, read from a Kineto trace's own metadata during the one parse: GPU, ranks, host, versions.

torch.profiler writes top-level keys beside ``traceEvents``: ``deviceProperties`` (one object
per visible GPU: ``name``, ``totalGlobalMem``, ``computeMajor``/``computeMinor``, ``numSms``),
``distributedInfo`` (``backend``, ``rank``, ``world_size``), and in newer versions
``host_name``, ``cuda_runtime_version``, ``cuda_driver_version``, ``cupti_version``,
``baseTimeNanoseconds``. :func:`trace_context` turns them into one flat, JSON-ready dict; a
field the trace does not hold is absent (never guessed), and ``missing`` names those a
reader would look for. ``devices_used`` are the GPUs holding activity in this trace (the
``pid`` of its GPU lanes), which can be fewer than the GPUs visible to the process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Fields a reader expects in a context; the absent ones are listed in ``missing``.
EXPECTED = ("gpu", "gpu_count", "world_size", "rank", "host", "cuda_runtime", "cuda_driver")


def trace_context(metadata: Mapping[str, Any], rank: int | None, rank_source: str,
                  devices_used: Iterable[Any] = ()) -> dict[str, Any]:
    """The context of one trace (see the module docstring); ``rank``/``rank_source`` as resolved by the caller.

    The metadata is parsed by the one reader, ``kineto.read.context.trace_context`` (also
    behind ``diff``'s hardware comparison); this adds what the analysis pass knows besides.
    """
    from my_utils.profiling.kineto.read.context import trace_context as read_context

    read = read_context(metadata)
    out: dict[str, Any] = {"rank": rank, "rank_source": rank_source}
    out.update((k, v) for k, v in read.hardware().items() if k not in ("rank", "rank_source"))
    used = sorted({d for d in devices_used if isinstance(d, int) and not isinstance(d, bool)})
    if used:
        out["devices_used"] = used
    if read.capture_start_unix_s is not None:
        out["capture_start_unix_s"] = read.capture_start_unix_s
    out["missing"] = [k for k in EXPECTED if out.get(k) is None]
    return out


#: Launch calls that name the device family (HTA's ``infer_gpu_type`` reads the first, third and fourth).
_LAUNCHES = (("cudaLaunchKernel", "CUDA"), ("hipLaunchKernel", "ROCm"),
             ("runFunction - job_prep_and_submit_for_execution", "MTIA"))


def device_type(metadata: Mapping[str, Any], runtime_names: Iterable[str], gpu_labels: Iterable[str] = ()
                ) -> tuple[str, str]:
    """The accelerator family of a trace (``CUDA``, ``ROCm``, ``MTIA``, ``none`` or ``unknown``) and what said so.

    Holistic Trace Analysis' rule first (``infer_gpu_type``: an ``mtia:hccl`` backend, then a
    ``cudaLaunchKernel``, ``hipLaunchKernel`` or MTIA ``runFunction`` call), then what it leaves
    unknown: other CUDA or HIP runtime and driver calls (Triton launches with ``cuLaunchKernel``)
    and the device lanes' labels (``GPU 0``, ``MTIA 17``).
    """
    info = metadata.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, Mapping) else None
    if isinstance(backend, str) and "mtia:hccl" in backend:
        return "MTIA", "distributedInfo.backend mtia:hccl"
    names = set(runtime_names)
    for call, family in _LAUNCHES:
        if call in names:
            return family, f"{call} calls"
    for prefix, family in (("cuda", "CUDA"), ("cu", "CUDA"), ("hip", "ROCm")):
        found = sorted(n for n in names if n.startswith(prefix) and n[len(prefix):][:1].isupper())
        if found:
            return family, f"{found[0]} calls"
    labels = sorted({str(x).split(" ")[0].upper() for x in gpu_labels})
    if "MTIA" in labels:
        return "MTIA", "device lanes labelled MTIA"
    if "GPU" in labels:
        return "unknown", "device lanes labelled GPU, no launch call recorded"
    return ("none", "no device activity and no launch call") if not labels else ("unknown", "no launch call")


def run_context(contexts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """All ranks' contexts as the report's ``hardware``: one value per field when the ranks agree, else a list.

    ``ranks`` lists the ranks analysed; ``world_size`` is the declared one (ranks analysed can be fewer).
    """
    rows = list(contexts)
    out: dict[str, Any] = {"ranks": sorted(r["rank"] for r in rows if r.get("rank") is not None)}
    for key in ("gpu", "device_type", "gpu_count", "gpu_memory_gib", "compute_capability", "sms", "world_size",
                "backend", "host",
                "cuda_runtime", "cuda_driver", "cupti", "nccl"):
        values = []
        for r in rows:
            v = r.get(key)
            if v is not None and v not in values:
                values.append(v)
        if len(values) == 1:
            out[key] = values[0]
        elif values:
            out[key] = values
    if any(r.get("rank") is None for r in rows):
        out["ranks_unknown"] = sum(1 for r in rows if r.get("rank") is None)
    out["source"] = "Kineto trace metadata (deviceProperties, distributedInfo, versions)"
    return out
