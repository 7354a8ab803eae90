"""Plugin discovery: one guarded loop over entry points, cached, each plugin failing alone.

pluggy's own ``load_setuptools_entrypoints`` and a plain ``pm.hook.x()`` call stop at the
first plugin that raises, so this module loads entry points one by one and calls hook
implementations one by one. A failing plugin becomes a BROKEN ``PluginRecord`` naming
the plugin, its distribution and the reason; everything else keeps working.

Set ``MYUTILS_DISABLE_PLUGINS=a,b`` to skip plugins (entry-point names) or single
components (description names) by name.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from my_utils.core import hookspecs
from my_utils.core.errors import UnknownPluginError
from my_utils.core.plugin_types import PluginDescription, PluginKind, PluginRecord, PluginStatus

if TYPE_CHECKING:
    import typer

_log = logging.getLogger("my_utils.plugins")

DISABLE_ENV = "MYUTILS_DISABLE_PLUGINS"

_KIND_HOOKS: dict[PluginKind, str] = {
    PluginKind.METRICS_PROVIDER: "myutils_metrics_providers",
    PluginKind.CAPTURE_BACKEND: "myutils_capture_backends",
    PluginKind.ANALYSIS_RULE: "myutils_analysis_rules",
    PluginKind.EVENT_SINK: "myutils_event_sinks",
}


def disabled_names(environ: dict[str, str] | None = None) -> frozenset[str]:
    """Names listed in ``MYUTILS_DISABLE_PLUGINS`` (comma separated, blanks ignored)."""
    raw = (os.environ if environ is None else environ).get(DISABLE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class PluginRegistry:
    """The plugins found for one process, their components and their failures."""

    def __init__(
        self,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
        disabled: Iterable[str] | None = None,
    ) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._disabled = frozenset(disabled) if disabled is not None else disabled_names()
        self._origin: dict[str, tuple[str | None, str | None]] = {}
        self._problems: list[PluginRecord] = []
        self._component_problems: list[PluginRecord] = []
        self._components: dict[PluginKind, dict[str, PluginRecord]] | None = None
        eps = (
            importlib.metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP)
            if entry_points is None
            else entry_points
        )
        for ep in eps:
            self._load_entry_point(ep)

    # -- loading ----------------------------------------------------------------------

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None
        if ep.name in self._disabled:
            self._problems.append(
                PluginRecord(ep.name, "plugin", ep.name, dist, version, PluginStatus.DISABLED,
                             f"disabled by {DISABLE_ENV}")
            )
            return
        if self._pm.has_plugin(ep.name):
            other = self._origin[ep.name][0]
            self._problems.append(
                PluginRecord(ep.name, "plugin", ep.name, dist, version, PluginStatus.BROKEN,
                             f"name {ep.name!r} is already used by the plugin from {other!r}")
            )
            return
        try:
            self.register(ep.load(), ep.name, dist, version)
        except (Exception, SystemExit) as exc:  # a plugin must never take the host down
            _log.warning("plugin %r from %r is broken: %s", ep.name, dist, _reason(exc))
            self._problems.append(
                PluginRecord(ep.name, "plugin", ep.name, dist, version, PluginStatus.BROKEN,
                             _reason(exc))
            )

    def register(
        self, plugin: object, name: str, distribution: str | None = None, version: str | None = None
    ) -> None:
        """Register an in-process plugin object (a module or instance with hookimpls)."""
        self._pm.register(plugin, name=name)
        self._origin[name] = (distribution, version)
        self._components = None

    def _call_each(self, hook_name: str, **kwargs: Any) -> Iterable[tuple[str, Any]]:
        """Call every implementation of one hook separately; yield (plugin, result or exc)."""
        hook = getattr(self._pm.hook, hook_name)
        for impl in hook.get_hookimpls():  # registration order (pluggy stores them so)
            try:
                yield impl.plugin_name, impl.function(*[kwargs[a] for a in impl.argnames])
            except (Exception, SystemExit) as exc:
                yield impl.plugin_name, exc

    def _broken(self, plugin: str, kind: str, reason: str, name: str | None = None) -> PluginRecord:
        dist, version = self._origin.get(plugin, (None, None))
        _log.warning("plugin %r from %r is broken: %s", plugin, dist, reason)
        return PluginRecord(name or plugin, kind, plugin, dist, version, PluginStatus.BROKEN, reason)

    def _collect(self) -> dict[PluginKind, dict[str, PluginRecord]]:
        if self._components is not None:
            return self._components
        components: dict[PluginKind, dict[str, PluginRecord]] = {k: {} for k in PluginKind}
        problems: list[PluginRecord] = []
        for kind, hook_name in _KIND_HOOKS.items():
            for plugin, result in self._call_each(hook_name):
                if isinstance(result, BaseException):
                    problems.append(self._broken(plugin, kind.value, _reason(result)))
                    continue
                for rec in self._records_from(plugin, kind, result):
                    if rec.status is PluginStatus.OK and rec.name in components[kind]:
                        first = components[kind][rec.name]
                        rec = self._broken(
                            plugin, kind.value,
                            f"duplicate {kind.value} name {rec.name!r}; "
                            f"kept the one from plugin {first.plugin!r}",
                            name=rec.name,
                        )
                    if rec.status is PluginStatus.OK:
                        components[kind][rec.name] = rec
                    else:
                        problems.append(rec)
        self._component_problems = problems
        self._components = components
        return components

    def _records_from(self, plugin: str, kind: PluginKind, result: Any) -> list[PluginRecord]:
        dist, version = self._origin.get(plugin, (None, None))
        if result is None:
            return []
        if isinstance(result, PluginDescription) or not isinstance(result, Sequence):
            return [self._broken(plugin, kind.value,
                                 f"hook {_KIND_HOOKS[kind]} must return a list of PluginDescription, "
                                 f"got {type(result).__name__}")]
        records = []
        for desc in result:
            if not isinstance(desc, PluginDescription) or desc.kind is not kind:
                records.append(self._broken(
                    plugin, kind.value,
                    f"hook {_KIND_HOOKS[kind]} returned {desc!r}; expected PluginDescription(kind={kind})",
                ))
            elif desc.name in self._disabled:
                records.append(PluginRecord(desc.name, kind.value, plugin, dist, version,
                                            PluginStatus.DISABLED, f"disabled by {DISABLE_ENV}", desc))
            else:
                records.append(PluginRecord(desc.name, kind.value, plugin, dist, version,
                                            PluginStatus.OK, "", desc))
        return records

    # -- queries ----------------------------------------------------------------------

    def records(self) -> list[PluginRecord]:
        """Every component (ok) and every failing or disabled plugin, sorted by kind and name."""
        components = self._collect()
        rows = [rec for by_name in components.values() for rec in by_name.values()]
        rows += self._problems + self._component_problems
        return sorted(rows, key=lambda r: (r.kind, r.name, r.plugin))

    def descriptions(self, kind: PluginKind) -> dict[str, PluginDescription]:
        """Working components of one kind, by name."""
        return {
            name: rec.description
            for name, rec in self._collect()[kind].items()
            if rec.description is not None
        }

    def get(self, kind: PluginKind, name: str) -> PluginDescription:
        """The component ``name`` of ``kind``; UnknownPluginError lists the installed ones."""
        found = self.descriptions(kind)
        if name not in found:
            raise UnknownPluginError(kind.value.replace("_", " "), name, list(found))
        return found[name]

    def find(self, name: str) -> list[PluginRecord]:
        """Every row (any kind, any status) whose name or plugin name is ``name``."""
        return [r for r in self.records() if name in (r.name, r.plugin)]

    def extend_cli(self, app: typer.Typer) -> list[PluginRecord]:
        """Let each plugin add its commands to ``app``; return the plugins that failed."""
        failures = []
        for plugin, result in self._call_each("myutils_cli", app=app):
            if isinstance(result, BaseException):
                failures.append(self._broken(plugin, "cli", _reason(result)))
        # the CLI app may be built more than once per process (tests): list each failure once
        self._problems.extend(f for f in failures if f not in self._problems)
        return failures


@functools.lru_cache(maxsize=1)
def get_registry() -> PluginRegistry:
    """The process-wide registry, built on first use (an explicit call, never at import)."""
    return PluginRegistry()


def reset_registry() -> None:
    """Forget the cached registry, e.g. after installing a plugin or changing the env."""
    get_registry.cache_clear()


def load_component(kind: PluginKind, name: str) -> Callable[..., Any]:
    """Import and return the factory of the component ``name`` of ``kind``."""
    factory: Callable[..., Any] = get_registry().get(kind, name).load()
    return factory
