"""Advice conditioned on the verdict and on what the capture holds (``diagnosis/CASES.md``, principle 3).

The rules attach full advice texts, composed of the pieces of ``analysis.advice.PIECES``. Once the
verdict and the capture's contents are known, :func:`gate_findings` removes from every advice and
suggestion text each piece whose :class:`Gate` (one table: :data:`GATES`, keyed by piece) does
not hold for the run, and drops an advice left with its lead alone. A finding may end with no
advice: no advice rather than a generic one.

A gate holds when each of its conditions does: the verdict is one it allows; the run is not
known to be CPU-only (``gpu``); the program is not known to be something other than PyTorch
(``pytorch``); a computation kernel ran (``compute``); at least one of its operator families is
present (``families``); and none of the features that make it moot is (``unless``: CUDA graph
launches already seen, torch.compile already in use, fused attention already running). Unknown
(None) never rules a piece out: a MyTimer-only run keeps GPU advice it cannot disprove.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from my_utils.profiling.analysis.advice import PIECES
from my_utils.profiling.analysis.contents import CaptureContents
from my_utils.profiling.model.report import BOUNDS, Advice, Finding

#: Verdicts of a steady state: setup-dominated and CPU-only runs have no GPU launches to speed up.
STEADY = frozenset(BOUNDS) - {"setup", "cpu"}
#: Verdicts where the GPU's own work is the lever (halving kernel time shortens the step).
KERNEL_BOUND = frozenset({"compute", "not measured"})


@dataclass(frozen=True)
class Gate:
    """When one piece of advice applies (module docstring)."""

    verdicts: frozenset[str] = frozenset(BOUNDS)
    gpu: bool = False
    pytorch: bool = False
    compute: bool = False
    families: frozenset[str] = frozenset()
    unless: frozenset[str] = frozenset()

    def holds(self, bound: str, contents: CaptureContents) -> bool:
        """Whether the piece applies to a run of verdict ``bound`` holding ``contents``."""
        return (bound in self.verdicts
                and not (self.gpu and contents.gpu is False)
                and not (self.pytorch and contents.pytorch is False)
                and not (self.compute and contents.compute_kernels is False)
                and (not self.families or bool(self.families & contents.families))
                and not (self.unless & contents.features))


def _g(verdicts: frozenset[str] = frozenset(BOUNDS), *, gpu: bool = False, pytorch: bool = False,
       compute: bool = False, families: tuple[str, ...] = (), unless: tuple[str, ...] = ()) -> Gate:
    return Gate(verdicts, gpu, pytorch, compute, frozenset(families), frozenset(unless))


#: Each conditional piece of advice (``advice.PIECES``) and when it applies. Pieces not listed always apply.
GATES: dict[str, Gate] = {
    # launch overhead: a steady state with GPU launches, not already a CUDA graph
    "cuda_graphs": _g(STEADY, gpu=True, unless=("cuda_graphs",)),
    "cuda_graphs_short": _g(STEADY, gpu=True, unless=("cuda_graphs",)),
    "reduce_overhead": _g(STEADY, gpu=True, pytorch=True, unless=("cuda_graphs",)),
    "larger_batch_launch": _g(STEADY, gpu=True),
    # the kernels' own time: only where the GPU's work bounds the step (never host-bound: the GPU waits)
    "mixed_precision_backward": _g(KERNEL_BOUND, gpu=True, pytorch=True),
    "mixed_precision": _g(KERNEL_BOUND, gpu=True, pytorch=True),
    "sdpa": _g(KERNEL_BOUND, gpu=True, pytorch=True, families=("attention",), unless=("flash_attention",)),
    "compile_fusion": _g(KERNEL_BOUND | {"memory"}, gpu=True, pytorch=True, unless=("compiled",)),
    "larger_batch": _g(KERNEL_BOUND, gpu=True),
    # PyTorch's own knobs
    "activation_checkpointing": _g(pytorch=True),
    "find_unused_parameters": _g(pytorch=True, families=("communication",)),
    "wrapped_operators": _g(pytorch=True),
    "broadcast_buffers": _g(pytorch=True),
    "fsdp_forward_prefetch": _g(pytorch=True, compute=True),
    "async_save": _g(pytorch=True),
    "optimizer_unnamed": _g(pytorch=True),
    "optimizer_unnamed_why": _g(pytorch=True),
    "optimizer_not_torch": _g(pytorch=True),
    "optimizer_per_parameter": _g(pytorch=True),
    "fused_optimizer": _g(pytorch=True),
    "foreach_next": _g(gpu=True, pytorch=True),
    "foreach_path": _g(gpu=True, pytorch=True),
    "dataloader_workers": _g(pytorch=True),
    "loader_workers": _g(pytorch=True),
    # overlapping communication needs computation to overlap with
    "ddp_buckets": _g(pytorch=True, compute=True),
    "ddp_overlap": _g(pytorch=True, compute=True),
    "fsdp_prefetch": _g(pytorch=True, compute=True),
    "no_barrier": _g(compute=True),
    "own_stream": _g(gpu=True, compute=True),
    # the GPU's memory and queues
    "pin_memory": _g(gpu=True, pytorch=True),
    "device_prefetch": _g(gpu=True),
    "keep_on_device": _g(gpu=True),
    "pinned_copies": _g(gpu=True),
    "avoid_sync": _g(gpu=True),
    "caching_allocator": _g(gpu=True, pytorch=True),
    "allocator_retries": _g(gpu=True, pytorch=True),
    "gpu_queue": _g(gpu=True),
}
# a piece removed before any piece that contains it (none does today; the order keeps it safe)
_BY_LENGTH = sorted(GATES, key=lambda k: -len(PIECES[k]))


def removed_pieces(bound: str, contents: CaptureContents) -> list[str]:
    """The keys of the pieces that do not apply to the run, longest text first."""
    return [k for k in _BY_LENGTH if not GATES[k].holds(bound, contents)]


def strip(text: str, keys: Sequence[str]) -> str:
    """``text`` without the pieces ``keys`` (and the separator beside each); "" when only its lead is left."""
    out = text
    for key in keys:
        piece = PIECES[key]
        if piece not in out:
            continue
        for joined in ("; " + piece, piece + "; ", " " + piece, piece):
            out = out.replace(joined, "")
    out = out.strip()
    return "" if not out or out.endswith(":") else out


def gate_findings(findings: Sequence[Finding], bound: str, contents: CaptureContents) -> list[Finding]:
    """Every finding with only the advice that applies to the run (module docstring)."""
    keys = removed_pieces(bound, contents)
    if not keys:
        return list(findings)
    return [gate_finding(f, keys) for f in findings]


def gate_finding(f: Finding, keys: Sequence[str]) -> Finding:
    """One finding with the pieces ``keys`` removed from its advice and suggestion."""
    advice: list[Advice] = []
    for a in f.advice:
        text = strip(a.text, keys)
        if text:
            advice.append(a if text == a.text else replace(a, text=text))
    suggestion = strip(f.suggestion, keys) if f.suggestion else ""
    if f.advice and suggestion != f.suggestion:
        suggestion = " ".join(a.text for a in advice)
    if tuple(advice) == f.advice and suggestion == f.suggestion:
        return f
    return replace(f, advice=tuple(advice), suggestion=suggestion)
