"""Data-consistency tools: tensor checksums (``ChecksumUtils``) and tensor dumps (``DumpTensorIO``).

Both walk tensors inside nested dicts, lists, tuples and TensorDicts, and both are inert unless
their environment variables are set:
- ``DEBUG_DATA_CONSISTENCY=1`` turns ``ChecksumUtils.sign``/``verify`` on (else they return None
  without touching the data);
- ``WAN_DPO_PREVAE_TENSOR_DIR`` is where ``DumpTensorIO`` writes ``.pt`` files (unset: nothing is
  written); ``WAN_DPO_PREVAE_COMPARE_FILE`` receives one JSON line per comparison.

torch is imported only when a tensor has to be hashed, saved or loaded, and tensordict never:
its objects are recognised only when something else already imported it (otherwise none can
exist) and are walked as the plain nested dicts their ``to_dict()`` gives, so a dump of a
TensorDict loads with ``weights_only=True`` and compares leaf by leaf with the live one.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import math
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.dist_env import resolve_rank_info

__all__ = ["ChecksumResult", "ChecksumUtils", "DumpTensorIO", "LeafComparison", "TensorComparison"]

_log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _is_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "dtype") and hasattr(obj, "shape")


def _is_mapping(obj: Any) -> bool:
    return isinstance(obj, Mapping)


def _as_plain(obj: Any) -> Any:
    """A TensorDict, tensorclass or non-tensor wrapper as plain Python data; anything else unchanged.

    ``NonTensorData``/``NonTensorStack`` become the value(s) they wrap, tensor collections their
    ``to_dict()`` (nested dicts of tensors; lazy stacks are stacked). Without ``tensordict`` in
    ``sys.modules`` no such object can exist, so nothing is imported to ask.
    """
    tensordict = sys.modules.get("tensordict")
    if tensordict is None or _is_tensor(obj) or isinstance(obj, (str, bytes, int, float, list, tuple, dict)):
        return obj
    is_non_tensor = getattr(tensordict, "is_non_tensor", None)
    if is_non_tensor is not None and is_non_tensor(obj):
        return obj.tolist()
    is_collection = getattr(tensordict, "is_tensor_collection", None)
    if is_collection is not None and is_collection(obj):
        return obj.to_dict()
    return obj


def iter_leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` pairs of a nested structure; paths look like ``batch.latents[0]``."""
    plain = _as_plain(obj)
    if plain is not obj:
        yield from iter_leaves(plain, prefix)
    elif _is_mapping(obj):
        for key, value in obj.items():
            yield from iter_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from iter_leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix or "<root>", obj


def _tensor_bytes(tensor: Any) -> bytes:
    t = tensor.detach()
    if getattr(t, "is_sparse", False):
        t = t.to_dense()
    t = t.cpu().contiguous()
    if not t.numel():
        return b""
    # read the contiguous CPU buffer directly: torch's .numpy() bridge needs numpy, which
    # torch itself does not require (and core does not depend on)
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def checksum_leaf(leaf: Any) -> str:
    """``dtype[shape]:digest`` for a tensor or array; ``type:digest`` of its repr for other leaves."""
    digest = hashlib.blake2b(digest_size=16)
    if _is_tensor(leaf):
        digest.update(_tensor_bytes(leaf))
        shape = ",".join(str(d) for d in leaf.shape)
        return f"{str(leaf.dtype).removeprefix('torch.')}[{shape}]:{digest.hexdigest()}"
    if type(leaf).__module__ == "numpy" and hasattr(leaf, "tobytes"):
        digest.update(leaf.tobytes())
        return f"{leaf.dtype}{list(getattr(leaf, 'shape', ()))}:{digest.hexdigest()}"
    digest.update(repr(leaf).encode("utf-8", "backslashreplace"))
    return f"{type(leaf).__name__}:{digest.hexdigest()}"


@dataclass(frozen=True, slots=True)
class ChecksumResult:
    """Outcome of ``ChecksumUtils.verify``: which leaf paths changed, vanished or appeared."""

    name: str
    ok: bool
    changed: tuple[str, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]


