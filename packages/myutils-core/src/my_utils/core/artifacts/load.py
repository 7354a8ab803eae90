"""``load_artifacts``: read a dump folder back into the object that was dumped.

The manifest is read and checked whole first (a dry pass: every node's type and keys, every
dataclass resolvable, no pickle unless allowed) before any payload file is opened; then
each payload file is read once, its size and sha256 checked against the manifest before it
is parsed. A manifest that lies (a dtype, a shape, a key, a field the file does not have)
is an ``InputError`` naming the file and the place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from my_utils.core.artifacts.manifest import (
    FORMAT,
    MANIFEST,
    SCHEMA_VERSION,
    ManifestReader,
    child_place,
    field_place,
)
from my_utils.core.artifacts.payloads import PayloadReader
from my_utils.core.errors import InputError
from my_utils.core.safe_io import open_regular

_SCALARS = {"bool": bool, "int": int, "str": str}
_SEQUENCES: dict[str, type] = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}
_LEAVES = {"tensor": "tensor", "ndarray": "ndarray", "image": "image", "bytes": "blob", "bytearray": "blob",
           "pickle": "unpickle"}


class _Decoder:
    def __init__(self, manifest: ManifestReader, payloads: PayloadReader, classes: Iterable[type],
                 dry: bool) -> None:
        self.m = manifest
        self.payloads = payloads
        self.classes = list(classes)
        self.dry = dry

    def value(self, node: Any, place: str) -> Any:
        m = self.m
        if not isinstance(node, Mapping):
            raise m.fail(place, f"a node (a JSON object with a 'type'); found {type(node).__name__}")
        kind = node.get("type")
        if not isinstance(kind, str):
            raise m.fail(place, f"a node type (a string under 'type'); found {kind!r}")
        if kind == "none":
            return None
        if kind in _SCALARS:
            return m.get(node, "value", _SCALARS[kind], place)
        if kind == "float":
            return self._float(node, "value", place)
        if kind == "complex":
            return complex(self._float(node, "real", place), self._float(node, "imag", place))
        if kind in _LEAVES:
            if kind == "pickle" and not self.payloads.allow_pickle:
                return self.payloads.unpickle(dict(node), place)  # refuses, naming the place
            return None if self.dry else getattr(self.payloads, _LEAVES[kind])(dict(node), place)
        if kind in _SEQUENCES:
            items = [self.value(v, child_place(place, i))
                     for i, v in enumerate(m.get(node, "items", list, place))]
            return self._build(_SEQUENCES[kind], items, place)
        if kind == "dict":
            return self._dict(node, place)
        if kind == "dataclass":
            return self._dataclass(node, place)
        if kind == "tensordict":
            return self._tensordict(node, place)
        if kind in ("torch.dtype", "torch.device", "torch.Size"):
            return self._torch_value(node, kind, place)
        raise m.fail(place, f"a known node type; found {kind!r}")

    def _float(self, node: Mapping[str, Any], key: str, place: str) -> float:
        value = self.m.get(node, key, (float, int, str), place)
        if isinstance(value, str):
            if value not in ("nan", "inf", "-inf"):
                raise self.m.fail(place, f"a number, 'nan', 'inf' or '-inf' under {key!r}; found {value!r}")
            return float(value)
        return float(value)

    def _build(self, kind: type, items: Any, place: str) -> Any:
        if self.dry and kind in (set, frozenset, dict):
            return None  # leaves are None in the dry pass: hashing them proves nothing
        try:
            return kind(items)
        except TypeError as exc:  # an unhashable key or set item
            raise self.m.fail(place, f"hashable keys and set items ({exc})") from None

    def _dict(self, node: Mapping[str, Any], place: str) -> Any:
        keys = self.m.get(node, "keys", list, place)
        values = self.m.get(node, "values", list, place)
        if len(keys) != len(values):
            raise self.m.fail(place, f"as many values as keys; found {len(keys)} keys, {len(values)} values")
        decoded_keys = [self.value(k, f"{place} key #{i}") for i, k in enumerate(keys)]
        pairs = [(k, self.value(v, child_place(place, k))) for k, v in zip(decoded_keys, values, strict=True)]
        return self._build(dict, pairs, place)

    def _dataclass(self, node: Mapping[str, Any], place: str) -> Any:
        ref = self.m.get(node, "class", str, place)
        fields = self.m.get(node, "fields", dict, place)
        cls = self._resolve(ref, place)
        names = [f.name for f in dataclasses.fields(cls)]
        if sorted(names) != sorted(fields):
            raise self.m.fail(place, f"the fields of {ref} ({', '.join(names)}); found {', '.join(fields)}")
        values = {name: self.value(fields[name], field_place(place, name)) for name in names}
        if self.dry:
            return None
        instance: Any = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(instance, name, value)  # frozen and slotted classes too; __init__ is not run
        return instance

    def _resolve(self, ref: str, place: str) -> Any:
        module, _, qualname = ref.partition(":")
        for cls in self.classes:
            if f"{cls.__module__}:{cls.__qualname__}" == ref:
                return cls
        same_name = [cls for cls in self.classes if cls.__qualname__ == qualname]
        if len(same_name) == 1:
            return same_name[0]
        found: Any = sys.modules.get(module)
        if found is None:
            raise self.m.fail(place, f"dataclass {ref}: its module {module!r} imported before loading "
                                     f"(nothing is imported from a manifest), or classes=[{qualname}]")
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if not (isinstance(found, type) and dataclasses.is_dataclass(found)):
            raise self.m.fail(place, f"a dataclass named {ref}; {module!r} has none: pass classes=[...]")
        return found

    def _tensordict(self, node: Mapping[str, Any], place: str) -> Any:
        m = self.m
        keys = m.get(node, "keys", list, place)
        values = m.get(node, "values", list, place)
        batch_size = m.shape({"type": "tensordict", "shape": node.get("batch_size")}, place)
        device = node.get("device")
        names = node.get("names")
        if len(keys) != len(values) or not all(isinstance(k, str) for k in keys):
            raise m.fail(place, "string keys and as many values as keys in a tensordict node")
        if (device is not None and not isinstance(device, str)) or (names is not None and not isinstance(names, list)):
            raise m.fail(place, f"device a string or null and names a list or null; found {device!r}, {names!r}")
        items = {k: self.value(v, child_place(place, k)) for k, v in zip(keys, values, strict=True)}
        if self.dry:
            return None
        from tensordict import TensorDict

        try:  # tensors load on the CPU: an accelerator device is not restored
            return TensorDict(items, batch_size=batch_size, device=None if device is None else "cpu", names=names)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise m.fail(place, f"values that fit batch size {batch_size} ({exc})") from None

    def _torch_value(self, node: Mapping[str, Any], kind: str, place: str) -> Any:
        value = self.m.get(node, "value", list if kind == "torch.Size" else str, place)
        if self.dry:
            return None
        import torch

        try:
            if kind == "torch.dtype":
                dtype = getattr(torch, value, None)
                if not isinstance(dtype, torch.dtype):
                    raise ValueError(f"torch has no dtype {value!r}")
                return dtype
            if kind == "torch.device":
                return torch.device(value)
            return torch.Size(value)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise self.m.fail(place, f"a {kind} ({exc})") from None


def load_artifacts(folder: str | os.PathLike[str], *, allow_pickle: bool = False,
                   classes: Iterable[type] = ()) -> Any:
    """Read the object ``dump_artifacts`` wrote to ``folder``.

    Tensors come back on the CPU. A dataclass is rebuilt without running its ``__init__``;
    its class is found among ``classes`` or in a module that is already imported (nothing is
    imported because a manifest names it). A dump holding pickles is refused unless
    ``allow_pickle=True``: **loading a pickle runs code from the file**, so allow it only
    for folders you made or trust. Bad input raises ``InputError`` naming the file and the place.
    """
    root = Path(folder)
    path = root / MANIFEST
    try:
        with open_regular(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except FileNotFoundError:
        raise InputError(path, None, "the manifest of a dump folder (made by dump_artifacts): it is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"a readable UTF-8 manifest ({exc})") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        where = f"line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else None
        raise InputError(path, where, f"valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(path, "key 'format'", f"{FORMAT!r} (a dump_artifacts manifest)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(path, "key 'schema_version'", f"{SCHEMA_VERSION} (this myutils-core reads schema "
                                                       f"{SCHEMA_VERSION}; found {version!r}: upgrade myutils-core)")
    files = data.get("files")
    if not isinstance(files, dict):
        raise InputError(path, "key 'files'", "a mapping of payload files to their size and sha256")
    manifest = ManifestReader(root, files)
    payloads = PayloadReader(manifest, allow_pickle)
    classes = list(classes)
    _Decoder(manifest, payloads, classes, dry=True).value(data.get("root"), "root")
    return _Decoder(manifest, payloads, classes, dry=False).value(data.get("root"), "root")


def _no_constant(name: str) -> float:
    raise ValueError(f"bare {name} is not JSON")

