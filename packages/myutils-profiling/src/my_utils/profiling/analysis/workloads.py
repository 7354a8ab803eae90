"""Workload profiles: the thresholds of each built-in rule for ``pretrain``, ``finetune``, ``inference``.

A profile changes numbers, never code: ``options_for(rule)`` gives the keyword options the
analyzer passes to that rule's factory. Why the numbers differ:

- ``pretrain``: long, uniform steps; 15 % robust CV is already unusual, and memory must be
  flat after warm-up (5 % growth is reported).
- ``finetune``: variable sequence lengths and frequent evaluation make steps less uniform
  (25 % CV) and outliers more common (a 4σ / robust-z 4.5 bar).
- ``inference``: latency matters per request: 10 % CV is reported, an outlier is a tail
  latency problem (2.5σ), and any steady growth of memory (2 %) is a leak in a server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from my_utils.core.errors import UsageError


@dataclass(frozen=True)
class WorkloadProfile:
    """Named thresholds: ``rules`` maps a rule name to the keyword options it is built with."""

    name: str
    description: str
    rules: MappingProxyType[str, MappingProxyType[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    def options_for(self, rule: str) -> dict[str, Any]:
        """The keyword options of ``rule`` under this profile (empty for rules it does not tune)."""
        return dict(self.rules.get(rule, {}))


def _profile(name: str, description: str, **rules: dict[str, Any]) -> WorkloadProfile:
    return WorkloadProfile(name, description, MappingProxyType({k: MappingProxyType(v) for k, v in rules.items()}))


WORKLOADS: dict[str, WorkloadProfile] = {
    p.name: p for p in (
        _profile(
            "pretrain", "long uniform training steps",
            bottleneck={"share": 0.10, "critical_share": 0.30},
            memory_growth={"confidence": 0.95, "min_growth": 0.05, "critical_growth": 0.5},
            anomalies={"sigma": 3.0, "mad_z": 3.5, "warmup_steps": 1},
            variability={"cv": 0.15, "critical_cv": 0.5, "warmup_steps": 1},
            suggestions={"share": 0.2},
            rank_imbalance={"excess": 0.05},
        ),
        _profile(
            "finetune", "shorter runs with variable batches and frequent evaluation",
            bottleneck={"share": 0.10, "critical_share": 0.35},
            memory_growth={"confidence": 0.95, "min_growth": 0.10, "critical_growth": 0.5},
            anomalies={"sigma": 4.0, "mad_z": 4.5, "warmup_steps": 2},
            variability={"cv": 0.25, "critical_cv": 0.6, "warmup_steps": 2},
            suggestions={"share": 0.2},
            rank_imbalance={"excess": 0.10},
        ),
        _profile(
            "inference", "latency-bound forward passes",
            bottleneck={"share": 0.10, "critical_share": 0.25},
            memory_growth={"confidence": 0.95, "min_growth": 0.02, "critical_growth": 0.2},
            anomalies={"sigma": 2.5, "mad_z": 3.0, "warmup_steps": 1},
            variability={"cv": 0.10, "critical_cv": 0.3, "warmup_steps": 1},
            suggestions={"share": 0.15},
            rank_imbalance={"excess": 0.05},
        ),
    )
}
DEFAULT_WORKLOAD = "pretrain"


def get_workload(name: str | WorkloadProfile) -> WorkloadProfile:
    """The profile called ``name``; UsageError listing the known ones otherwise."""
    if isinstance(name, WorkloadProfile):
        return name
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"workload {name!r} is unknown; use one of {sorted(WORKLOADS)} "
                         "(they differ only in thresholds)") from None
