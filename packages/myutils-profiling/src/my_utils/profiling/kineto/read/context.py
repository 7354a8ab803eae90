"""What a Kineto trace says about the machine and the job it was captured on.

torch.profiler writes, beside ``traceEvents``, top-level keys that describe the run:
``deviceProperties`` (one object per visible device: ``name``, ``computeMajor``, ...),
``distributedInfo`` (``backend``, ``rank``, ``world_size``, ``nccl_version``), and in newer
versions ``cuda_runtime_version`` / ``cuda_driver_version`` / ``cupti_version`` (CUDA's
``1000 * major + 10 * minor`` integers) and sometimes ``host_name``. :func:`trace_context`
turns them into a :class:`TraceContext`; :meth:`TraceContext.hardware` is the flat mapping
an analysis report keeps as ``hardware`` and ``diff`` compares (the keys ``gpu`` and
``gpu_count`` are those ``collector.describe_host`` writes, so reports of live runs and of
traces compare alike).

Nothing here raises on odd metadata: a field of the wrong type is unknown (``None``), never
a guess; "unknown" is not a difference when two runs are compared. The metadata is read in
the same pass as the events (``TraceStream.metadata``); :func:`read_trace_context` streams
a file for a caller that does not parse it otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.profiling.formats._files import rank_from_name

#: Keys of :meth:`TraceContext.hardware` that describe *where* a trace was taken rather than
#: *what* ran: two runs differing only in these still compare like with like.
PLACE_KEYS = frozenset({"rank", "ranks", "rank_source", "ranks_unknown", "host", "hosts", "source"})


@dataclass(frozen=True)
class TraceContext:
    """The machine and job of one trace; ``None`` (or ``()``) where the trace does not say.

    ``gpus`` lists the device names of ``deviceProperties`` in device-id order (every device
    the process could see, not only those it used); ``rank_source`` says where ``rank``
    came from: ``"distributedInfo"``, ``"file name"`` or ``"unknown"``.
    """

    gpus: tuple[str, ...] = ()
    device_count: int | None = None
    world_size: int | None = None
    rank: int | None = None
    rank_source: str = "unknown"
    backend: str | None = None
    host: str | None = None
    cuda_runtime: str | None = None
    cuda_driver: str | None = None
    cupti: str | None = None
    nccl: str | None = None
    gpu_memory_gib: float | None = None
    compute_capability: str | None = None
    sms: int | None = None
    capture_start_unix_s: float | None = None

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """The distinct device names, in the order they first appear."""
        return tuple(dict.fromkeys(self.gpus))

    def hardware(self) -> dict[str, Any]:
        """The known fields as a flat mapping (a report's ``hardware``): ``gpu``, ``gpu_count``, ``world_size``, ...

        ``gpu`` is the model name, or the models joined with ``" + "`` when the devices differ.
        """
        out: dict[str, Any] = {}
        if self.gpus:
            out["gpu"] = " + ".join(self.gpu_models)
        for key in ("device_count", "world_size", "rank", "backend", "host", "cuda_runtime", "cuda_driver",
                    "cupti", "nccl", "gpu_memory_gib", "compute_capability", "sms"):
            value = getattr(self, key)
            if value is not None:
                out["gpu_count" if key == "device_count" else key] = value
        if self.rank is not None:
            out["rank_source"] = self.rank_source
        return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any, limit: int = 200) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:limit]
    return None


def _device_id(device: Mapping[str, Any]) -> int:
    found = _int(device.get("id"))
    return found if found is not None else 1 << 62  # devices without an id last, in file order


def cuda_version(value: Any) -> str | None:
    """CUDA's integer version (``12090``) as ``"12.9"``; a string is kept; anything else is unknown."""
    number = _int(value)
    if number is not None and number > 0:
        return f"{number // 1000}.{number % 1000 // 10}"
    return _text(value, 40)


def trace_context(metadata: Mapping[str, Any], path: str | Path | None = None) -> TraceContext:
    """The :class:`TraceContext` of a trace's top-level keys (``TraceStream.metadata``).

    ``path`` lets a trace without ``distributedInfo.rank`` take its rank from its file name
    (``rank-3``, ``worker0``), as the Kineto provider does.
    """
    devices = metadata.get("deviceProperties")
    gpus: tuple[str, ...] = ()
    count: int | None = None
    memory: float | None = None
    capability: str | None = None
    sms: int | None = None
    if isinstance(devices, list):
        listed = [d for d in devices if isinstance(d, Mapping)]
        ordered = sorted(listed, key=_device_id)
        gpus = tuple(_text(d.get("name")) or "unknown device" for d in ordered)
        count = len(listed)
        if ordered:  # the first device's properties (those of the device a rank uses, in practice)
            first = ordered[0]
            mem = _int(first.get("totalGlobalMem"))
            memory = round(mem / 2**30, 1) if mem and mem > 0 else None
            major, minor = _int(first.get("computeMajor")), _int(first.get("computeMinor"))
            capability = f"{major}.{minor}" if major is not None and minor is not None else None
            sms = _int(first.get("numSms")) or None
    info = metadata.get("distributedInfo")
    info = info if isinstance(info, Mapping) else {}
    rank, source = _int(info.get("rank")), "distributedInfo"
    if rank is None and path is not None:
        rank, source = rank_from_name(Path(path)), "file name"
    world = _int(info.get("world_size"))
    nccl = info.get("nccl_version")
    return TraceContext(
        gpus=gpus, device_count=count, world_size=world if world is None or world > 0 else None,
        rank=rank, rank_source=source if rank is not None else "unknown", backend=_text(info.get("backend"), 40),
        host=_text(metadata.get("host_name")) or _text(metadata.get("hostname")),
        cuda_runtime=cuda_version(metadata.get("cuda_runtime_version")),
        cuda_driver=cuda_version(metadata.get("cuda_driver_version")),
        cupti=str(_int(metadata.get("cupti_version"))) if _int(metadata.get("cupti_version")) is not None else None,
        nccl=_text(nccl, 40) if isinstance(nccl, str) else None,
        gpu_memory_gib=memory, compute_capability=capability, sms=sms,
        capture_start_unix_s=_capture_start(metadata.get("baseTimeNanoseconds")),
    )


def _capture_start(raw: Any) -> float | None:
    """``baseTimeNanoseconds`` (the capture's wall-clock origin) in unix seconds, when it is one."""
    if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not str(raw).isdigit():
        return None
    return int(str(raw)) / 1e9


def read_trace_context(path: str | Path) -> TraceContext:
    """Stream ``path`` once (any size; ``InputError`` when it is not a trace) and return its context."""
    from my_utils.profiling.kineto.read.stream import TraceStream

    stream = TraceStream(path)
    for _ in stream.events():
        pass
    return trace_context(stream.metadata, path)


def run_hardware(contexts: Sequence[TraceContext]) -> dict[str, Any]:
    """The ``hardware`` of a run made of several rank traces: each field once when the traces agree.

    A field on which the traces disagree becomes the sorted list of their values; ``rank``
    becomes ``ranks`` (sorted) and ``host`` becomes ``hosts`` when more than one trace has one.
    """
    if len(contexts) == 1:
        return contexts[0].hardware()
    out: dict[str, Any] = {}
    per_trace = [c.hardware() for c in contexts]
    keys = dict.fromkeys(k for h in per_trace for k in h)
    for key in keys:
        values = [h[key] for h in per_trace if key in h]
        distinct = sorted(set(values), key=str)
        if key in ("rank", "host"):
            out[f"{key}s"] = distinct if key == "host" else sorted(values)
        elif key == "rank_source":
            out[key] = distinct[0] if len(distinct) == 1 else distinct
        else:
            out[key] = distinct[0] if len(distinct) == 1 else distinct
    return out
