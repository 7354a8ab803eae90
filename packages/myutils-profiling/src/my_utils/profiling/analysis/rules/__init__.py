"""The built-in analyzer rules, one module per rule; each is registered as a plugin by
``my_utils.profiling.plugin`` (``myutils_analysis_rules``) exactly as a third party's would be."""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AnomalyRule": "my_utils.profiling.analysis.rules.anomalies",
    "BottleneckRule": "my_utils.profiling.analysis.rules.bottleneck",
    "MemoryGrowthRule": "my_utils.profiling.analysis.rules.memory_trend",
    "RankImbalanceRule": "my_utils.profiling.analysis.rules.imbalance",
    "SourceChecksRule": "my_utils.profiling.analysis.rules.sources",
    "SuggestionsRule": "my_utils.profiling.analysis.rules.suggestions",
    "VariabilityRule": "my_utils.profiling.analysis.rules.variability",
    "suggest": "my_utils.profiling.analysis.rules.suggestions",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.analysis.rules.anomalies import AnomalyRule as AnomalyRule
    from my_utils.profiling.analysis.rules.bottleneck import BottleneckRule as BottleneckRule
    from my_utils.profiling.analysis.rules.imbalance import RankImbalanceRule as RankImbalanceRule
    from my_utils.profiling.analysis.rules.memory_trend import MemoryGrowthRule as MemoryGrowthRule
    from my_utils.profiling.analysis.rules.sources import SourceChecksRule as SourceChecksRule
    from my_utils.profiling.analysis.rules.suggestions import SuggestionsRule as SuggestionsRule
    from my_utils.profiling.analysis.rules.suggestions import suggest as suggest
    from my_utils.profiling.analysis.rules.variability import VariabilityRule as VariabilityRule