class ChecksumUtils:
    """Sign a (nested) batch of tensors, later verify it is bit-identical; on only with DEBUG_DATA_CONSISTENCY=1."""

    ENV_VAR = "DEBUG_DATA_CONSISTENCY"

    @classmethod
    def is_enabled(cls) -> bool:
        """Whether DEBUG_DATA_CONSISTENCY is set to 1/true/yes/on (read at every call)."""
        return os.environ.get(cls.ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")

    @staticmethod
    def checksum(obj: Any) -> dict[str, str]:
        """Checksums of every leaf of ``obj`` (computed even when disabled)."""
        return {path: checksum_leaf(leaf) for path, leaf in iter_leaves(obj)}

    @classmethod
    def sign(cls, obj: Any, name: str = "") -> dict[str, str] | None:
        """The signature of ``obj`` (``{leaf path: checksum}``), or None when disabled."""
        if not cls.is_enabled():
            return None
        return cls.checksum(obj)

    @classmethod
    def verify(
        cls, obj: Any, signature: Mapping[str, str] | None, name: str = "", *, raise_on_mismatch: bool = False
    ) -> ChecksumResult | None:
        """Compare ``obj`` with a signature from ``sign``; None when disabled or unsigned.

        A mismatch is logged as a warning naming the leaves; with ``raise_on_mismatch`` it also
        raises ValueError.
        """
        if not cls.is_enabled() or signature is None:
            return None
        current = cls.checksum(obj)
        changed = tuple(p for p in signature if p in current and current[p] != signature[p])
        missing = tuple(p for p in signature if p not in current)
        unexpected = tuple(p for p in current if p not in signature)
        result = ChecksumResult(name, not (changed or missing or unexpected), changed, missing, unexpected)
        if not result.ok:
            message = (f"data consistency check {name!r} failed: changed {list(changed)}, "
                       f"missing {list(missing)}, unexpected {list(unexpected)}")
            _log.warning("%s", message)
            if raise_on_mismatch:
                raise ValueError(message)
        return result


@dataclass(frozen=True, slots=True)
class LeafComparison:
    """One leaf of a comparison: ``status`` is equal, close, different, shape, dtype, missing or extra."""

    path: str
    status: str
    max_abs_diff: float | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TensorComparison:
    """A dump compared with the previous dump of the same name/step/rank."""

    name: str
    step: int | None
    rank: int
    reference: str
    all_equal: bool
    leaves: tuple[LeafComparison, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (one line of the compare file)."""
        out = asdict(self)
        out["leaves"] = [asdict(leaf) for leaf in self.leaves]
        return out


def _compare_leaf(path: str, new: Any, old: Any, atol: float, rtol: float) -> LeafComparison:
    if _is_tensor(new) and _is_tensor(old):
        if tuple(new.shape) != tuple(old.shape):
            return LeafComparison(path, "shape", None, f"{tuple(old.shape)} -> {tuple(new.shape)}")
        if new.dtype != old.dtype:
            return LeafComparison(path, "dtype", None, f"{old.dtype} -> {new.dtype}")
        a = new.detach().cpu()
        b = old.detach().cpu()
        import torch

        if torch.equal(a, b):
            return LeafComparison(path, "equal", 0.0)
        if a.is_floating_point() or a.is_complex():
            diff = float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
            close = bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)) if (atol or rtol) else False
        else:
            diff = float((a.long() - b.long()).abs().max()) if a.numel() else 0.0
            close = False
        return LeafComparison(path, "close" if close else "different", None if math.isnan(diff) else diff)
    same = checksum_leaf(new) == checksum_leaf(old)
    return LeafComparison(path, "equal" if same else "different")


class DumpTensorIO:
    """Dump tensors (nested structures allowed) to ``.pt`` files and compare runs against them.

    ``tensor_dir`` / ``compare_file`` default to WAN_DPO_PREVAE_TENSOR_DIR /
    WAN_DPO_PREVAE_COMPARE_FILE; without a tensor dir every method returns None at once.
    Files are named ``<name>[__step<k>]__rank<r>.pt`` (name sanitised). Disk errors are
    reported once through logging and never raised.
    """

    DIR_ENV = "WAN_DPO_PREVAE_TENSOR_DIR"
    COMPARE_ENV = "WAN_DPO_PREVAE_COMPARE_FILE"

    def __init__(self, tensor_dir: str | os.PathLike[str] | None = None,
                 compare_file: str | os.PathLike[str] | None = None, rank: int | None = None) -> None:
        tdir = tensor_dir if tensor_dir is not None else os.environ.get(self.DIR_ENV) or None
        cfile = compare_file if compare_file is not None else os.environ.get(self.COMPARE_ENV) or None
        self.tensor_dir = Path(tdir) if tdir is not None else None
        self.compare_file = Path(cfile) if cfile is not None else None
        self.rank = rank if rank is not None else resolve_rank_info().rank
        self._reported = False

    @property
    def enabled(self) -> bool:
        """Whether a tensor directory is configured."""
        return self.tensor_dir is not None

    def path_for(self, name: str, step: int | None = None) -> Path | None:
        """Where ``name`` (at ``step``) is dumped, or None when disabled."""
        if self.tensor_dir is None:
            return None
        safe = _SAFE.sub("_", name).strip("._") or "tensor"
        step_part = f"__step{int(step)}" if step is not None else ""
        return self.tensor_dir / f"{safe[:120]}{step_part}__rank{self.rank}.pt"

    def dump(self, name: str, obj: Any, step: int | None = None) -> Path | None:
        """Save ``obj`` (moved to the CPU) atomically; return the path, or None if disabled or failed."""
        path = self.path_for(name, step)
        if path is None:
            return None
        import torch

        cpu_obj = _to_cpu(obj)
        try:
            with atomic_write(path, "wb") as fh:
                torch.save(cpu_obj, fh)
        except OSError as exc:
            self._report(f"cannot write {path} ({exc.strerror or exc})")
            return None
        return path

    def load(self, name: str, step: int | None = None) -> Any:
        """The dump of ``name`` (``weights_only=True``), or None when disabled or absent."""
        path = self.path_for(name, step)
        if path is None or not path.exists():
            return None
        import torch

        return torch.load(path, map_location="cpu", weights_only=True)

    def compare(self, name: str, obj: Any, step: int | None = None, *, atol: float = 0.0,
                rtol: float = 0.0) -> TensorComparison | None:
        """Compare ``obj`` with the existing dump; append the result to the compare file if set.

        Returns None when disabled or when there is no previous dump.
        """
        path = self.path_for(name, step)
        previous = self.load(name, step)
        if path is None or previous is None:
            return None
        new_leaves = dict(iter_leaves(obj))
        old_leaves = dict(iter_leaves(previous))
        leaves = [
            _compare_leaf(p, new_leaves[p], old_leaves[p], atol, rtol) if p in old_leaves
            else LeafComparison(p, "extra") for p in new_leaves
        ]
        leaves.extend(LeafComparison(p, "missing") for p in old_leaves if p not in new_leaves)
        result = TensorComparison(name, step, self.rank, str(path), all(x.status == "equal" for x in leaves),
                                  tuple(leaves))
        if self.compare_file is not None:
            line = json.dumps({"time": time.time(), **result.to_dict()}, allow_nan=True) + "\n"
            try:
                self.compare_file.parent.mkdir(parents=True, exist_ok=True)
                with open(self.compare_file, "a", encoding="utf-8") as fh:
                    fh.write(line)
            except OSError as exc:
                self._report(f"cannot append to {self.compare_file} ({exc.strerror or exc})")
        return result

    def dump_or_compare(self, name: str, obj: Any, step: int | None = None, **tolerances: float
                        ) -> Path | TensorComparison | None:
        """First run: dump. Later runs (the dump exists): compare with it, leaving it untouched."""
        path = self.path_for(name, step)
        if path is None:
            return None
        if path.exists():
            return self.compare(name, obj, step, **tolerances)
        return self.dump(name, obj, step)

    def _report(self, message: str) -> None:
        if not self._reported:
            self._reported = True
            _log.error("DumpTensorIO: %s; dumps are skipped", message)


def _to_cpu(obj: Any) -> Any:
    obj = _as_plain(obj)
    if _is_tensor(obj):
        return obj.detach().cpu()
    if _is_mapping(obj):
        return {str(k): _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj) if isinstance(obj, list) or type(obj) is tuple else [
            _to_cpu(v) for v in obj]
    return obj
