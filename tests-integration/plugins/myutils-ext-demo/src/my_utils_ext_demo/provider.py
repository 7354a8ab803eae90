"""A file-reading metrics provider following my_utils.core.providers.FileMetricsProvider."""

from __future__ import annotations

import time
from pathlib import Path

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent


class KeyValueProvider:
    name = "demo_kv"

    def __init__(self, files: list[Path]) -> None:
        self._files = files
        self._done = False

    @classmethod
    def from_input(cls, path: Path) -> KeyValueProvider:
        files = sorted(path.glob("*.kv")) if path.is_dir() else [path]
        if not files or any(f.suffix != ".kv" for f in files):
            raise UnsupportedInputError(path, None, "expected a .kv file or a folder of them")
        return cls(files)

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        if self._done:
            return []
        events = []
        for f in self._files:
            for lineno, line in enumerate(f.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                key, sep, value = line.partition("=")
                try:
                    number = float(value)
                except ValueError:
                    number = None
                if not sep or number is None:
                    raise InputError(f, f"line {lineno}", "expected NAME=NUMBER")
                events.append(MetricEvent(name=key.strip(), value=number, source=self.name, step=step,
                                          attrs={"file": f.name}))
        self._done = True
        return events


class SlowProvider:
    name = "demo_slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @classmethod
    def from_input(cls, path: Path, seconds: float = 1.5) -> SlowProvider:
        return cls(seconds)

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        time.sleep(self.seconds)
        return [MetricEvent(name="waited_s", value=self.seconds, source=self.name, step=step)]
