"""Facts as the analyzer reads them: a number with its unit, denominator, source, ranks and evidence rows.

:class:`NsysFact` serialises to exactly the JSON object of ``model.report.Fact.to_dict()``
(``id``, ``label``, ``value``, ``unit``, ``source``, ``denominator``, ``denominator_value``,
``denominator_unit``, ``ranks``, ``aggregate``, ``steps``, ``evidence`` rows of ``table``/
``key``/``values``, ``detail``; ``value`` null and ``not_measured`` the reason when the
export could not give it), so ``Fact.from_dict(f.to_dict())`` takes it over unchanged and
:meth:`NsysFact.to_fact` gives that ``Fact`` directly (the analyzer's report holds those).
The Nsight analyses build these; they never decide severity (rules do, from the facts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from my_utils.profiling.model.report import Fact


@dataclass(frozen=True)
class Evidence:
    """A row of a table (``nsys_busy_device``...) that a fact was read from: its key and the numbers used."""

    table: str
    key: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The evidence row as JSON."""
        return {"table": self.table, "key": dict(self.key), "values": dict(self.values)}


@dataclass(frozen=True)
class NsysFact:
    """One established number (``value``), or the reason it could not be (``not_measured``)."""

    id: str
    label: str
    value: float | int | str | None
    unit: str = ""
    source: str = "nsys"
    denominator: str = ""
    denominator_value: float | None = None
    denominator_unit: str = ""
    ranks: tuple[int | None, ...] = ()
    aggregate: str = ""
    steps: int | None = None
    evidence: tuple[Evidence, ...] = ()
    detail: str = ""
    not_measured: str | None = None

    @property
    def measured(self) -> bool:
        """False when the export could not give the value."""
        return self.not_measured is None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``model.report.Fact``."""
        out: dict[str, Any] = {
            "id": self.id, "label": self.label, "value": None if self.not_measured is not None else self.value,
            "unit": self.unit, "source": self.source, "denominator": self.denominator,
            "denominator_value": self.denominator_value, "denominator_unit": self.denominator_unit,
            "ranks": list(self.ranks), "aggregate": self.aggregate, "steps": self.steps,
            "evidence": [e.to_dict() for e in self.evidence], "detail": self.detail,
        }
        if self.not_measured is not None:
            out["not_measured"] = self.not_measured
        return out

    def to_fact(self) -> Fact:
        """The same fact as an ``model.report.Fact`` (``NotMeasured`` as its value when not measured)."""
        from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

        value = NotMeasured(self.not_measured) if self.not_measured is not None else self.value
        if value is None:  # a number the export left empty (a division by zero in SQL): said, never shown as 0
            value = NotMeasured("the export gives no value for it")
        return Fact(self.id, self.label, value, self.unit, self.source, self.denominator, self.denominator_value,
                    self.denominator_unit, tuple(self.ranks), self.aggregate, self.steps,
                    tuple(EvidenceRow(e.table, dict(e.key), dict(e.values)) for e in self.evidence), self.detail)


def not_measured(fact_id: str, label: str, reason: str, *, unit: str = "", source: str = "nsys",
                 ranks: tuple[int | None, ...] = ()) -> NsysFact:
    """A fact the inputs could not give, saying why (shown as "not measured", never as 0)."""
    return NsysFact(fact_id, label, None, unit, source, ranks=ranks, not_measured=reason)
