"""Analysis: metric events → facts, findings, scores, tables and a headline (``MetricsAnalyzer`` → ``AnalysisReport``).

Light to import: the names are resolved on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "EventAggregate": "my_utils.profiling.analysis.aggregate",
    "MetricsAnalyzer": "my_utils.profiling.analysis.analyzer",
    "compute_scores": "my_utils.profiling.model.scores",
    "WORKLOADS": "my_utils.profiling.analysis.workloads",
    "WorkloadProfile": "my_utils.profiling.analysis.workloads",
    "get_workload": "my_utils.profiling.analysis.workloads",
    "AnalysisReport": "my_utils.profiling.model.report",
    "Finding": "my_utils.profiling.model.report",
    "REPORT_FILE_NAME": "my_utils.profiling.model.report",
    "REPORT_SCHEMA_VERSION": "my_utils.profiling.model.report",
    "SEVERITIES": "my_utils.profiling.model.report",
    "Advice": "my_utils.profiling.model.report",
    "EvidenceRow": "my_utils.profiling.model.report",
    "Fact": "my_utils.profiling.model.report",
    "Headline": "my_utils.profiling.model.report",
    "Impact": "my_utils.profiling.model.report",
    "NotMeasured": "my_utils.profiling.model.report",
    "Verdict": "my_utils.profiling.model.report",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.profiling.analysis.aggregate import EventAggregate as EventAggregate
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer as MetricsAnalyzer
    from my_utils.profiling.analysis.workloads import WORKLOADS as WORKLOADS
    from my_utils.profiling.analysis.workloads import WorkloadProfile as WorkloadProfile
    from my_utils.profiling.analysis.workloads import get_workload as get_workload
    from my_utils.profiling.model.report import REPORT_FILE_NAME as REPORT_FILE_NAME
    from my_utils.profiling.model.report import REPORT_SCHEMA_VERSION as REPORT_SCHEMA_VERSION
    from my_utils.profiling.model.report import SEVERITIES as SEVERITIES
    from my_utils.profiling.model.report import Advice as Advice
    from my_utils.profiling.model.report import AnalysisReport as AnalysisReport
    from my_utils.profiling.model.report import EvidenceRow as EvidenceRow
    from my_utils.profiling.model.report import Fact as Fact
    from my_utils.profiling.model.report import Finding as Finding
    from my_utils.profiling.model.report import Headline as Headline
    from my_utils.profiling.model.report import Impact as Impact
    from my_utils.profiling.model.report import NotMeasured as NotMeasured
    from my_utils.profiling.model.report import Verdict as Verdict
    from my_utils.profiling.model.scores import compute_scores as compute_scores
