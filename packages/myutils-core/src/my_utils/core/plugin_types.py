"""Typed values exchanged between the plugin registry, its hooks and the CLI."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class PluginKind(str, Enum):
    """The roles a plugin description can play; each has one hook that returns them."""

    METRICS_PROVIDER = "metrics_provider"
    CAPTURE_BACKEND = "capture_backend"
    ANALYSIS_RULE = "analysis_rule"
    EVENT_SINK = "event_sink"


@dataclass(frozen=True)
class OptionSpec:
    """One option a component accepts (``--option NAME=VALUE``, a config's ``options``).

    ``type`` is ``str``, ``int``, ``float``, ``bool`` or ``list`` (a list of strings; a
    single string is taken as a one-element list, never split into characters).
    ``default`` is what the component uses when the option is absent; ``None`` there
    also makes ``None`` (JSON ``null``) an accepted value. ``choices``, when given, are
    the only accepted values.
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] = ()


@dataclass(frozen=True)
class PluginDescription:
    """What a plugin offers, described without importing the code behind it.

    ``factory`` is a ``"module:attribute"`` string, imported only by ``load()``.
    ``inputs`` names what the component reads (glob patterns for file readers, or a
    phrase such as ``"live MyTimer"``); ``extras`` names the pip extras it needs.
    ``options`` declares the keyword options the component accepts; an empty tuple means
    "not declared" (the component then checks its options itself).
    """

    name: str
    kind: PluginKind
    factory: str
    summary: str
    inputs: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    options: tuple[OptionSpec, ...] = ()

    def load(self) -> Any:
        """Import and return the object named by ``factory``."""
        module_name, sep, attr = self.factory.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(
                f"plugin {self.name!r}: factory {self.factory!r} is not of the form 'module:attribute'"
            )
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


class PluginStatus(str, Enum):
    """Health of one plugin entry as shown by ``myutils plugins list``."""

    OK = "ok"
    BROKEN = "BROKEN"
    DISABLED = "disabled"


@dataclass(frozen=True)
class PluginRecord:
    """One row of ``myutils plugins list``: a description, or a plugin that failed.

    ``plugin`` is the entry-point name the row came from; ``reason`` explains a
    BROKEN or disabled status.
    """

    name: str
    kind: str
    plugin: str
    distribution: str | None
    version: str | None
    status: PluginStatus
    reason: str = ""
    description: PluginDescription | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``myutils plugins list --json``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status.value,
            "reason": self.reason,
            "plugin": self.plugin,
        }
