"""``dump_artifacts``: write a nested object to a folder of safe files plus ``manifest.json``.

The folder is built beside its final place and renamed into it at the end, so a failed dump
(an unsupported value, a full disk) leaves nothing, and a reader never sees half a dump.
Values are recognised by their type without importing anything: a tensor can only exist once
torch is imported, a numpy array once numpy is, and so on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from my_utils.core.artifacts.manifest import FORMAT, MANIFEST, SCHEMA_VERSION, child_place, field_place
from my_utils.core.artifacts.payloads import PayloadWriter, module_loaded
from my_utils.core.atomic import _umask
from my_utils.core.errors import UsageError

_SCALARS: dict[type, str] = {type(None): "none", bool: "bool", int: "int", str: "str"}
_SEQUENCES: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


def float_value(x: float) -> float | str:
    """A float as strict JSON: itself, or ``"nan"``/``"inf"``/``"-inf"``."""
    return x if math.isfinite(x) else repr(x)


class _Encoder:
    def __init__(self, writer: PayloadWriter, allow_pickle: bool) -> None:
        self.writer = writer
        self.allow_pickle = allow_pickle
        self._open: set[int] = set()  # containers on the path from the root: a repeat is a cycle

    def node(self, obj: Any, place: str) -> dict[str, Any]:
        kind = type(obj)
        if kind in _SCALARS:
            return {"type": _SCALARS[kind]} if obj is None else {"type": _SCALARS[kind], "value": obj}
        if kind is float:
            return {"type": "float", "value": float_value(obj)}
        if kind is complex:
            return {"type": "complex", "real": float_value(obj.real), "imag": float_value(obj.imag)}
        if kind in (bytes, bytearray):
            return self.writer.blob(obj)
        leaf = self._library_value(obj, place)
        if leaf is not None:
            return leaf
        if id(obj) in self._open:
            raise UsageError(f"{place}: a reference cycle (this object contains itself); a dump holds a tree")
        self._open.add(id(obj))
        try:
            return self._container(obj, place)
        finally:
            self._open.discard(id(obj))

    def _library_value(self, obj: Any, place: str) -> dict[str, Any] | None:
        torch = module_loaded("torch")
        if torch is not None:
            if type(obj) in (torch.Tensor, torch.nn.Parameter):
                return self.writer.tensor(obj)
            if isinstance(obj, torch.dtype):
                return {"type": "torch.dtype", "value": str(obj).removeprefix("torch.")}
            if isinstance(obj, torch.device):
                return {"type": "torch.device", "value": str(obj)}
            if type(obj) is torch.Size:
                return {"type": "torch.Size", "value": list(obj)}
        np = module_loaded("numpy")
        if np is not None:
            if type(obj) is np.ndarray and not obj.dtype.hasobject:
                return self.writer.ndarray(obj, scalar=False)
            if isinstance(obj, np.generic) and not isinstance(obj, np.object_):
                return self.writer.ndarray(np.asarray(obj), scalar=True)
        image = module_loaded("PIL.Image")
        if image is not None and isinstance(obj, image.Image):
            return self.writer.image(obj)
        return None

    def _container(self, obj: Any, place: str) -> dict[str, Any]:
        kind = type(obj)
        if kind in _SEQUENCES:
            return {"type": _SEQUENCES[kind],
                    "items": [self.node(v, child_place(place, i)) for i, v in enumerate(obj)]}
        if kind is dict:
            return {"type": "dict", "keys": [self.node(k, f"{place} key {k!r}") for k in obj],
                    "values": [self.node(v, child_place(place, k)) for k, v in obj.items()]}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {"type": "dataclass", "class": f"{kind.__module__}:{kind.__qualname__}",
                    "fields": {f.name: self.node(getattr(obj, f.name), field_place(place, f.name))
                               for f in dataclasses.fields(obj)}}
        tensordict = module_loaded("tensordict")
        if tensordict is not None and kind is getattr(tensordict, "TensorDict", None):
            return self._tensordict(obj, place, tensordict)
        if self.allow_pickle:
            return self.writer.pickled(obj, place)
        raise UsageError(f"{place}: a {kind.__module__}.{kind.__qualname__} has no safe format (tensors, numpy "
                         "arrays, TensorDicts, PIL images, dataclasses, dict/list/tuple/set and scalars do); "
                         "pass allow_pickle=True to pickle it, knowing that loading a pickle runs code "
                         "from the file")

    def _tensordict(self, td: Any, place: str, tensordict: Any) -> dict[str, Any]:
        keys = list(td.keys())
        values = []
        for key in keys:
            value = td.get(key)
            if tensordict.is_non_tensor(value):
                value = value.data
            values.append(self.node(value, child_place(place, key)))
        names = list(td.names) if any(n is not None for n in td.names) else None
        return {"type": "tensordict", "batch_size": list(td.batch_size),
                "device": None if td.device is None else str(td.device), "names": names,
                "keys": keys, "values": values}


def dump_artifacts(obj: Any, folder: str | os.PathLike[str], *, allow_pickle: bool = False,
                   tensor_format: str = "auto", overwrite: bool = False) -> Path:
    """Write ``obj`` (any nesting of the supported values) to ``folder``; return the folder.

    Supported without pickle: tensors and ``nn.Parameter`` (grad flag kept; loaded on the
    CPU), numpy arrays and scalars (not object arrays), TensorDicts, PIL images, dataclass
    instances, ``dict``/``list``/``tuple``/``set``/``frozenset``, ``str``, ``bytes``, ``int``,
    ``float`` (NaN and infinities too), ``complex``, ``bool``, ``None``, ``torch.dtype``,
    ``torch.device`` and ``torch.Size``. Shared references are stored once per occurrence.

    ``tensor_format``: ``"auto"`` (safetensors when installed, else torch's format read with
    ``weights_only=True``), ``"safetensors"`` or ``"torch"``. ``allow_pickle=True`` pickles any
    other value instead of refusing it; **loading a pickle runs code from the file**, so
    ``load_artifacts`` then needs ``allow_pickle=True`` too. An existing ``folder`` is replaced
    only with ``overwrite=True`` and only when it holds an earlier dump (or nothing).
    """
    target = Path(folder)
    _check_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        writer = PayloadWriter(stage, tensor_format)
        root = _Encoder(writer, allow_pickle).node(obj, "root")
        manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "files": writer.finish(), "root": root}
        (stage / MANIFEST).write_text(json.dumps(manifest, allow_nan=False, indent=1) + "\n", encoding="ascii")
        os.chmod(stage, 0o777 & ~_umask())  # mkdtemp made it private; a dump is shared like any output
        _move_into_place(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target


def _check_target(target: Path, overwrite: bool) -> None:
    if not target.exists() and not target.is_symlink():
        return
    if not overwrite:
        raise UsageError(f"{target} exists; pass overwrite=True to replace an earlier dump, or choose another folder")
    if target.is_symlink() or not target.is_dir():
        raise UsageError(f"{target} is not a folder; refusing to replace it with a dump")
    if any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise UsageError(f"{target} is a folder without {MANIFEST}, not an earlier dump; refusing to replace it")


def _move_into_place(stage: Path, target: Path) -> None:
    if not target.exists():
        os.rename(stage, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    os.rename(target, old / "dump")
    try:
        os.rename(stage, target)
    except BaseException:
        os.rename(old / "dump", target)  # put the earlier dump back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
