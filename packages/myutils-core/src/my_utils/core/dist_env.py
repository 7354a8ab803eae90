"""Rank and world size from arguments, else from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import overload

from my_utils.core.errors import ConfigError, UsageError

__all__ = ["RankInfo", "env_int", "env_rank", "resolve_rank_info"]


@dataclass(frozen=True, slots=True)
class RankInfo:
    """Where this process sits: global rank, world size and (if known) the rank on its node."""

    rank: int
    world_size: int
    local_rank: int | None


def env_int(name: str) -> int | None:
    """The integer value of environment variable ``name``; None when unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError("environment", f"variable {name}", f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise ConfigError("environment", f"variable {name}", f"expected a non-negative integer, got {text!r}")
    return value


@overload
def env_rank(default: int) -> int: ...
@overload
def env_rank(default: None) -> int | None: ...


def env_rank(default: int | None = 0) -> int | None:
    """torchrun's ``RANK`` for instrumentation that must never raise: ``default`` when unset or bad.

    Use ``resolve_rank_info`` where a bad value should be reported at set-up instead.
    """
    text = os.environ.get("RANK", "").strip()
    return int(text) if text.isdigit() else default


def resolve_rank_info(rank: int | None = None, world_size: int | None = None) -> RankInfo:
    """Explicit values win; then RANK (else LOCAL_RANK) and WORLD_SIZE; then rank 0 of 1."""
    local_rank = env_int("LOCAL_RANK")
    if rank is None:
        rank = env_int("RANK")
        if rank is None:
            rank = local_rank if local_rank is not None else 0
    if world_size is None:
        world_size = env_int("WORLD_SIZE") or max(1, rank + 1)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise UsageError(f"rank={rank!r}: expected a non-negative integer")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise UsageError(f"world_size={world_size!r}: expected a positive integer")
    if rank >= world_size:
        raise UsageError(f"rank={rank} is not below world_size={world_size}: pass both, or set RANK and WORLD_SIZE")
    return RankInfo(rank=rank, world_size=world_size, local_rank=local_rank)
