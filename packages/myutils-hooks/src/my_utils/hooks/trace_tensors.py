"""The tensors of one module call: found in nested inputs/outputs, fingerprinted, and cut to what is saved.

A call's inputs and outputs are any nesting of tuples, lists, dicts and dataclass-like objects
holding tensors. Each tensor is named by its path (``args.0``, ``kwargs.mask``, ``out.logits``),
fingerprinted by the MD5 of its bytes (dtype and shape recorded beside it: equal bytes of a
different shape are a different tensor) and, when the recorder saves values, cut to its first
``max_elements`` elements. The MD5 is always of the whole tensor, so two runs compare exactly
even when only a head is saved.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorMeta:
    """One tensor of a call: where it sits, what it is, its fingerprint, how much of it was saved."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    md5: str
    numel: int
    saved: int  # elements saved (0: not saved)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "shape": list(self.shape), "dtype": self.dtype, "device": self.device,
                "md5": self.md5, "numel": self.numel, "saved": self.saved}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> TensorMeta:
        return cls(str(row["path"]), tuple(int(x) for x in row["shape"]), str(row["dtype"]), str(row["device"]),
                   str(row["md5"]), int(row["numel"]), int(row["saved"]))


def iter_tensors(obj: Any, path: str, torch: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, tensor) of every tensor inside ``obj`` (tuples, lists, dicts, objects with tensor fields)."""
    if depth > 32:  # a self-referencing structure: what was found so far is enough
        return
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from iter_tensors(v, f"{path}.{i}", torch, depth + 1)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from iter_tensors(v, f"{path}.{k}", torch, depth + 1)
    elif hasattr(obj, "__dataclass_fields__") or type(obj).__name__.endswith("Output"):
        # dataclasses and transformers' ModelOutput (an OrderedDict subclass is caught above)
        for k, v in vars(obj).items():
            if not k.startswith("_"):
                yield from iter_tensors(v, f"{path}.{k}", torch, depth + 1)


def tensor_md5(t: Any) -> str:
    """MD5 of the tensor's bytes in row-major order (on the CPU; any dtype, bf16 included)."""
    import torch

    flat = t.detach().reshape(-1).contiguous().cpu()
    if flat.numel() == 0:
        return hashlib.md5(b"").hexdigest()
    return hashlib.md5(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def describe(path: str, t: Any, max_elements: int | None) -> tuple[TensorMeta, Any]:
    """The tensor's meta and the CPU copy to save (None when nothing is saved)."""
    numel = int(t.numel())
    keep = numel if max_elements is None else min(numel, max(0, max_elements))
    saved = None
    if keep > 0:
        saved = t.detach().reshape(-1)[:keep].clone().cpu() if keep < numel else t.detach().clone().cpu()
    meta = TensorMeta(path, tuple(int(x) for x in t.shape), str(t.dtype).removeprefix("torch."), str(t.device),
                      tensor_md5(t), numel, keep)
    return meta, saved


def module_params(module: Any) -> tuple[dict[str, str], str | None]:
    """The module's own parameters (not its children's): name → dtype, and one MD5 over them all."""
    dtypes: dict[str, str] = {}
    h = hashlib.md5()
    for name, p in module.named_parameters(recurse=False):
        dtypes[name] = str(p.dtype).removeprefix("torch.")
        h.update(f"{name}:{dtypes[name]}:{tuple(p.shape)}:".encode())
        h.update(bytes.fromhex(tensor_md5(p)))
    return dtypes, (h.hexdigest() if dtypes else None)
