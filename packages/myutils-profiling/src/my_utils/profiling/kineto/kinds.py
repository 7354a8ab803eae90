"""Kernel kinds by name, following Holistic Trace Analysis' rules so that figures compare one to one.

The rules live in one table, :data:`KIND_RULES`, read top to bottom: the first kind whose
rule accepts the name wins, and a name no rule accepts is *other*. They restate HTA's
``CommunicateKernelGroupingPattern``, ``MemoryKernelGroupingPattern`` and
``ComputeKernelGroupingPattern`` (``hta/common/types.py``) as changed in September 2025
(HTA commit 610b10c, released in 0.6.0): communication also covers ``hip``/``hccl`` prefixes
and ``ncclKernel`` anywhere in the name (``nccl:all_reduce`` is communication), and
computation excludes the MTIA/Gaudi executor names (``pe_exe``, ``job_exe``, ``packet``,
``cpum_exe_subgraph``, ``collective_subgraph_execution``) and ``Stream Wait Event``.

HTA matches its regular expressions with ``re.match`` (anchored at the start only), so each
alternative is one of three clause shapes here: a prefix, a substring anywhere, or a prefix
followed later by a substring (``cuda…LaunchKernel``). ``test_kineto_kinds.py`` checks the
table against HTA's file (when HTA is installed) and against names whose kinds were read off
HTA's rules by hand.

A ``cuda_sync`` event (``Stream Sync``, ``Event Sync``, ``Stream Wait Event``…) on a real
stream is GPU time of kind *other* (non-compute), as in HTA's temporal breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class KernelKind(str, Enum):
    """What a GPU activity does."""

    COMPUTATION = "computation"
    COMMUNICATION = "communication"
    MEMORY = "memory"
    OTHER = "other"


@dataclass(frozen=True)
class NameRule:
    """Accepts a name when any clause matches (or, ``inverse``, when none does).

    ``prefixes``: the name starts with one; ``contains``: one occurs anywhere in the first
    line; ``prefix_then``: ``(a, b)`` — the name starts with ``a`` and ``b`` occurs after it in
    the first line (HTA's ``.*`` does not cross a line break).
    """

    prefixes: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    prefix_then: tuple[tuple[str, str], ...] = ()
    inverse: bool = False

    def matches(self, name: str) -> bool:
        """Whether one clause matches ``name`` (ignoring ``inverse``)."""
        if name.startswith(self.prefixes):
            return True
        line = name.split("\n", 1)[0]
        if any(c in line for c in self.contains):
            return True
        return any(line.startswith(a) and b in line[len(a):] for a, b in self.prefix_then)

    def accepts(self, name: str) -> bool:
        """Whether this rule gives its kind to ``name``."""
        return self.matches(name) != self.inverse


#: The one table of kind rules, in the order they are tried (HTA's ``get_kernel_type`` order).
KIND_RULES: tuple[tuple[KernelKind, NameRule], ...] = (
    (KernelKind.COMMUNICATION, NameRule(prefixes=("nccl", "hip", "hccl"), contains=("ncclKernel",))),
    (KernelKind.MEMORY, NameRule(prefixes=("Memcpy", "hipMemcpy", "Memset", "hipMemset", "dma"))),
    (KernelKind.COMPUTATION, NameRule(
        prefixes=("nccl", "Stream Wait Event", "runFunction", "hip", "job_exe", "packet", "pe_exe",
                  "cpum_exe_subgraph", "hccl", "collective_subgraph_execution"),
        contains=("Memcpy", "Memset", "dma", "Sync"),
        prefix_then=(("cuda", "LaunchKernel"),),
        inverse=True)),
)
#: Where the table comes from (for reports and the drift test).
KIND_RULES_SOURCE = ("Holistic Trace Analysis hta/common/types.py, kernel grouping patterns as of "
                     "September 2025 (commit 610b10c, release 0.6.0)")

KINDS: tuple[KernelKind, ...] = tuple(KernelKind)


def kind_of(name: str) -> KernelKind:
    """The kind of the GPU activity called ``name`` (the first rule of :data:`KIND_RULES` that accepts it)."""
    for kind, rule in KIND_RULES:
        if rule.accepts(name):
            return kind
    return KernelKind.OTHER
