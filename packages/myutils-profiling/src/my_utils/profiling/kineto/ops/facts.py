"""The GPU-time mix as facts for the verdict: ``gpu.mix`` and ``gpu.gemm_share`` (and ``:rank<r>``).

``gpu.mix`` is the share of GPU work (kernels, copies and sets) in elementwise kernels and copies,
its ``detail`` the whole mix in words ("31% elementwise and copies, 26% communication, 23% GEMM,
..."); ``gpu.gemm_share`` the share in matrix products. Both read ``kineto_op_categories``
(``ops.breakdown``); with several ranks the times are summed over ranks (``aggregate`` says so).
The verdict quotes the mix on a compute-bound run and says when elementwise work and copies
outweigh the GEMMs (``analysis.verdict``): a busy GPU is not a GPU busy with matrix products.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.kineto.contract_facts import _scopes as scopes
from my_utils.profiling.kineto.ops.categories import mix_text
from my_utils.profiling.model.report import EvidenceRow, Fact

Rows = Sequence[Mapping[str, Any]]


def mix_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``gpu.mix`` and ``gpu.gemm_share`` per rank and for the run (module docstring)."""
    facts: list[Fact] = []
    for tag, rows, ranks, aggregate in scopes(tables.get("kineto_op_categories") or []):
        per: dict[str, float] = {}
        for r in rows:
            per[str(r.get("category"))] = per.get(str(r.get("category")), 0.0) + float(r.get("gpu_us") or 0.0)
        total = sum(per.values())
        if total <= 0:
            continue
        shares = {c: 100.0 * us / total for c, us in per.items()}
        ev = tuple(EvidenceRow("kineto_op_categories", {"rank": r.get("rank"), "category": r.get("category")},
                               {"gpu_us": r.get("gpu_us"), "pct": r.get("pct"), "example_index": r.get("example_index")})
                   for r in rows)
        whole = "GPU kernel, copy and set time"
        facts.append(Fact(f"gpu.mix{tag}", "GPU time in elementwise kernels and copies",
                          shares.get("elementwise", 0.0) + shares.get("copy", 0.0), "%", "kineto", whole, total / 1e3,
                          "ms", ranks, aggregate, evidence=ev, detail=mix_text(shares)))
        facts.append(Fact(f"gpu.gemm_share{tag}", "GPU time in matrix products (GEMM)", shares.get("gemm", 0.0), "%",
                          "kineto", whole, total / 1e3, "ms", ranks, aggregate, evidence=ev))
    return facts
