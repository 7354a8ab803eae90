"""Gather tensors of different sizes: pad to the largest, ``all_gather``, cut each back.

gloo (and NCCL) refuse unequal sizes in ``all_gather`` (``ProcessGroupGloo::allgather: invalid
tensor size at index 1``). ``pad_to``/``unpad`` are the two halves for one dimension;
``all_gather_variable`` does the whole exchange: it first gathers every rank's shape and
dtype (one small int64 ``all_gather``), then the payload as raw bytes padded to the largest,
so ranks may differ in every dimension, tensors may be empty, and any dtype travels (gloo has
no ``bool`` all_gather; bytes it has).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError

if TYPE_CHECKING:
    import torch

__all__ = ["all_gather_variable", "pad_to", "unpad"]

MAX_DIMS = 8


def pad_to(tensor: torch.Tensor, length: int, dim: int = 0, value: float = 0) -> torch.Tensor:
    """``tensor`` extended along ``dim`` to ``length`` with ``value`` (the tensor itself if already there)."""
    import torch

    size = tensor.shape[dim]
    if length < size:
        raise UsageError(f"pad_to(length={length}, dim={dim}): the tensor already has {size} there; "
                         "pad to the largest size of all ranks")
    if length == size:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = length - size
    return torch.cat([tensor, torch.full(shape, value, dtype=tensor.dtype, device=tensor.device)], dim=dim)


def unpad(tensor: torch.Tensor, length: int, dim: int = 0) -> torch.Tensor:
    """The first ``length`` entries of ``tensor`` along ``dim`` (a view: no copy)."""
    if not 0 <= length <= tensor.shape[dim]:
        raise UsageError(f"unpad(length={length}, dim={dim}): expected 0..{tensor.shape[dim]}")
    return tensor.narrow(dim, 0, length)


def _dtype_code(dtype: Any) -> int:
    # crc32 of the name: stable across processes (hash() of a str is salted per process)
    return zlib.crc32(str(dtype).encode())


def all_gather_variable(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (shapes may differ, dtypes must match), in rank order of ``group``.

    Collective: every rank of the group calls it. The result tensors are new (on the
    tensor's device). A dtype that differs between ranks, or more than 8 dimensions, is a
    ``UsageError`` naming the ranks.
    """
    import torch
    import torch.distributed as dist

    if tensor.dim() > MAX_DIMS:
        raise UsageError(f"all_gather_variable: {tensor.dim()} dimensions; at most {MAX_DIMS} (reshape first)")
    world = dist.get_world_size(group)
    device = tensor.device
    meta = torch.full((2 + MAX_DIMS,), -1, dtype=torch.int64, device=device)
    meta[0] = tensor.dim()
    meta[1] = _dtype_code(tensor.dtype)
    if tensor.dim():
        meta[2:2 + tensor.dim()] = torch.tensor(tensor.shape, dtype=torch.int64)
    metas = [torch.empty_like(meta) for _ in range(world)]
    dist.all_gather(metas, meta, group=group)
    rows = [m.tolist() for m in metas]
    codes = {row[1] for row in rows}
    if len(codes) > 1:
        mine = _dtype_code(tensor.dtype)
        others = [r for r, row in enumerate(rows) if row[1] != mine]
        raise UsageError(f"all_gather_variable: this rank's {tensor.dtype} differs from the dtype of ranks "
                         f"{others} (group order); convert every rank's tensor to one dtype first")
    shapes = [tuple(int(x) for x in row[2:2 + int(row[0])]) for row in rows]
    item = tensor.element_size()
    sizes = [item * _numel(shape) for shape in shapes]
    longest = max(sizes)
    if longest == 0:
        return [torch.empty(shape, dtype=tensor.dtype, device=device) for shape in shapes]
    payload = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    padded = pad_to(payload, longest)
    gathered = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(gathered, padded, group=group)
    return [unpad(raw, size).view(tensor.dtype).reshape(shape).clone()
            for raw, size, shape in zip(gathered, sizes, shapes, strict=True)]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
