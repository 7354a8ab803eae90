"""``ForwardTraceRecorder``: each module call's inputs and outputs on disk, to compare two runs layer by layer.

Forward hooks on the chosen modules record, per call, the module's name and type, the dtype
of each of its own parameters and one MD5 over them, and every input and output tensor (its
path in the call, shape, dtype and MD5); with ``save_values`` the tensors themselves go to a
folder per call, ``calls/<n>_<module>_<call>/``, written by the project's safe dumper
(``dump_artifacts``, torch's ``.pt`` format, read back with ``weights_only=True``).
``index.jsonl`` lists the calls, one line each, flushed per call: a killed run keeps every
finished call.

Decisions that shape it:

- **Which calls.** Modules are chosen by name (``include``/``exclude`` regular expressions,
  searched) and type; containers (``Sequential``, ``ModuleList``, ``ModuleDict``) are left
  out by default because their output is their last child's. Calls are sampled per module:
  all, the first N, or each with probability p decided by a hash of (seed, module, call
  number), so two runs with one seed sample the very same calls whatever their timing.
- **The disk is never filled.** Before a call is written its size is known; a call that
  would pass ``max_bytes`` in all, or leave less than ``min_free_bytes`` free on the disk,
  stops the recording: it is said once (logged and written as the index's last line), the
  hooks are removed, and training goes on. A disk that fills anyway (``OSError``) stops it
  the same way: instrumentation never raises into the training loop.
- **Nothing is recorded while a call is being recorded.** Copying tensors to the CPU runs no
  module, but a re-entrant hook (a module called from another's hook) is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.hooks.trace_tensors import TensorMeta, describe, iter_tensors, module_params

_log = logging.getLogger("my_utils.hooks.forward_trace")

INDEX = "index.jsonl"
CALLS = "calls"
FORMAT = "my_utils.forward_trace"
SCHEMA_VERSION = 1
_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")


@dataclass(frozen=True)
class Sampling:
    """Which calls of each module are recorded: ``all()``, ``head(n)`` or ``random(p, seed)``."""

    mode: str = "all"
    n: int = 0
    p: float = 1.0
    seed: int = 0

    @classmethod
    def all(cls) -> Sampling:
        """Every call (the default)."""
        return cls()

    @classmethod
    def head(cls, n: int) -> Sampling:
        """The first ``n`` calls of each module."""
        if n < 1:
            raise UsageError(f"Sampling.head({n}): n must be at least 1")
        return cls("head", n=n)

    @classmethod
    def random(cls, p: float, seed: int = 0) -> Sampling:
        """Each call with probability ``p``, decided by (seed, module, call number): the same calls in every run."""
        if not 0.0 < p <= 1.0:
            raise UsageError(f"Sampling.random({p}): p must be in (0, 1]")
        return cls("random", p=p, seed=seed)

    def takes(self, module: str, call: int) -> bool:
        """Whether call number ``call`` (from 0) of ``module`` is recorded."""
        if self.mode == "head":
            return call < self.n
        if self.mode == "random":
            return random.Random(f"{self.seed}:{module}:{call}").random() < self.p
        return True

    def describe(self) -> str:
        return {"head": f"head {self.n}", "random": f"random p={self.p} seed={self.seed}"}.get(self.mode, "all")


class ForwardTraceRecorder:
    """Record module calls of ``model`` into ``output_dir`` (see the module docstring); a context manager too.

    ``module_types``: classes or class names to keep (default: every type but the containers).
    ``max_elements``: save at most this many elements of each tensor (its head, flattened);
    MD5s are of the whole tensor. ``save_values=False`` writes the index only (fingerprints).
    """

    def __init__(self, model: Any, output_dir: str | os.PathLike[str], *, include: str | None = None,
                 exclude: str | None = None, module_types: Sequence[type | str] | None = None,
                 skip_containers: bool = True, record_inputs: bool = True, record_outputs: bool = True,
                 save_values: bool = True, sampling: Sampling | None = None, max_elements: int | None = None,
                 max_bytes: int = 1 << 30, min_free_bytes: int = 1 << 30) -> None:
        if max_bytes < 0 or min_free_bytes < 0:
            raise UsageError(f"ForwardTraceRecorder: max_bytes ({max_bytes}) and min_free_bytes "
                             f"({min_free_bytes}) must be >= 0")
        try:
            self._include = re.compile(include) if include else None
            self._exclude = re.compile(exclude) if exclude else None
        except re.error as exc:
            raise UsageError(f"ForwardTraceRecorder: include/exclude is not a regular expression ({exc})") from None
        self.model = model
        self.output_dir = Path(output_dir)
        self.module_types = tuple(module_types) if module_types is not None else None
        self.skip_containers = skip_containers
        self.record_inputs = record_inputs
        self.record_outputs = record_outputs
        self.save_values = save_values
        self.sampling = sampling or Sampling.all()
        self.max_elements = max_elements
        self.max_bytes = max_bytes
        self.min_free_bytes = min_free_bytes
        self.calls_recorded = 0
        self.bytes_written = 0
        self.stopped: str | None = None  # why recording stopped early, once it did
        self._handles: list[Any] = []
        self._counts: dict[str, int] = {}
        self._index = 0
        self._lock = threading.Lock()
        self._busy = threading.local()
        self._fh: Any = None

    # -- choosing modules ------------------------------------------------------------------------

    def _type_matches(self, module: Any) -> bool:
        if self.module_types is None:
            return not (self.skip_containers and type(module).__name__ in _CONTAINERS)
        return any(isinstance(module, t) if isinstance(t, type) else type(module).__name__ == t
                   for t in self.module_types)

    def selected(self) -> list[str]:
        """The names of the modules this recorder hooks (the root module is named ``""``)."""
        out = []
        for name, module in self.model.named_modules():
            if self._include is not None and not self._include.search(name):
                continue
            if self._exclude is not None and self._exclude.search(name):
                continue
            if self._type_matches(module):
                out.append(name)
        return out

    # -- lifecycle ---------------------------------------------------------------------------------

    @property
    def index_path(self) -> Path:
        """``<output_dir>/index.jsonl``: one line per recorded call."""
        return self.output_dir / INDEX

    def attach(self) -> ForwardTraceRecorder:
        """Register the hooks and start ``index.jsonl`` (an existing trace in ``output_dir`` is refused)."""
        if self._handles:
            raise UsageError("ForwardTraceRecorder.attach(): already attached; call remove() first")
        names = self.selected()
        if not names:
            raise UsageError(f"ForwardTraceRecorder: no module of {type(self.model).__name__} matches "
                             f"include={self._pattern(self._include)}, exclude={self._pattern(self._exclude)}, "
                             f"module_types={self.module_types}")
        if self.index_path.exists():
            raise UsageError(f"{self.index_path} exists: a trace is already there; give another output_dir")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.index_path, "w", encoding="utf-8")  # noqa: SIM115 - open while attached
        self._write({"format": FORMAT, "schema_version": SCHEMA_VERSION, "model": type(self.model).__name__,
                     "modules": names, "sampling": self.sampling.describe(), "max_elements": self.max_elements,
                     "save_values": self.save_values, "max_bytes": self.max_bytes})
        modules = dict(self.model.named_modules())
        for name in names:
            self._handles.append(modules[name].register_forward_hook(self._hook(name), with_kwargs=True))
        return self

    def remove(self) -> None:
        """Remove every hook and close the index (safe to call twice)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> ForwardTraceRecorder:
        return self.attach()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @staticmethod
    def _pattern(p: re.Pattern[str] | None) -> str:
        return repr(p.pattern) if p is not None else "None"

    # -- recording ---------------------------------------------------------------------------------

    def _hook(self, name: str) -> Any:
        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            if self.stopped is not None or getattr(self._busy, "on", False):
                return
            with self._lock:
                call = self._counts.get(name, 0)
                self._counts[name] = call + 1
            if not self.sampling.takes(name, call):
                return
            self._busy.on = True
            try:
                self._record(name, call, module, args, kwargs, output)
            except OSError as exc:  # the disk: an environment problem, never the training loop's
                self._stop(f"writing call {call} of {name!r} failed: {exc}")
            finally:
                self._busy.on = False

        return hook

    def _record(self, name: str, call: int, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                output: Any) -> None:
        import torch

        parts: list[tuple[str, Any]] = []
        if self.record_inputs:
            parts += [("args", args), ("kwargs", kwargs)]
        if self.record_outputs:
            parts.append(("out", output))
        metas: list[TensorMeta] = []
        values: dict[str, Any] = {}
        cap = self.max_elements if self.save_values else 0
        for root, obj in parts:
            for path, t in iter_tensors(obj, root, torch):
                meta, saved = describe(path, t, cap)
                metas.append(meta)
                if saved is not None:
                    values[path] = saved
        size = sum(v.element_size() * v.numel() for v in values.values())
        dtypes, params_md5 = module_params(module)
        with self._lock:
            index = self._index
            self._index += 1
        folder = None
        if values:
            reason = self._over_budget(size)
            if reason is not None:
                self._stop(f"call {call} of {name!r} ({size:,} bytes) {reason}")
                return
            from my_utils.core.artifacts import dump_artifacts
            from my_utils.tracing.capture.backends.torch_profiler import safe_file_part

            folder = Path(CALLS) / f"{index:06d}_{safe_file_part(name or 'root', 60)}_{call}"
            dump_artifacts(values, self.output_dir / folder, tensor_format="torch")
            written = sum(f.stat().st_size for f in (self.output_dir / folder).iterdir())
            with self._lock:
                self.bytes_written += written
        self._write({"index": index, "module": name, "type": type(module).__name__, "call": call,
                     "training": bool(getattr(module, "training", False)), "param_dtypes": dtypes,
                     "params_md5": params_md5, "tensors": [m.to_json() for m in metas],
                     "folder": folder.as_posix() if folder is not None else None})
        with self._lock:
            self.calls_recorded += 1

    def _over_budget(self, size: int) -> str | None:
        if self.bytes_written + size > self.max_bytes:
            return (f"would pass the budget of {self.max_bytes:,} bytes ({self.bytes_written:,} written); "
                    "raise max_bytes, sample fewer calls or cap max_elements")
        free = shutil.disk_usage(self.output_dir).free
        if free - size < self.min_free_bytes:
            return (f"would leave {max(free - size, 0):,} bytes free on the disk of {self.output_dir}, under the "
                    f"{self.min_free_bytes:,} min_free_bytes kept free")
        return None

    def _stop(self, reason: str) -> None:
        with self._lock:
            if self.stopped is not None:
                return
            self.stopped = reason
        _log.warning("ForwardTraceRecorder stopped: %s; %d calls recorded in %s", reason, self.calls_recorded,
                     self.output_dir)
        try:
            self._write({"stopped": reason, "calls_recorded": self.calls_recorded})
        except OSError:
            pass  # the disk that stopped us may refuse this line too; the log has said it
        for h in self._handles:  # nothing more to do per call: the hooks go
            h.remove()
        self._handles.clear()

    def _write(self, row: dict[str, Any]) -> None:
        with self._lock:
            if self._fh is None:
                return
            self._fh.write(json.dumps(row, allow_nan=False) + "\n")
            self._fh.flush()


def record_forward(model: Any, output_dir: str | os.PathLike[str], inputs: Iterable[Any], **options: Any) -> Path:
    """Run ``model`` on each of ``inputs`` (a tuple is unpacked) without grad, recorded; the index path."""
    import torch

    with ForwardTraceRecorder(model, output_dir, **options) as recorder, torch.no_grad():
        for x in inputs:
            model(*x) if isinstance(x, tuple) else model(x)
    return recorder.index_path
