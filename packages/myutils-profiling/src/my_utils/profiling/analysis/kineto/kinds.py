"""Kernel kinds by name, with Holistic Trace Analysis' rules so that figures compare one to one.

A kernel is *communication* when its name matches ``^nccl.*Kernel``, *memory* when it starts
with ``Memcpy``, ``Memset`` or ``dma``, *computation* unless it is one of those or a
``...Sync`` kernel (then *other*).
"""

from __future__ import annotations

import re
from enum import Enum


class KernelKind(str, Enum):
    """What a GPU activity does."""

    COMPUTATION = "computation"
    COMMUNICATION = "communication"
    MEMORY = "memory"
    OTHER = "other"


_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"^(Memcpy|Memset|dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

KINDS: tuple[KernelKind, ...] = tuple(KernelKind)


def kind_of(name: str) -> KernelKind:
    """The kind of the GPU activity called ``name``."""
    if _COMM.match(name):
        return KernelKind.COMMUNICATION
    if _MEMORY.match(name):
        return KernelKind.MEMORY
    if not _NOT_COMPUTE.match(name):
        return KernelKind.COMPUTATION
    return KernelKind.OTHER
