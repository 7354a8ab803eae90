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
    one row per (rank, source of step times): ``rank``, ``source`` (``mytimer``,
    ``torch_profiler`` ...: one source per row, never pooled), ``steps``, ``mean_step_time``,
    ``median_step_time``, ``total_time`` and ``primary`` (true on the rows of the source the
    headline quotes: the one with the most steps, MyTimer on a tie).

Facts, then findings (ARCHITECTURE.md §8; schema 1.2)
-----------------------------------------------------
An analysis produces tables and **facts**; rules turn facts into **findings**; the report
renders and never computes. All of these are additive fields of ``analysis_report.json``:

``facts``
    every :class:`Fact` the analysis established: a number with its ``unit``, what a share is
    of (``denominator`` in words and ``denominator_value``), what measured it (``source``),
    the ``ranks`` it covers and how they were combined (``aggregate``: ``"rank 1"``,
    ``"sum over ranks 0, 1"``, ``"device-level union of streams"``...), how many ``steps`` it
    rests on, and the table rows it was read from (``evidence``: :class:`EvidenceRow`). A
    quantity the inputs could not give is still a fact: ``value`` null and ``not_measured``
    the reason (:class:`NotMeasured`), shown as "not measured", never as 0 or 100.
``headline``
    the first screen, a fact set built by ``analysis.headline`` (see :class:`Headline`): the
    run and traces, GPU × world size, step time (median, p90, worst step, with its source), GPU
    busy / idle, communication share and overlap, a 2–3 line verdict with its evidence, and
    the ids of the top 3 findings.
``dimensions``
    one entry per score dimension: ``{"score": 0..100}`` when the run had data for it,
    ``{"score": null, "not_measured": reason}`` otherwise. ``scores`` keeps the numbers of the
    measured dimensions only (and ``overall`` only when at least one was measured).
findings
    besides the §5 keys, a finding carries ``facts`` (the ids it rests on: one fact feeds at
    most one finding), ``impact`` (:class:`Impact`: the time it could save per step, how that
    was estimated and how many steps it rests on; findings are listed by it, largest first)
    and ``advice`` (:class:`Advice`: each piece of advice with the evidence rows that
    triggered it, so a reader can check it). ``suggestion`` stays: the advice texts joined.
``summary["warnings"]``
    what the analysis had to assume (a trace without a rank, ...), one object per warning:
    ``code`` and ``message``.

Schema 1.2 also changed two tables (the minor version says "read the new fields"; no field
was renamed): ``kineto_idle`` holds per-stream rows only (its former all-ranks rows summed
idle over streams, which can exceed the span) and ``kineto_idle_device`` gives the
device-level idle (span minus the union of busy intervals) by cause; ``ranks`` holds one
row per (rank, source) instead of pooling the sources.
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
REPORT_SCHEMA_VERSION = "1.2"
REPORT_FILE_NAME = "analysis_report.json"

#: Severities, mildest first; a finding's ``severity`` is one of them.
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")

FINDING_KEYS: tuple[str, ...] = ("id", "category", "severity", "title", "detail", "evidence", "suggestion")
_REPORT_KEYS = ("schema_version", "workload", "scores", "findings", "summary", "tables", "overhead",
                "inputs", "hardware", "facts", "headline", "dimensions")
#: What a verdict can say about the run (``Headline.verdict["bound"]``): ``setup`` (one-off work fills the
#: capture: no steady state to judge), bound by the ``host``, ``communication``, ``memory`` (copies) or
#: ``compute``, ``cpu`` (a CPU-only run: no GPU in the inputs), or ``not measured``.
BOUNDS: tuple[str, ...] = ("setup", "host", "communication", "memory", "compute", "cpu", "not measured")


@dataclass(frozen=True)
class NotMeasured:
    """A quantity the inputs could not give, and why: a value of its own, never a default number.

    In JSON a fact says it with ``"value": null, "not_measured": reason``; a score dimension
    with ``"score": null, "not_measured": reason``. Renderers show "not measured" and the reason.
    """

    reason: str

    def __str__(self) -> str:
        return f"not measured ({self.reason})"


@dataclass(frozen=True)
class EvidenceRow:
    """One row that a fact or a piece of advice rests on: which table, which row, which numbers.

    ``table`` names a table of the report (``kineto_temporal``) or ``series`` for a per-step
    series of the events; ``key`` holds the columns that find the row (``{"rank": 1}``);
    ``values`` the numbers read from it, by column (``{"idle_us": 732352.0}``). A reader finds
    the row and checks the numbers.
    """

    table: str
    key: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this row reference."""
        return {"table": self.table, "key": dict(self.key), "values": dict(self.values)}

    @classmethod
    def from_dict(cls, data: Any) -> EvidenceRow:
        """Read :meth:`to_dict`'s output back (unknown shapes become an empty reference)."""
        data = data if isinstance(data, Mapping) else {}
        key, values = data.get("key"), data.get("values")
        return cls(str(data.get("table", "")), dict(key) if isinstance(key, Mapping) else {},
                   dict(values) if isinstance(values, Mapping) else {})


