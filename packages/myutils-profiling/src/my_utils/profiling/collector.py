"""MetricsCollector: pulls events from registered providers and appends them to the run's log.

``collect(step)`` asks every provider for the events new since its last call, stamps
them (source, run id, rank, step when missing) and appends them to
``<output_dir>/metrics_events.jsonl`` in one write, flushed, so a killed run loses at most
the batch being written and a reader never sees half a batch from a failed call.

A provider that fails for an environment reason (a missing GPU, a full disk, a library
error) is reported once through logging and skipped, never raising into the training
loop; bad input (``InputError``) and misuse (``UsageError``) raise at once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import EventLogWriter, MetricEvent, events_path

_log = logging.getLogger("my_utils.profiling.collector")


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmdd-HHMMSS-<6 hex>``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


@dataclasses.dataclass(frozen=True)
class ProviderFailure:
    """A provider that could not be built or read, kept for reporting (``ignore_provider_errors``)."""

    provider: str
    place: str
    reason: str


class MetricsCollector:
    """Collects metric events from providers into ``<output_dir>/metrics_events.jsonl``."""

    def __init__(self, output_dir: str | Path = "./metrics_out", *, run_id: str | None = None,
                 rank: int | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.run_id = run_id or new_run_id()
        self.rank = rank if rank is not None else env_rank(None)
        self.providers: list[Any] = []
        self.failures: list[ProviderFailure] = []
        self._writer: EventLogWriter | None = None
        self._reported: set[int] = set()

    # -- set-up --------------------------------------------------------------------------

    @property
    def events_path(self) -> Path:
        """Where this collector appends its events."""
        return events_path(self.output_dir)

    def register_provider(self, provider: Any) -> Any:
        """Add a provider (anything with ``collect(step)``); returns it for chaining."""
        if not callable(getattr(provider, "collect", None)):
            raise UsageError(
                f"MetricsCollector.register_provider(): {type(provider).__name__} has no collect(step) method; "
                "pass a metrics provider such as MyTimerMetricsProvider(timer)"
            )
        if any(p is provider for p in self.providers):
            raise UsageError(
                f"MetricsCollector.register_provider(): this {type(provider).__name__} is already registered; "
                "registering it twice would return its events twice"
            )
        self.providers.append(provider)
        return provider

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | str | Path, ignore_provider_errors: bool = False,
                    **overrides: Any) -> MetricsCollector:
        """Build a collector and its file providers from a config (dict, or a JSON/YAML file).

        See ``my_utils.profiling.config`` for the format. Errors name the key
        (``providers[1].provider``); with ``ignore_provider_errors`` a provider that cannot
        be built is logged, recorded in ``failures`` and skipped.
        """
        from my_utils.profiling.config import build_collector

        return build_collector(cls, cfg, ignore_provider_errors=ignore_provider_errors, **overrides)

    # -- collection ----------------------------------------------------------------------

    def gather(self, step: int | None = None) -> list[MetricEvent]:
        """Ask every provider for its new events and stamp them; nothing is written."""
        out: list[MetricEvent] = []
        for provider in self.providers:
            try:
                events = provider.collect(step)
            except (InputError, UsageError):
                raise
            except Exception as exc:  # environment trouble inside a provider: report once, keep going
                if id(provider) not in self._reported:
                    self._reported.add(id(provider))
                    _log.warning("metrics provider %s failed and was skipped: %s: %s",
                                 getattr(provider, "name", type(provider).__name__), type(exc).__name__, exc)
                continue
            source = str(getattr(provider, "name", "") or type(provider).__name__)
            out.extend(self._stamp(e, source, step) for e in events)
        return out

    def _stamp(self, event: MetricEvent, source: str, step: int | None) -> MetricEvent:
        changes: dict[str, Any] = {}
        if not event.source:
            changes["source"] = source
        if not event.run_id:
            changes["run_id"] = self.run_id
        if event.rank is None and self.rank is not None:
            changes["rank"] = self.rank
        if event.step is None and step is not None:
            changes["step"] = step
        return dataclasses.replace(event, **changes) if changes else event

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        """Gather the new events of every provider and append them to the log in one write."""
        events = self.gather(step)
        if events:
            if self._writer is None:
                self._writer = EventLogWriter(self.events_path)
            try:
                self._writer.append(events)  # opens, writes once and closes: no handle outlives it
            except OSError as exc:  # a full disk must not stop training; the events stay returned
                if -1 not in self._reported:
                    self._reported.add(-1)
                    _log.warning("cannot append metric events to %s: %s", self.events_path, exc)
        return events

    def analyze(self, **kwargs: Any) -> Any:
        """Analyse the collected events (the analyzer ships in a later myutils-profiling release)."""
        raise UsageError(
            "MetricsCollector.analyze(): the analyzer is not available in this myutils-profiling version; "
            f"the events are in {self.events_path} for `myutils-profile analyze` once it ships"
        )

    def export_report(self, fmt: str = "html", report: Any = None, **kwargs: Any) -> Any:
        """Render a report (HTML/Markdown/JSON; ships with the analyzer in a later release)."""
        raise UsageError(
            "MetricsCollector.export_report(): reports are not available in this myutils-profiling version"
        )

    def close(self) -> None:
        """Close the events file (collecting again reopens it)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for provider in self.providers:
            closer = getattr(provider, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> MetricsCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names: Sequence[str] = [str(getattr(p, "name", type(p).__name__)) for p in self.providers]
        return f"MetricsCollector(output_dir={str(self.output_dir)!r}, providers={list(names)})"
