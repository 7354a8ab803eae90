"""The built-in plugin of myutils-core, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it only describes components (``"module:Class"`` strings).
"""

from __future__ import annotations

from collections.abc import Sequence

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_event_sinks() -> Sequence[PluginDescription]:
    """Core's sink: the append-only ``metrics_events.jsonl`` file."""
    return [
        PluginDescription(
            name="jsonl",
            kind=PluginKind.EVENT_SINK,
            factory="my_utils.core.events:EventLogWriter",
            summary="Append metric events to metrics_events.jsonl, flushed per batch.",
            inputs=("metric events",),
        )
    ]
