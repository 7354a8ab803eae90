"""Gather tensors of different sizes: pad to the largest, ``all_gather``, cut each back.

gloo (and NCCL) refuse unequal sizes in ``all_gather`` (``ProcessGroupGloo::allgather: invalid
tensor size at index 1``). ``pad_to``/``unpad`` are the two halves for one dimension;
``all_gather_variable`` does the whole exchange: it first gathers every rank's shape, dtype
and anything wrong with its tensor (one small int64 ``all_gather``), then the payload as raw
bytes padded to the largest, so ranks may differ in every dimension, tensors may be empty,
and any dtype travels (gloo has no ``bool`` all_gather; bytes it has). Nothing raises on one
rank before the shapes are agreed: a collective that one rank leaves while the others enter
it blocks them until the process group's timeout (30 minutes by default).
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


def _dtype_name(code: int) -> str:
    """The name of the torch dtype whose code is ``code`` (every rank knows every dtype)."""
    import torch

    for value in vars(torch).values():
        if isinstance(value, torch.dtype) and _dtype_code(value) == code:
            return str(value)
    return f"an unknown dtype (code {code})"


# What a rank found wrong with its own tensor, sent with its shape so that every rank can say it.
_OK, _TOO_MANY_DIMS, _NOT_STRIDED, _NOT_BYTES = 0, 1, 2, 3


def _local_payload(tensor: torch.Tensor) -> tuple[int, torch.Tensor | None, BaseException | None]:
    """(problem code, this rank's bytes, the local error): nothing here may raise before the shapes are agreed."""
    import torch

    if tensor.dim() > MAX_DIMS:
        return _TOO_MANY_DIMS, None, None
    if tensor.layout != torch.strided:
        return _NOT_STRIDED, None, None
    try:
        dense = tensor.detach().resolve_conj().resolve_neg().contiguous()
        return _OK, dense.reshape(-1).view(torch.uint8), None
    except Exception as exc:  # told to every rank below, then raised here as the cause
        return _NOT_BYTES, None, exc


def _problem(rank: int, row: list[int]) -> str:
    code, dims = row[2], row[0]
    if code == _TOO_MANY_DIMS:
        return f"rank {rank} has {dims} dimensions (at most {MAX_DIMS}: reshape first)"
    if code == _NOT_STRIDED:
        return f"rank {rank} has a sparse or other non-strided tensor (call .to_dense() first)"
    return f"rank {rank}'s {_dtype_name(row[1])} tensor cannot be sent as bytes (see that rank's error)"


def all_gather_variable(tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (shapes may differ, dtypes must match), in rank order of ``group``.

    Collective: every rank of the group calls it. The result tensors are new (on the
    tensor's device). The ranks agree on shapes and dtypes first (one small ``all_gather``):
    a dtype that differs between ranks, more than 8 dimensions or a sparse tensor on any
    rank is the same ``UsageError`` on every rank, naming the ranks at fault (never one rank
    failing while the others wait for it until the process group's timeout).
    """
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():  # no collective can run: nobody waits
        raise UsageError("all_gather_variable: torch.distributed is not initialised; call init_process_group(...) "
                         "first")
    world = dist.get_world_size(group)
    device = tensor.device
    problem, payload, local_error = _local_payload(tensor)
    meta = torch.full((3 + MAX_DIMS,), -1, dtype=torch.int64, device=device)
    meta[0] = tensor.dim()
    meta[1] = _dtype_code(tensor.dtype)
    meta[2] = problem
    if tensor.dim() and problem != _TOO_MANY_DIMS:
        meta[3:3 + tensor.dim()] = torch.tensor(tensor.shape, dtype=torch.int64)
    metas = [torch.empty_like(meta) for _ in range(world)]
    dist.all_gather(metas, meta, group=group)
    rows = [m.tolist() for m in metas]
    faults = [_problem(r, row) for r, row in enumerate(rows) if row[2] != _OK]
    if faults:
        raise UsageError(f"all_gather_variable: {'; '.join(faults)} (group order); every rank of the group "
                         "raises this error") from local_error
    codes = [row[1] for row in rows]
    if len(set(codes)) > 1:
        groups: dict[int, list[int]] = {}
        for r, code in enumerate(codes):
            groups.setdefault(code, []).append(r)
        listing = "; ".join(f"{_dtype_name(code)} on ranks {ranks}" for code, ranks in groups.items())
        raise UsageError(f"all_gather_variable: the dtypes differ across ranks ({listing}; group order); "
                         "convert every rank's tensor to one dtype first")
    if payload is None:  # unreachable: no rank reported a problem, this one included
        raise UsageError("all_gather_variable: internal error: no payload although no rank reported a problem")
    shapes = [tuple(int(x) for x in row[3:3 + int(row[0])]) for row in rows]
    item = tensor.element_size()
    sizes = [item * _numel(shape) for shape in shapes]
    longest = max(sizes)
    if longest == 0:
        return [torch.empty(shape, dtype=tensor.dtype, device=device) for shape in shapes]
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
