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


def _version(raw: Any) -> str | None:
    """CUDA's integer versions (``12000``) as ``12.0``; strings kept."""
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        n = int(str(raw))
    except ValueError:
        return str(raw)
    return f"{n // 1000}.{n % 1000 // 10}" if n >= 1000 else str(n)


def _int(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def trace_context(metadata: Mapping[str, Any], rank: int | None, rank_source: str,
                  devices_used: Iterable[Any] = ()) -> dict[str, Any]:
    """The context of one trace (see the module docstring); ``rank``/``rank_source`` as resolved by the caller."""
    out: dict[str, Any] = {"rank": rank, "rank_source": rank_source}
    props = metadata.get("deviceProperties")
    gpus = [p for p in props if isinstance(p, Mapping)] if isinstance(props, list) else []
    if gpus:
        models = sorted({str(p.get("name", "?")) for p in gpus})
        out["gpu"] = models[0] if len(models) == 1 else " / ".join(models)
        out["gpu_count"] = len(gpus)
        first = gpus[0]
        mem = _int(first.get("totalGlobalMem"))
        if mem:
            out["gpu_memory_gib"] = round(mem / 2**30, 1)
        major, minor = _int(first.get("computeMajor")), _int(first.get("computeMinor"))
        if major is not None and minor is not None:
            out["compute_capability"] = f"{major}.{minor}"
        if _int(first.get("numSms")):
            out["sms"] = first["numSms"]
    used = sorted({d for d in devices_used if isinstance(d, int) and not isinstance(d, bool)})
    if used:
        out["devices_used"] = used
    info = metadata.get("distributedInfo")
    if isinstance(info, Mapping):
        if _int(info.get("world_size")):
            out["world_size"] = info["world_size"]
        if isinstance(info.get("backend"), str):
            out["backend"] = info["backend"]
    for key in ("host_name", "hostname"):
        if isinstance(metadata.get(key), str) and metadata[key] and "host" not in out:
            out["host"] = metadata[key]
    for key, name in (("cuda_runtime_version", "cuda_runtime"), ("cuda_driver_version", "cuda_driver"),
                      ("cupti_version", "cupti")):
        version = _version(metadata.get(key))
        if version:
            out[name] = version
    base = metadata.get("baseTimeNanoseconds")
    if isinstance(base, (int, str)) and str(base).isdigit():
        out["capture_start_unix_s"] = int(str(base)) / 1e9
    out["missing"] = [k for k in EXPECTED if out.get(k) is None]
    return out


def run_context(contexts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """All ranks' contexts as the report's ``hardware``: one value per field when the ranks agree, else a list.

    ``ranks`` lists the ranks analysed; ``world_size`` is the declared one (ranks analysed can be fewer).
    """
    rows = list(contexts)
    out: dict[str, Any] = {"ranks": sorted(r["rank"] for r in rows if r.get("rank") is not None)}
    for key in ("gpu", "gpu_count", "gpu_memory_gib", "compute_capability", "sms", "world_size", "backend", "host",
                "cuda_runtime", "cuda_driver", "cupti"):
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
