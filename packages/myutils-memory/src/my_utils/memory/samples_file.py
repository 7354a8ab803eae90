"""The monitor's samples file: ``<prefix>_rank<rank>_samples.jsonl``, append-only, one JSON object per line.

Line 1 is the header: ``{"format": "my_utils.memory.samples", "schema_version": 1, "prefix",
"rank", "interval_s", "start_ts", "nvml", "energy_method", "host", "units"}``, where
``nvml`` is ``"ok: <GPU name>"`` or ``"NVML unavailable: <reason>"``. Each further line is a
sample, ``{"ts": <unix s>, "t": <s since start>, "metrics": {<name>: <number>}}``, a
note, ``{"ts": ..., "note": "<text>"}`` (a dropped metric, a sampler error), or the end of a
training step, ``{"ts": ..., "step": <n>}`` (``GPU_Performance_Tracker.mark_step``: what
energy per step is measured between). Lines are
flushed one by one, so a killed process loses at most its last line; readers skip a torn
last line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.safe_io import open_regular

__all__ = ["FORMAT", "SCHEMA_VERSION", "UNITS", "Sample", "SamplesRead", "SamplesWriter", "StepMark", "read_samples",
           "read_samples_file"]

FORMAT = "my_utils.memory.samples"
SCHEMA_VERSION = 1
UNITS = {
    "torch_allocated_bytes": "bytes", "torch_reserved_bytes": "bytes", "gpu_mem_used_bytes": "bytes",
    "gpu_util_pct": "%", "mem_bw_util_pct": "%", "power_w": "W", "energy_j": "J",
    "host_rss_bytes": "bytes", "host_cpu_pct": "%",
}


@dataclass(frozen=True)
class Sample:
    """One sampling tick: unix time, seconds since start, the metrics measured."""

    ts: float
    t: float
    metrics: dict[str, float]


@dataclass(frozen=True)
class StepMark:
    """The end of training step ``step`` at unix time ``ts``."""

    ts: float
    step: int


@dataclass(frozen=True)
class SamplesRead:
    """What :func:`read_samples_file` read: the header, samples, notes, step ends, and the lines read."""

    header: dict[str, Any]
    samples: list[Sample]
    notes: list[str]
    steps: list[StepMark]
    done: int


class SamplesWriter:
    """Writes the header at once, then one flushed line per sample, note or step end (from any thread)."""

    def __init__(self, path: str | Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the sampling thread and the training thread both write
        self._fh: IO[str] | None = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._line({"format": FORMAT, "schema_version": SCHEMA_VERSION, **header, "units": UNITS})

    def _line(self, obj: dict[str, Any]) -> None:
        text = json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"
        with self._lock:
            if self._fh is not None:
                self._fh.write(text)
                self._fh.flush()

    def sample(self, sample: Sample) -> None:
        """Append one sample line; a NaN or infinite value is left out (not measured, and JSON has no NaN)."""
        metrics = {k: v for k, v in sample.metrics.items() if _finite(v)}
        self._line({"ts": round(sample.ts, 6), "t": round(sample.t, 6), "metrics": metrics})

    def note(self, ts: float, text: str) -> None:
        """Append one note line."""
        self._line({"ts": round(ts, 6), "note": text})

    def step(self, ts: float, step: int) -> None:
        """Append the end of training step ``step``."""
        self._line({"ts": round(ts, 6), "step": int(step)})

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def read_samples(path: str | Path, start_line: int = 0) -> tuple[dict[str, Any], list[Sample], list[str], int]:
    """(header, samples, notes, lines read) of a samples file, from line ``start_line`` (0 = the header).

    A file whose first line is not a samples header raises ``UnsupportedInputError``; any
    other bad line ``InputError`` with its line number. A last line without its newline is
    a write in progress: it is not read (and not counted). Step ends: :func:`read_samples_file`.
    """
    read = read_samples_file(path, start_line)
    return read.header, read.samples, read.notes, read.done


def read_samples_file(path: str | Path, start_line: int = 0) -> SamplesRead:
    """Everything :func:`read_samples` reads, and the step ends (``{"ts", "step"}`` lines)."""
    p = Path(path)
    samples: list[Sample] = []
    notes: list[str] = []
    steps: list[StepMark] = []
    try:
        fh = open_regular(p, "rb")  # a FIFO named like a samples file must not block
    except OSError as exc:
        raise InputError(p, None, f"cannot open the samples file ({exc.strerror or exc})") from None
    with fh:
        header = _header(p, fh.readline())
        done = 1
        for raw in _lines(fh):
            done += 1
            if done <= start_line:
                continue
            if not raw.strip():
                continue
            obj = _json(p, done, raw)
            if "note" in obj:
                notes.append(str(obj["note"]))
                continue
            if "step" in obj:
                step = obj["step"]
                when: Any = obj.get("ts")
                if type(step) is not int or not _finite(when):
                    raise InputError(p, f"line {done}", 'expected {"ts": number, "step": integer}')
                steps.append(StepMark(float(when), step))
                continue
            metrics: Any = obj.get("metrics")
            ts: Any = obj.get("ts")
            t: Any = obj.get("t", 0.0)
            if not isinstance(metrics, dict) or not _finite(ts) or not _finite(t) \
                    or not all(_finite(v) for v in metrics.values()):
                raise InputError(p, f"line {done}", 'expected {"ts": number, "t": number, "metrics": {name: number}}, '
                                 '{"ts": number, "note": text} or {"ts": number, "step": integer}, every number '
                                 'finite')
            samples.append(Sample(float(ts), float(t), {str(k): float(v) for k, v in metrics.items()}))
    return SamplesRead(header, samples, notes, steps, done)


def _finite(value: Any) -> bool:
    """A JSON number a float holds: not NaN/Infinity, not a 400-digit integer (``float()`` would overflow)."""
    return type(value) in (int, float) and -1e300 < value < 1e300


def _lines(fh: IO[bytes]) -> Iterator[bytes]:
    for raw in fh:
        if not raw.endswith(b"\n"):
            return  # torn last line
        yield raw


def _json(p: Path, line: int, raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise InputError(p, f"line {line}", f"expected a JSON object ({exc})") from None
    if not isinstance(obj, dict):
        raise InputError(p, f"line {line}", "expected a JSON object")
    return obj


def _header(p: Path, raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw) if raw.strip() else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise UnsupportedInputError(p, "line 1", f"not a monitor samples file (expected a header with "
                                                 f'"format": "{FORMAT}")')
    version = obj.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(p, "line 1", f"expected schema_version <= {SCHEMA_VERSION}, got {version!r}")
    return obj