@dataclass(frozen=True)
class Fact:
    """A number the analysis established, with everything a reader needs to trust it.

    ``id`` is stable across runs (``gpu.idle:rank1``); ``label`` says what it is in words.
    ``value`` is the number (or a short text, e.g. a GPU model) in ``unit`` (``ms``, ``%``,
    ``count``...), or :class:`NotMeasured` when the inputs could not give it. A share names
    what it is of: ``denominator`` (words) and ``denominator_value`` (same unit as the
    numerator's absolute value, in ``denominator_unit``). ``source`` says what measured it
    (``mytimer``, ``torch_profiler``, ``kineto``); ``ranks`` the ranks covered and
    ``aggregate`` how they (and streams, devices) were combined; ``steps`` how many steps it
    rests on (None: not per step, e.g. a whole capture); ``evidence`` the rows it was read from.
    """

    id: str
    label: str
    value: float | int | str | NotMeasured
    unit: str = ""
    source: str = ""
    denominator: str = ""
    denominator_value: float | None = None
    denominator_unit: str = ""
    ranks: tuple[int | None, ...] = ()
    aggregate: str = ""
    steps: int | None = None
    evidence: tuple[EvidenceRow, ...] = ()
    detail: str = ""

    @property
    def measured(self) -> bool:
        """False when the value is :class:`NotMeasured`."""
        return not isinstance(self.value, NotMeasured)

    @property
    def number(self) -> float | None:
        """The value as a float, None when not measured or not a number."""
        v = self.value
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this fact (``value`` null and ``not_measured`` set when not measured)."""
        out: dict[str, Any] = {
            "id": self.id, "label": self.label,
            "value": None if isinstance(self.value, NotMeasured) else self.value, "unit": self.unit,
            "source": self.source, "denominator": self.denominator, "denominator_value": self.denominator_value,
            "denominator_unit": self.denominator_unit, "ranks": list(self.ranks), "aggregate": self.aggregate,
            "steps": self.steps, "evidence": [e.to_dict() for e in self.evidence], "detail": self.detail,
        }
        if isinstance(self.value, NotMeasured):
            out["not_measured"] = self.value.reason
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "<fact>", place: str | None = None) -> Fact:
        """Validate a fact object; InputError names ``where``/``place`` and the key."""
        if not isinstance(data, Mapping):
            raise InputError(where, place, f"expected a fact (a JSON object), got {type(data).__name__}")
        for key in ("id", "label"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise InputError(where, place, f"fact key {key!r} must be a non-empty string, got {data.get(key)!r}")
        value: float | int | str | NotMeasured
        if isinstance(data.get("not_measured"), str):
            value = NotMeasured(data["not_measured"])
        elif isinstance(data.get("value"), (int, float, str)) and not isinstance(data.get("value"), bool):
            value = data["value"]
        else:
            raise InputError(where, place, f"fact {data['id']!r} needs a number or text 'value', or "
                                           f"'not_measured' with the reason; got {data.get('value')!r}")
        ranks = data.get("ranks") or []
        steps = data.get("steps")
        denom = data.get("denominator_value")
        return cls(
            id=data["id"], label=data["label"], value=value, unit=str(data.get("unit", "")),
            source=str(data.get("source", "")), denominator=str(data.get("denominator", "")),
            denominator_value=float(denom) if isinstance(denom, (int, float)) and not isinstance(denom, bool) else None,
            denominator_unit=str(data.get("denominator_unit", "")),
            ranks=tuple(r if isinstance(r, int) else None for r in ranks) if isinstance(ranks, list) else (),
            aggregate=str(data.get("aggregate", "")), steps=steps if isinstance(steps, int) else None,
            evidence=tuple(EvidenceRow.from_dict(e) for e in data.get("evidence") or [] if isinstance(e, Mapping)),
            detail=str(data.get("detail", "")),
        )


def not_measured_fact(fact_id: str, label: str, reason: str, unit: str = "") -> Fact:
    """A fact whose value the inputs could not give (``NotMeasured(reason)``)."""
    return Fact(fact_id, label, NotMeasured(reason), unit)


@dataclass(frozen=True)
class Impact:
    """What fixing a finding could save, on one stated denominator, and how sure that is.

    ``ms_per_step``: the time per step that could be saved at most (None when it cannot be
    estimated); ``share_of_step``: the same over ``denominator`` (words: "median step", "GPU span
    of the capture (counted as one step)") of ``denominator_ms`` ms, measured by ``step_source``;
    ``basis`` says how it was estimated; ``steps`` how many steps the claim rests on; ``weight``
    (0..1, ``steps / (steps + 3)``) discounts thin evidence, and breaks ties only: findings are
    ranked by the saving itself (:attr:`rank_value`). ``upper_bound`` marks an estimate that
    assumes all of something's time could go. A *breakdown* (where the time is, not a saving: a
    region's share of the step) states no saving: ``region_ms`` / ``region_share`` of
    ``region_of`` carry what the region takes. ``clamped_from_ms`` keeps a saving before the
    diagnosis cut it to what its fix can remove (idle inside setup is not saved by launching faster).
    """

    ms_per_step: float | None = None
    share_of_step: float | None = None
    basis: str = ""
    steps: int | None = None
    weight: float = 1.0
    step_source: str = ""
    upper_bound: bool = False
    denominator: str = ""
    denominator_ms: float | None = None
    region_ms: float | None = None
    region_share: float | None = None
    region_of: str = ""
    clamped_from_ms: float | None = None

    @property
    def breakdown(self) -> bool:
        """True for a breakdown: a region's share of the step, stated as such and not as a saving."""
        return self.ms_per_step is None and self.share_of_step is None and (
            self.region_ms is not None or self.region_share is not None)

    @property
    def rank_value(self) -> float:
        """The saving the ranking orders by: the share of the step (else ms, scaled below any share); 0 without one."""
        if self.share_of_step is not None:
            return self.share_of_step
        if self.ms_per_step is not None:
            return self.ms_per_step * 1e-6  # below any share: no step to compare with
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this estimate."""
        return {"ms_per_step": self.ms_per_step, "share_of_step": self.share_of_step, "basis": self.basis,
                "steps": self.steps, "weight": round(self.weight, 4), "step_source": self.step_source,
                "upper_bound": self.upper_bound, "denominator": self.denominator,
                "denominator_ms": self.denominator_ms, "region_ms": self.region_ms,
                "region_share": self.region_share, "region_of": self.region_of,
                "clamped_from_ms": self.clamped_from_ms}

    @classmethod
    def from_dict(cls, data: Any) -> Impact:
        """Read :meth:`to_dict`'s output back (missing numbers stay None)."""
        data = data if isinstance(data, Mapping) else {}

        def num(key: str) -> float | None:
            v = data.get(key)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        steps = data.get("steps")
        weight = num("weight")
        return cls(num("ms_per_step"), num("share_of_step"), str(data.get("basis", "")),
                   steps if isinstance(steps, int) else None, 1.0 if weight is None else weight,
                   str(data.get("step_source", "")), data.get("upper_bound") is True,
                   str(data.get("denominator", "")), num("denominator_ms"), num("region_ms"), num("region_share"),
                   str(data.get("region_of", "")), num("clamped_from_ms"))


def evidence_weight(steps: int | None) -> float:
    """How much a claim resting on ``steps`` steps weighs (``steps / (steps + 3)``; 1 when not per step)."""
    if steps is None:
        return 1.0
    return steps / (steps + 3.0) if steps > 0 else 0.0


@dataclass(frozen=True)
class Advice:
    """One piece of advice and the evidence that triggered it (``because``: rows; ``facts``: fact ids)."""

    text: str
    because: tuple[EvidenceRow, ...] = ()
    facts: tuple[str, ...] = ()
    kind: str = ""  # the advice table's key (operator family, optimizer class, idle cause...)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this advice."""
        return {"text": self.text, "because": [b.to_dict() for b in self.because], "facts": list(self.facts),
                "kind": self.kind}

    @classmethod
    def from_dict(cls, data: Any) -> Advice:
        """Read :meth:`to_dict`'s output back."""
        data = data if isinstance(data, Mapping) else {}
        return cls(str(data.get("text", "")),
                   tuple(EvidenceRow.from_dict(b) for b in data.get("because") or [] if isinstance(b, Mapping)),
                   tuple(str(f) for f in data.get("facts") or []), str(data.get("kind", "")))


@dataclass(frozen=True)
class Verdict:
    """What the run is bound by (one of :data:`BOUNDS`), in 2–3 lines, with the facts behind it."""

    bound: str
    lines: tuple[str, ...]
    facts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this verdict."""
        return {"bound": self.bound, "lines": list(self.lines), "facts": list(self.facts)}


@dataclass(frozen=True)
class Headline:
    """The first screen of a report (ARCHITECTURE.md §8), every item a :class:`Fact`.

    ``title``: the run (its ids) or the trace files; ``context``: the facts that say what ran
    where (ids ``context.gpu``, ``context.gpu_count``, ``context.world_size``,
    ``context.ranks``, ``context.hosts``, ``context.cuda_runtime``, ``context.cuda_driver``,
    ``context.backend``); ``facts``: the figures in display order (ids ``step_time.median``,
    ``step_time.p90``, ``step_time.worst``, ``gpu.busy``, ``gpu.idle``, ``comm.share``,
    ``comm.overlap``), each measured or not; ``verdict``; ``top_findings``: the ids of the findings
    to fix first (up to three worth at least 1% of the step, largest saving first, more only on a
    tie). ``report.headline`` holds :meth:`to_dict`.
    """

    title: str
    context: tuple[Fact, ...]
    facts: tuple[Fact, ...]
    verdict: Verdict
    top_findings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``analysis_report.json``'s ``headline``."""
        return {"title": self.title, "context": [f.to_dict() for f in self.context],
                "facts": [f.to_dict() for f in self.facts], "verdict": self.verdict.to_dict(),
                "top_findings": list(self.top_findings)}


@dataclass(frozen=True)
class Finding:
    """One conclusion of a rule, with the steps/ranks/names that prove it in ``evidence``.

    ``id`` is stable for the same cause (``bottleneck:<name>``) so that two reports can be
    compared; ``severity`` is one of :data:`SEVERITIES`; ``suggestion`` says what to try.
    Schema 1.2 adds ``facts`` (ids of the facts it rests on), ``impact`` (:class:`Impact`) and
    ``advice`` (:class:`Advice`, each with the evidence that triggered it); a finding read from
    an older report has none (an empty tuple / an empty ``Impact``).
    """

    id: str
    category: str
    severity: str
    title: str
    detail: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    suggestion: str = ""
    facts: tuple[str, ...] = ()
    impact: Impact = field(default_factory=Impact)
    advice: tuple[Advice, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this finding."""
        return {"id": self.id, "category": self.category, "severity": self.severity, "title": self.title,
                "detail": self.detail, "evidence": dict(self.evidence), "suggestion": self.suggestion,
                "facts": list(self.facts), "impact": self.impact.to_dict(),
                "advice": [a.to_dict() for a in self.advice]}

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
        facts = data.get("facts") or []
        advice = data.get("advice") or []
        if not isinstance(facts, list) or not isinstance(advice, list):
            raise InputError(where, place, "finding 'facts' and 'advice' must be lists")
        impact = data.get("impact")
        return cls(id=data["id"], category=data["category"], severity=data["severity"], title=data["title"],
                   detail=data.get("detail", ""), evidence=dict(evidence), suggestion=data.get("suggestion", ""),
                   facts=tuple(str(f) for f in facts),
                   impact=impact if isinstance(impact, Impact) else Impact.from_dict(impact),
                   advice=tuple(a if isinstance(a, Advice) else Advice.from_dict(a) for a in advice))


@dataclass(frozen=True)
class AnalysisReport:
    """What the analyzer concluded about one run: scores, findings, summary and tables.

    ``scores`` maps ``overall`` and each measured dimension to 0..100
    (``my_utils.profiling.model.scores`` documents the formula); ``dimensions`` gives every
    dimension, measured or not (``{"score": null, "not_measured": reason}``); ``overhead``
    states what each instrument cost (or that it was not measured); ``inputs`` names what was
    read; ``facts`` and ``headline`` are the fact set of §8 (see the module docstring);
    ``extra`` keeps unknown fields of a report read from a newer writer.
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
    facts: list[Fact] = field(default_factory=list)
    headline: dict[str, Any] = field(default_factory=dict)
    dimensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``analysis_report.json`` (unknown fields from ``extra`` included)."""
        out: dict[str, Any] = dict(self.extra)
        out.update(schema_version=self.schema_version, workload=self.workload, scores=dict(self.scores),
                   findings=[f.to_dict() for f in self.findings], summary=dict(self.summary),
                   tables={k: list(v) for k, v in self.tables.items()}, overhead=dict(self.overhead),
                   inputs=dict(self.inputs), hardware=dict(self.hardware),
                   facts=[f.to_dict() for f in self.facts], headline=dict(self.headline),
                   dimensions={k: dict(v) for k, v in self.dimensions.items()})
        return out

    def fact(self, fact_id: str) -> Fact | None:
        """The fact called ``fact_id``, None when the report has none of that id."""
        return next((f for f in self.facts if f.id == fact_id), None)

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
        raw_facts = data.get("facts") or []
        if not isinstance(raw_facts, list):
            raise InputError(where, "facts", f"expected a list, got {type(raw_facts).__name__}")
        facts = [Fact.from_dict(f, where, f"facts[{i}]") for i, f in enumerate(raw_facts)]
        objects: dict[str, dict[str, Any]] = {}
        for key in ("summary", "overhead", "inputs", "hardware", "tables", "headline", "dimensions"):
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
                   facts=facts, headline=objects["headline"], dimensions=objects["dimensions"],
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
