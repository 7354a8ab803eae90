"""Analysis: metric events → facts, findings, scores, tables and a headline (``MetricsAnalyzer`` → ``AnalysisReport``).

Light to import: the names are resolved on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "EventAggregate": "my_utils.profiling.analysis.analyzer",
    "MetricsAnalyzer": "my_utils.profiling.analysis.analyzer",
    "compute_scores": "my_utils.profiling.analysis.scores",
    "WORKLOADS": "my_utils.profiling.analysis.workloads",
    "WorkloadProfile": "my_utils.profiling.analysis.workloads",
    "get_workload": "my_utils.profiling.analysis.workloads",
    "AnalysisReport": "my_utils.profiling.analysis.model",
    "Finding": "my_utils.profiling.analysis.model",
    "REPORT_FILE_NAME": "my_utils.profiling.analysis.model",
    "REPORT_SCHEMA_VERSION": "my_utils.profiling.analysis.model",
    "SEVERITIES": "my_utils.profiling.analysis.model",
    "Advice": "my_utils.profiling.analysis.model",
    "EvidenceRow": "my_utils.profiling.analysis.model",
    "Fact": "my_utils.profiling.analysis.model",
    "Headline": "my_utils.profiling.analysis.model",
    "Impact": "my_utils.profiling.analysis.model",
    "NotMeasured": "my_utils.profiling.analysis.model",
    "Verdict": "my_utils.profiling.analysis.model",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.analysis.analyzer import EventAggregate as EventAggregate
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer as MetricsAnalyzer
    from my_utils.profiling.analysis.model import REPORT_FILE_NAME as REPORT_FILE_NAME
    from my_utils.profiling.analysis.model import REPORT_SCHEMA_VERSION as REPORT_SCHEMA_VERSION
    from my_utils.profiling.analysis.model import SEVERITIES as SEVERITIES
    from my_utils.profiling.analysis.model import Advice as Advice
    from my_utils.profiling.analysis.model import AnalysisReport as AnalysisReport
    from my_utils.profiling.analysis.model import EvidenceRow as EvidenceRow
    from my_utils.profiling.analysis.model import Fact as Fact
    from my_utils.profiling.analysis.model import Finding as Finding
    from my_utils.profiling.analysis.model import Headline as Headline
    from my_utils.profiling.analysis.model import Impact as Impact
    from my_utils.profiling.analysis.model import NotMeasured as NotMeasured
    from my_utils.profiling.analysis.model import Verdict as Verdict
    from my_utils.profiling.analysis.scores import compute_scores as compute_scores
    from my_utils.profiling.analysis.workloads import WORKLOADS as WORKLOADS
    from my_utils.profiling.analysis.workloads import WorkloadProfile as WorkloadProfile
    from my_utils.profiling.analysis.workloads import get_workload as get_workload
