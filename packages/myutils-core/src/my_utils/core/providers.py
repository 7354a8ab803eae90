"""The metrics-provider contract, and running one provider over a file or folder.

Concrete providers live in myutils-profiling (and in third-party plugins); they are
found through the ``myutils_metrics_providers`` hook. A provider reads either a live
object (a running MyTimer, a profiler) or files. File readers also implement
``from_input``, which the ``myutils plugins run`` command and the collector use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import MetricEvent, events_path, write_events
from my_utils.core.plugin_types import PluginKind


@runtime_checkable
class MetricsProvider(Protocol):
    """Something that turns a source of measurements into metric events.

    ``collect(step)`` returns the events that appeared since the previous call (a live
    provider must never lose or repeat events between calls); ``step`` tags events
    that carry no step of their own.
    """

    name: str

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """Return the events new since the last call."""
        ...


@runtime_checkable
class FileMetricsProvider(MetricsProvider, Protocol):
    """A provider that reads files written by a tool (CSV, traces, databases...)."""

    @classmethod
    def from_input(cls, path: Path, **options: Any) -> FileMetricsProvider:
        """Build a provider for ``path`` (a file or folder).

        Raises ``UnsupportedInputError`` when the input is not something this provider
        reads, and ``InputError`` (file, place, what was expected) when it is malformed.
        """
        ...


def run_provider_on_input(
    name: str, input_path: str | Path, output_dir: str | Path, options: Mapping[str, Any] | None = None
) -> tuple[Path, int]:
    """Run the metrics provider plugin ``name`` over ``input_path``.

    ``options`` are passed to the provider's ``from_input`` as keyword arguments. Writes
    ``<output_dir>/metrics_events.jsonl`` atomically (nothing is written when reading
    fails) and returns its path and the number of events.
    """
    from my_utils.core.plugins import load_component

    factory = load_component(PluginKind.METRICS_PROVIDER, name)
    source = Path(input_path)
    if not source.exists():
        raise InputError(source, None, "no such file or folder")
    from_input = getattr(factory, "from_input", None)
    if not callable(from_input):
        raise UsageError(
            f"metrics provider {name!r} reads live objects, not files; "
            "use it from Python with MetricsCollector.register_provider(...)"
        )
    try:
        provider = from_input(source, **dict(options or {}))
    except TypeError as exc:
        if options and "unexpected keyword argument" in str(exc):
            raise UsageError(f"metrics provider {name!r} does not take option {str(exc).rsplit(' ', 1)[-1]}; "
                             "see `myutils plugins show` for what it reads") from None
        raise
    events = list(provider.collect(None))
    out = events_path(output_dir)
    count = write_events(out, events)
    return out, count
