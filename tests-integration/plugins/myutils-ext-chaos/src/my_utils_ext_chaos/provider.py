"""The chaos provider and rule (imported only when used)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils_ext_chaos import _NOTHING, act

act("factory_import")


class ChaosProvider:
    """Reads any file into one event ``chaos_bytes`` (its size)."""

    name = "chaos_kv"

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def from_input(cls, path: Path) -> Any:
        instead = act("from_input")
        return cls(path) if instead is _NOTHING else instead.arg

    def collect(self, step: int | None = None) -> Any:
        instead = act("collect")
        if instead is not _NOTHING:
            return instead.arg
        return [MetricEvent(name="chaos_bytes", value=float(self.path.stat().st_size), source=self.name, step=0)]


class ChaosRule:
    """An analysis rule that finds nothing."""

    name = "chaos_rule"

    def evaluate(self, events: Any) -> Any:
        instead = act("rule")
        return [] if instead is _NOTHING else instead.arg
