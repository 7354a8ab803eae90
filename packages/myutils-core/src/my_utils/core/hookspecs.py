"""The hook contract between my_utils and its plugins (pluggy project ``my_utils``).

A plugin is a module (or object) named by an entry point in the group
``my_utils.plugins``; it implements any subset of the hooks below, decorated with
``my_utils.core.hookspecs.hookimpl``. Every distribution of my_utils registers its own
built-ins this way, exactly as a third party would. The author guide, with a tested
example per hook, is ``docs/plugins.md``.

Each hook is called once per plugin, one plugin at a time, by
``my_utils.core.plugins.PluginRegistry``; a plugin whose hook raises, returns anything but a
list of descriptions of the hook's kind, or implements a hook not defined here (a
misspelling) is reported as BROKEN and the others are still called. Implementations must
stay light: they return descriptions (``"module:Class"`` strings), never import heavy code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

from my_utils.core.plugin_types import PluginDescription

if TYPE_CHECKING:
    import typer

PROJECT_NAME = "my_utils"
ENTRY_POINT_GROUP = "my_utils.plugins"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -- components ------------------------------------------------------------------------


@hookspec
def myutils_metrics_providers() -> Sequence[PluginDescription]:
    """Return descriptions of the metrics providers this plugin offers.

    Each description has kind ``PluginKind.METRICS_PROVIDER``; its factory names a class
    following ``my_utils.core.providers.MetricsProvider`` (and ``FileMetricsProvider``
    when it reads files: ``from_input(path, **options)``, options as keyword arguments).
    Events carry ``source=<name>``; bad input raises ``InputError(file, place, expected)``.
    Called once per plugin at discovery; results are cached (docs/plugins.md, "Metrics providers").
    """
    raise NotImplementedError


@hookspec
def myutils_capture_backends() -> Sequence[PluginDescription]:
    """Return descriptions of the capture backends this plugin offers.

    Each description has kind ``PluginKind.CAPTURE_BACKEND``; its factory names a
    ``my_utils.tracing.capture.CaptureBackend`` subclass, selected by name from
    ``features.capture.backend``, whose ``features.capture.backend_options`` become the
    constructor's keyword arguments. Called once per plugin at discovery; results are
    cached (docs/plugins.md, "Capture backends").
    """
    raise NotImplementedError


@hookspec
def myutils_analysis_rules() -> Sequence[PluginDescription]:
    """Return descriptions of extra analyzer rules (a rule reads events, returns findings).

    Each description has kind ``PluginKind.ANALYSIS_RULE``; its factory builds an object
    with a ``name`` and ``evaluate(events)`` returning findings (mappings with ``id``,
    ``category``, ``severity``, ``title``, ``detail``, ``evidence``, ``suggestion``).
    Called once per plugin at discovery; results are cached (docs/plugins.md, "Analysis rules").
    """
    raise NotImplementedError


@hookspec
def myutils_event_sinks() -> Sequence[PluginDescription]:
    """Return descriptions of places metric events also go (file, stdout, a service).

    Each description has kind ``PluginKind.EVENT_SINK``; its factory builds an object with
    ``append(events) -> int`` (how many it wrote) and ``close()``. Called once per plugin at
    discovery; results are cached (docs/plugins.md, "Event sinks").
    """
    raise NotImplementedError


# -- command line ----------------------------------------------------------------------


@hookspec
def myutils_cli(app: typer.Typer) -> None:
    """Add this plugin's commands or command groups to the ``myutils`` CLI.

    :param app: the root typer application, before it parses arguments.

    Called once per plugin each time the CLI starts; keep it light (import command
    implementations inside the commands). The commands added run inside the CLI's error
    guard: ``InputError`` exits with 2, anything unexpected exits with 1 naming the plugin
    (docs/plugins.md, "Commands").
    """
