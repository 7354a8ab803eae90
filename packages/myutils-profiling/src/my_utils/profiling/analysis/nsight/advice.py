"""What the Nsight findings advise, keyed by the kind of evidence, and the helpers that attach it to its rows.

One table to review (ARCHITECTURE.md §8: advice comes from the kind of evidence, not from names):
the rest of the advice the Nsight findings give is ``analysis.advice``'s (idle causes,
communication, operator families).
"""

from __future__ import annotations

import re
from typing import Any

from my_utils.profiling.model.report import Fact

#: Advice of the Nsight findings, keyed by the kind of evidence (the rest comes from ``analysis.advice``).
NSIGHT_ADVICE: dict[str, str] = {
    "rank_skew": "the other ranks wait for rank {rank} at each {collective}: look at what that rank does before it "
                 "(uneven data or sequence lengths, extra work such as logging or checkpointing on one rank, a slower "
                 "GPU or host); compare the ranks' iterations on one clock (myutils-profile nsys summary of all ranks)",
    "warmup": "the capture window starts before the run is warm (first-iteration allocator growth, cuDNN/cuBLAS "
              "autotuning, torch.compile): start the capture a few iterations later (nsys --capture-range=cudaProfilerApi "
              "with cudaProfilerStart after warm-up, or a my_utils capture window on later steps), or leave the first "
              "iteration out of the statistics",
    "no_osrt": "trace the OS runtime too (nsys profile --trace cuda,nvtx,osrt) to see what the host waited on",
    "latency_bound": "neither compute ({compute:.0f}%) nor memory ({memory:.0f}%) reaches 60% of peak: the kernel "
                     "waits on latency — too few warps in flight (achieved occupancy {occupancy}) or dependent "
                     "instructions; give it more parallel work (larger blocks/batch, fuse it with its neighbours) "
                     "and read ncu's Occupancy and Warp State sections",
    "roofline": "the kernel attains {roof:.0f}% of its roofline at {ai:.2f} FLOP/byte: {bound} — {hint}",
    "roof_memory": "memory-bound at this intensity: fuse it with its producer/consumer or use a lower precision to "
                   "move fewer bytes",
    "roof_compute": "compute-bound at this intensity: use tensor cores (bf16/tf32) and check the instruction mix",
    "rule": "ncu's {rule} rule ({rule_type}): {description}",
}


#: The top-down triage's verdicts: what bounds the run, and where to look next.
TRIAGE = {
    "host": ("host-bound", "the GPU mostly waits for the host: see the idle finding; profile the host side (Python, "
                           "data loading, launches) with nsys --trace osrt,cuda,nvtx --sample cpu"),
    "communication": ("communication-bound", "exposed communication dominates: overlap it with compute, and check "
                                             "the ranks' arrival skew"),
    "memory": ("memcpy-bound", "copies and sets dominate the GPU's busy time: avoid or overlap them"),
    "compute": ("kernel-bound", "kernels keep the GPU busy: the time is in the kernels themselves; profile the top "
                                "kernels with Nsight Compute (ncu --set full -k <name>) for their speed of light and "
                                "occupancy"),
}


def evidence_rows(*facts: Fact | None) -> list[dict[str, Any]]:
    """The evidence rows of ``facts``, each once (two facts read from one row cite it once)."""
    out: list[dict[str, Any]] = []
    for e in (e for f in facts if f is not None for e in f.evidence):
        row = e.to_dict()
        if row not in out:
            out.append(row)
    return out


def advice_entry(text: str, kind: str, *facts: Fact | None) -> dict[str, Any]:
    return {"text": text, "because": evidence_rows(*facts), "facts": [f.id for f in facts if f is not None], "kind": kind}


_SPACE = re.compile(r"\s+")


def sentence(text: str, limit: int = 400) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def short_kernel(kernel: str, limit: int = 60) -> str:
    """A kernel's name for a title: no return type, namespaces, template or parameter lists (the full name is in
    the evidence and the ``ncu_kernels`` table)."""
    name = kernel.strip().removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    for ch in "(<":
        cut = name.find(ch)
        if cut > 0:
            name = name[:cut]
    name = name.rsplit("::", 1)[-1].strip() or kernel.strip()
    return name if len(name) <= limit else name[:limit - 1] + "…"
