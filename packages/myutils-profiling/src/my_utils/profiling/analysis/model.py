"""The analysis report and its findings: the data contract between analysis and reports.

``analysis_report.json`` (ARCHITECTURE.md §5) carries ``schema_version``, ``workload``,
``scores``, ``findings[]`` and ``summary``; every other field is additive (``tables``,
``overhead``, ``inputs``, ``hardware``) and a reader keeps fields it does not know
(``extra``), so a newer writer never loses data through an older reader.

Tables are plain JSON rows (lists of dicts) so that every renderer reads them without
importing analysis code. The analyzer fills these names (others may add more):

``operations``
    one row per event name of kind ``duration``: ``name``, ``source``, ``unit``, ``count``
    (events), ``steps``, ``total``, ``mean``, ``std``, ``min``, ``max``, ``median``, ``cv``
    (std/mean over per-step totals), ``share`` (of the summed top-level time, 0..1).
``steps``
    one row per (step, rank): ``step``, ``rank``, ``step_time`` (``summary["step_time_name"]``
    in ``summary["time_unit"]``) and ``regions`` (summed duration of the other regions).
``memory``
    one row per (name, step, rank) of a memory gauge: ``name``, ``step``, ``rank``, ``value``, ``unit``.

``steps`` and ``memory`` keep at most ``MAX_SERIES_ROWS`` (analyzer) rows per series: a
longer series is cut into buckets of consecutive steps, each keeping its lowest and highest
step, so a spike stays visible and the report stays a few MB on a 1M-event run.
``summary["table_limits"]`` states it per table: ``max_rows_per_series``, ``series``,
``series_downsampled``, ``points`` (before) and ``rows`` (kept). The rules, ``ranks`` and
``operations`` always see every step.
``ranks``
    one row per rank: ``rank``, ``steps``, ``mean_step_time``, ``total_time``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.errors import InputError

#: Version of ``analysis_report.json``: the major number changes only when a field changes
#: meaning or disappears (a reader refuses a newer major); new fields bump the minor.
REPORT_SCHEMA_VERSION = "1.1"
REPORT_FILE_NAME = "analysis_report.json"

#: Severities, mildest first; a finding's ``severity`` is one of them.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")

FINDING_KEYS: tuple[str, ...] = ("id", "category", "severity", "title", "detail", "evidence", "suggestion")
_REPORT_KEYS = ("schema_version", "workload", "scores", "findings", "summary", "tables", "overhead",
                "inputs", "hardware")


@dataclass(frozen=True)
class Finding:
    """One conclusion of a rule, with the steps/ranks/names that prove it in ``evidence``.

    ``id`` is stable for the same cause (``bottleneck:<name>``) so that two reports can be
    compared; ``severity`` is one of :data:`SEVERITIES`; ``suggestion`` says what to try.
    """

    id: str
    category: str
    severity: str
    title: str
    detail: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    suggestion: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this finding."""
        return {"id": self.id, "category": self.category, "severity": self.severity, "title": self.title,
                "detail": self.detail, "evidence": dict(self.evidence), "suggestion": self.suggestion}

    @classmethod
    def from_dict(cls, data: Any, where: str = "<finding>", place: str | None = None) -> Finding:
        """Validate a mapping with the finding keys; InputError names ``where``/``place`` and the key."""
        if not isinstance(data, Mapping):
            raise InputError(where, place, f"expected a finding (a JSON object), got {type(data).__name__}")
        for key in ("id", "category", "severity", "title"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise InputError(where, place, f"finding key {key!r} must be a non-empty string, "
                                               f"got {data.get(key)!r}")
        if data["severity"] not in SEVERITIES:
            raise InputError(where, place, f"finding severity must be one of {list(SEVERITIES)}, "
                                           f"got {data['severity']!r}")
        for key in ("detail", "suggestion"):
            if not isinstance(data.get(key, ""), str):
                raise InputError(where, place, f"finding key {key!r} must be a string, got {data.get(key)!r}")
        evidence = data.get("evidence") or {}
        if not isinstance(evidence, Mapping):
            raise InputError(where, place, f"finding evidence must be an object, got {evidence!r}")
        return cls(id=data["id"], category=data["category"], severity=data["severity"], title=data["title"],
                   detail=data.get("detail", ""), evidence=dict(evidence), suggestion=data.get("suggestion", ""))


@dataclass(frozen=True)
class AnalysisReport:
    """What the analyzer concluded about one run: scores, findings, summary and tables.

    ``scores`` maps ``overall`` and each dimension to 0..100 (``my_utils.profiling.analysis.scores``
    documents the formula); ``overhead`` states the instrumentation's own cost as measured
    by the timer; ``inputs`` names what was read; ``extra`` keeps unknown fields of a
    report read from a newer writer.
    """

    schema_version: str
    workload: str
    scores: dict[str, float]
    findings: list[Finding]
    summary: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    overhead: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``analysis_report.json`` (unknown fields from ``extra`` included)."""
        out: dict[str, Any] = dict(self.extra)
        out.update(schema_version=self.schema_version, workload=self.workload, scores=dict(self.scores),
                   findings=[f.to_dict() for f in self.findings], summary=dict(self.summary),
                   tables={k: list(v) for k, v in self.tables.items()}, overhead=dict(self.overhead),
                   inputs=dict(self.inputs), hardware=dict(self.hardware))
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON text (NaN and infinities become null: other tools refuse them)."""
        return json.dumps(_finite(self.to_dict()), indent=indent, ensure_ascii=False, allow_nan=False,
                          default=str)

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_json` atomically to ``path`` (a file, or a folder to hold ``analysis_report.json``)."""
        target = Path(path)
        if target.is_dir():
            target = target / REPORT_FILE_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(target) as fh:
            fh.write(self.to_json() + "\n")
        return target

    def findings_by_category(self, category: str) -> list[Finding]:
        """The findings of one category, in report order."""
        return [f for f in self.findings if f.category == category]

    @classmethod
    def from_dict(cls, data: Any, where: str = "<report>") -> AnalysisReport:
        """Validate a decoded ``analysis_report.json``; InputError names ``where``, the key and the fix."""
        if not isinstance(data, Mapping):
            raise InputError(where, None, f"expected an analysis report (a JSON object), got {type(data).__name__}")
        version = data.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool):
            version = str(version)
        if not isinstance(version, str) or not version.split(".")[0].isdigit():
            raise InputError(where, "schema_version", f"expected a version string such as "
                                                      f"{REPORT_SCHEMA_VERSION!r}, got {version!r}")
        if int(version.split(".")[0]) > int(REPORT_SCHEMA_VERSION.split(".")[0]):
            raise InputError(where, "schema_version", f"report schema {version} is newer than this reader "
                                                      f"({REPORT_SCHEMA_VERSION}); upgrade myutils-profiling")
        workload = data.get("workload", "")
        if not isinstance(workload, str):
            raise InputError(where, "workload", f"expected a string, got {workload!r}")
        scores = data.get("scores") or {}
        if not isinstance(scores, Mapping) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values()):
            raise InputError(where, "scores", f"expected an object of numbers, got {scores!r}")
        findings = data.get("findings") or []
        if not isinstance(findings, list):
            raise InputError(where, "findings", f"expected a list, got {type(findings).__name__}")
        parsed = [Finding.from_dict(f, where, f"findings[{i}]") for i, f in enumerate(findings)]
        objects: dict[str, dict[str, Any]] = {}
        for key in ("summary", "overhead", "inputs", "hardware", "tables"):
            value = data.get(key) or {}
            if not isinstance(value, Mapping):
                raise InputError(where, key, f"expected an object, got {type(value).__name__}")
            objects[key] = dict(value)
        for name, rows in objects["tables"].items():
            if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
                raise InputError(where, f"tables.{name}", "expected a list of objects (table rows)")
        return cls(schema_version=version, workload=workload, scores={k: float(v) for k, v in scores.items()},
                   findings=parsed, summary=objects["summary"], tables=objects["tables"],
                   overhead=objects["overhead"], inputs=objects["inputs"], hardware=objects["hardware"],
                   extra={k: v for k, v in data.items() if k not in _REPORT_KEYS})

    @classmethod
    def from_json(cls, text: str, where: str = "<report>") -> AnalysisReport:
        """Parse JSON text (:meth:`to_json`'s output); InputError on bad JSON names the line."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {exc.lineno}", f"valid JSON ({exc.msg})") from None
        return cls.from_dict(data, where)

    @classmethod
    def load(cls, path: str | Path) -> AnalysisReport:
        """Read ``analysis_report.json`` (a file, or a folder holding one)."""
        source = Path(path)
        if source.is_dir():
            source = source / REPORT_FILE_NAME
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(source), None, f"a readable UTF-8 analysis report ({exc})") from None
        return cls.from_json(text, str(source))


def _finite(obj: Any) -> Any:
    """``obj`` with NaN/infinite floats replaced by None (strict JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
