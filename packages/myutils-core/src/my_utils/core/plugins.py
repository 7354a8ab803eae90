"""Plugin discovery: one guarded loop over entry points, cached, each plugin failing alone.

pluggy's own ``load_setuptools_entrypoints`` and a plain ``pm.hook.x()`` call stop at the
first plugin that raises, and ``register`` silently accepts a misspelled hook, so this
module loads entry points one by one, refuses plugins with unknown hooks, and calls hook
implementations one by one. A failing plugin becomes a BROKEN ``PluginRecord`` naming
the plugin, its distribution and the reason (on one line); everything else keeps working.

Plugin code never takes the caller down (``my_utils.core.plugin_calls``): every import,
hook call and factory import runs contained (``sys.exit`` and other ``BaseException``s become
failures of that plugin, its stdout goes to stderr in the CLI), an entry point's import is
bounded in time, and what a hook returns is bounded in size (``my_utils.core.plugin_limits``).

Names are settled by ``my_utils.core.plugin_policy`` (built-ins are never displaced, a clash
between third parties is never decided by installation order), and
``MYUTILS_DISABLE_PLUGINS`` switches plugins or single components off (see that module).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pluggy

from my_utils.core import hookspecs
from my_utils.core.entry_point_cache import EntryPointLike, cached_entry_points
from my_utils.core.plugin_calls import (
    call_bounded,
    contained,
    describe_failure,
    import_timeout,
    plugin_output,
)
from my_utils.core.plugin_errors import (
    PluginClashError,
    PluginDisabledError,
    PluginLoadError,
    UnknownComponentError,
)
from my_utils.core.plugin_limits import description_problem, result_problem
from my_utils.core.plugin_policy import (
    DISABLE_ENV,
    DisableList,
    disabled_names,
    disabled_reason,
    is_builtin,
)
from my_utils.core.plugin_types import PluginDescription, PluginKind, PluginRecord, PluginStatus

if TYPE_CHECKING:
    import typer

__all__ = [
    "DISABLE_ENV",
    "PluginRegistry",
    "disabled_names",
    "get_registry",
    "kind_label",
    "load_component",
    "options_mismatch",
    "owner_label",
    "reset_registry",
]

#: the logger of the registry's warnings (imported when the first one is given: a clean start never imports logging)
LOGGER_NAME = "my_utils.plugins"
_quiet = False


def quiet_warnings() -> None:
    """Keep broken-plugin warnings off stderr from now on (the CLI: ``myutils plugins list`` shows them).

    The logger gets a ``NullHandler`` and stops propagating, now if ``logging`` is imported, else
    when the first warning is given.
    """
    global _quiet
    _quiet = True
    if "logging" in sys.modules:
        _logger()


def _logger() -> Any:
    import logging

    log = logging.getLogger(LOGGER_NAME)
    if _quiet and log.propagate:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return log


def _warn(message: str, *args: Any) -> None:
    _logger().warning(message, *args)

KIND_HOOKS: dict[PluginKind, str] = {
    PluginKind.METRICS_PROVIDER: "myutils_metrics_providers",
    PluginKind.CAPTURE_BACKEND: "myutils_capture_backends",
    PluginKind.ANALYSIS_RULE: "myutils_analysis_rules",
    PluginKind.EVENT_SINK: "myutils_event_sinks",
}

def _reason(exc: BaseException) -> str:
    """``Type: message`` on one line, keeping every line of the message (pluggy's are several), bounded."""
    return describe_failure(exc)


def kind_label(kind: PluginKind | str) -> str:
    """``metrics provider`` for ``PluginKind.METRICS_PROVIDER``: how messages name a kind."""
    return (kind.value if isinstance(kind, PluginKind) else kind).replace("_", " ")


def owner_label(record: PluginRecord) -> str:
    """``plugin 'ext_foo' (myutils-ext-foo 1.0)``: where a component comes from."""
    dist = " ".join(p for p in (record.distribution, record.version) if p) or "no distribution"
    return f"plugin {record.plugin!r} ({dist})"


class PluginRegistry:
    """The plugins found for one process, their components and their failures."""

    def __init__(
        self,
        entry_points: Iterable[EntryPointLike] | None = None,
        disabled: Iterable[str] | None = None,
    ) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._disable = DisableList.parse(disabled if disabled is not None else disabled_names())
        self._origin: dict[str, tuple[str | None, str | None]] = {}
        self._problems: list[PluginRecord] = []
        self._component_problems: list[PluginRecord] = []
        self._components: dict[PluginKind, dict[str, PluginRecord]] | None = None
        self._clashes: dict[PluginKind, dict[str, list[PluginRecord]]] = {}
        # the installed entry points come from a cache keyed on the distributions' metadata
        # (entry_point_cache): importlib.metadata alone cost 40-90 ms per CLI start
        eps = cached_entry_points(hookspecs.ENTRY_POINT_GROUP) if entry_points is None else entry_points
        for ep in eps:
            self._load_entry_point(ep)

    # -- loading ----------------------------------------------------------------------

    def _load_entry_point(self, ep: EntryPointLike) -> None:
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None

        def row(status: PluginStatus, reason: str) -> PluginRecord:
            return PluginRecord(ep.name, "plugin", ep.name, dist, version, status, reason)

        entry = self._disable.plugin_entry(ep.name)
        if entry is not None:
            self._problems.append(row(PluginStatus.DISABLED, disabled_reason(entry)))
            return
        if self._pm.has_plugin(ep.name):
            other = self._origin[ep.name][0]
            self._problems.append(row(PluginStatus.BROKEN, f"entry-point name {ep.name!r} is already used "
                                                           f"by the plugin from {other!r}; rename one"))
            return
        try:
            with plugin_output():
                # the import runs in a thread with a time bound: a plugin that hangs at import
                # must not hang every command
                plugin = call_bounded(ep.load, import_timeout(), f"import of {ep.value!r}")
                with contained():  # pluggy reads the plugin's attributes: plugin code again
                    self.register(plugin, ep.name, dist, version)
        except Exception as exc:  # a plugin must never take the host down (BaseExceptions arrive contained)
            _warn("plugin %r from %r is broken: %s", ep.name, dist, _reason(exc))
            self._problems.append(row(PluginStatus.BROKEN, _reason(exc)))

    def register(
        self, plugin: object, name: str, distribution: str | None = None, version: str | None = None
    ) -> None:
        """Register an in-process plugin object (a module or instance with hookimpls).

        Raises ``pluggy.PluginValidationError`` when a hook has arguments its specification
        lacks, or when the plugin implements a hook that does not exist (a misspelling).
        """
        self._pm.register(plugin, name=name)
        unknown = sorted(
            caller.name for caller in self._pm.get_hookcallers(plugin) or []
            if not caller.has_spec()
            and any(not impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin)
        )
        if unknown:
            self._pm.unregister(plugin)
            hooks = "; ".join(self._unknown_hook_hint(hook) for hook in unknown)
            raise pluggy.PluginValidationError(
                plugin, f"{hooks}; nothing from plugin {name!r} was registered (hooks: my_utils.core.hookspecs)"
            )
        self._origin[name] = (distribution, version)
        self._components = None

    @staticmethod
    def _unknown_hook_hint(hook: str) -> str:
        import difflib

        known = [n for n in vars(hookspecs) if n.startswith("myutils_")]
        close = difflib.get_close_matches(hook, known, n=1)
        return f"unknown hook {hook!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

    def _call_each(self, hook_name: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """Call every implementation of one hook separately; yield (plugin, result or exc)."""
        hook = getattr(self._pm.hook, hook_name)
        for impl in hook.get_hookimpls():  # registration order (pluggy stores them so)
            try:
                with plugin_output(), contained():
                    result = impl.function(*[kwargs[a] for a in impl.argnames])
            except Exception as exc:
                result = exc
            yield impl.plugin_name, result

    def _row(self, plugin: str, kind: str, status: PluginStatus, reason: str = "", name: str | None = None,
             description: PluginDescription | None = None) -> PluginRecord:
        dist, version = self._origin.get(plugin, (None, None))
        if status is PluginStatus.BROKEN:
            _warn("plugin %r from %r is broken: %s", plugin, dist, reason)
        return PluginRecord(name or plugin, kind, plugin, dist, version, status, reason, description)

    # -- components -------------------------------------------------------------------

    def _collect(self) -> dict[PluginKind, dict[str, PluginRecord]]:
        if self._components is not None:
            return self._components
        offers: dict[PluginKind, dict[str, list[PluginRecord]]] = {k: {} for k in PluginKind}
        problems: list[PluginRecord] = []
        for kind, hook_name in KIND_HOOKS.items():
            for plugin, result in self._call_each(hook_name):
                if isinstance(result, BaseException):
                    problems.append(self._row(plugin, kind.value, PluginStatus.BROKEN, _reason(result)))
                    continue
                for rec in self._records_from(plugin, kind, result):
                    if rec.status is PluginStatus.OK:
                        offers[kind].setdefault(rec.name, []).append(rec)
                    else:
                        problems.append(rec)
        components: dict[PluginKind, dict[str, PluginRecord]] = {k: {} for k in PluginKind}
        self._clashes = {k: {} for k in PluginKind}
        for kind, by_name in offers.items():
            for name, recs in by_name.items():
                winner, losers = self._settle(kind, name, recs)
                if winner is not None:
                    components[kind][name] = winner
                problems.extend(losers)
        self._component_problems = problems
        self._components = components
        return components

    def _settle(self, kind: PluginKind, name: str, recs: list[PluginRecord]
                ) -> tuple[PluginRecord | None, list[PluginRecord]]:
        """Apply the name policy of ``plugin_policy`` to every offer of one (kind, name)."""
        if len(recs) == 1:
            return recs[0], []
        label = kind_label(kind)
        builtins = [r for r in recs if is_builtin(r.distribution)]
        if len(builtins) == 1:
            keep = builtins[0]
            return keep, [
                self._row(r.plugin, kind.value, PluginStatus.BROKEN,
                          f"name clash: {name!r} is the built-in {label} of {keep.distribution}, which is kept; "
                          f"rename this one (or set {DISABLE_ENV}={r.plugin}:{name} to hide this row)",
                          name, r.description)
                for r in recs if r is not keep
            ]
        self._clashes[kind][name] = recs
        rows = []
        for r in recs:
            others = ", ".join(owner_label(o) for o in recs if o is not r)
            rows.append(self._row(
                r.plugin, kind.value, PluginStatus.BROKEN,
                f"name clash: {label} {name!r} is also offered by {others}; neither is used until one is "
                f"disabled, e.g. {DISABLE_ENV}={r.plugin}:{name}", name, r.description))
        return None, rows

    def _records_from(self, plugin: str, kind: PluginKind, result: Any) -> list[PluginRecord]:
        hook = KIND_HOOKS[kind]
        if result is None:
            return []
        problem = result_problem(result, hook)
        if problem is not None:
            return [self._row(plugin, kind.value, PluginStatus.BROKEN, problem)]
        records = []
        try:
            with plugin_output(), contained():  # a Sequence's __getitem__ is plugin code too
                items = list(result)
        except Exception as exc:
            return [self._row(plugin, kind.value, PluginStatus.BROKEN, f"hook {hook}: its result cannot be read: "
                              f"{_reason(exc)}")]
        for desc in items:
            problem = description_problem(kind, desc)
            if problem is not None:
                name = (desc.name if isinstance(desc, PluginDescription) and isinstance(desc.name, str)
                        and len(desc.name) <= 100 else None)
                records.append(self._row(plugin, kind.value, PluginStatus.BROKEN, f"hook {hook}: {problem}", name))
                continue
            dist = self._origin.get(plugin, (None, None))[0]
            entry = self._disable.component_entry(desc.name, plugin, dist)
            if entry is not None:
                records.append(self._row(plugin, kind.value, PluginStatus.DISABLED, disabled_reason(entry),
                                         desc.name, desc))
            else:
                records.append(self._row(plugin, kind.value, PluginStatus.OK, "", desc.name, desc))
        return records

    # -- queries ----------------------------------------------------------------------

    def records(self) -> list[PluginRecord]:
        """Every component (ok) and every failing or disabled plugin, sorted by kind and name."""
        components = self._collect()
        rows = [rec for by_name in components.values() for rec in by_name.values()]
        rows += self._problems + self._component_problems
        return sorted(rows, key=lambda r: (r.kind, r.name, r.plugin))

    def plugin_problems(self) -> list[PluginRecord]:
        """The plugins that did not load or could not add their commands (BROKEN) or are disabled.

        Without calling any component hook: what a CLI start knows once the app is built.
        """
        return list(self._problems)

    def descriptions(self, kind: PluginKind) -> dict[str, PluginDescription]:
        """Working components of one kind, by name."""
        return {
            name: rec.description
            for name, rec in self._collect()[kind].items()
            if rec.description is not None
        }

    def record(self, kind: PluginKind, name: str) -> PluginRecord:
        """The row of the working component ``name`` of ``kind``.

        Raises ``PluginDisabledError``, ``PluginClashError`` or ``PluginLoadError`` (a broken
        component) saying so, else ``UnknownComponentError`` listing the installed ones.
        """
        found = self._collect()[kind]
        if name in found:
            return found[name]
        label = kind_label(kind)
        if name in self._clashes[kind]:
            recs = self._clashes[kind][name]
            raise PluginClashError(label, name, [owner_label(r) for r in recs],
                                   f"disable all but one, e.g. {DISABLE_ENV}={recs[-1].plugin}:{name}")
        for rec in self._component_problems:
            if rec.kind == kind.value and rec.name == name:
                if rec.status is PluginStatus.DISABLED:
                    raise PluginDisabledError(label, name, rec.reason)
                raise PluginLoadError(f"{label} {name!r} from {owner_label(rec)} is broken: {rec.reason}")
        off = [r.plugin for r in self._problems if r.status is PluginStatus.DISABLED]
        # a plugin that broke before saying what it offers (import or hook failure) may be the one
        broken = [owner_label(r) for r in self._problems + self._component_problems
                  if r.status is PluginStatus.BROKEN and r.name == r.plugin and r.kind in ("plugin", kind.value)]
        raise UnknownComponentError(label, name, list(found), off, list(dict.fromkeys(broken)))

    def get(self, kind: PluginKind, name: str) -> PluginDescription:
        """The description of component ``name`` of ``kind`` (errors as ``record``)."""
        description = self.record(kind, name).description
        if description is None:  # OK rows always carry one; kept for the type checker
            raise PluginLoadError(f"{kind_label(kind)} {name!r} has no description")
        return description

    def find(self, name: str) -> list[PluginRecord]:
        """Every row (any kind, any status) whose name or plugin name is ``name``."""
        return [r for r in self.records() if name in (r.name, r.plugin)]

    def check(self) -> list[PluginRecord]:
        """``records()`` with every ok component's factory imported: failures become BROKEN rows."""
        rows = []
        for rec in self.records():
            if rec.status is PluginStatus.OK and rec.description is not None:
                try:
                    _load_factory(rec.description)
                except Exception as exc:
                    rec = self._row(rec.plugin, rec.kind, PluginStatus.BROKEN,
                                    f"factory {rec.description.factory!r} cannot be imported: {_reason(exc)}",
                                    rec.name, rec.description)
            rows.append(rec)
        return rows

    # -- command line -----------------------------------------------------------------

    def extend_cli(
        self, app: typer.Typer, guard: Callable[[typer.Typer, int, int, PluginRecord], str | None] | None = None
    ) -> list[PluginRecord]:
        """Let each plugin add its commands to ``app``; return the plugins that failed.

        ``guard(app, n_commands, n_groups, owner)`` is called after each plugin with the
        counts of commands and groups ``app`` had before it, so the caller can check and wrap
        what that plugin added (the CLI wraps them in its error guard, naming the plugin);
        it returns why the plugin's commands were dropped, or None.
        """
        failures = []
        for impl in self._pm.hook.myutils_cli.get_hookimpls():
            before = (len(app.registered_commands), len(app.registered_groups))
            try:
                with plugin_output(), contained():
                    impl.function(*[{"app": app}[a] for a in impl.argnames])
            except Exception as exc:
                failures.append(self._row(impl.plugin_name, "cli", PluginStatus.BROKEN, _reason(exc)))
            problem = guard(app, *before, self._row(impl.plugin_name, "cli", PluginStatus.OK)) if guard else None
            if problem is not None:
                failures.append(self._row(impl.plugin_name, "cli", PluginStatus.BROKEN, problem))
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


def _load_factory(description: PluginDescription) -> Callable[..., Any]:
    """Import a component's factory like an entry point: contained, output to stderr, bounded in time."""
    with plugin_output():
        factory: Callable[..., Any] = call_bounded(description.load, import_timeout(),
                                                   f"import of factory {description.factory!r}")
    return factory


def load_component(kind: PluginKind, name: str) -> Callable[..., Any]:
    """Import and return the factory of the component ``name`` of ``kind``.

    A factory that cannot be imported (or whose import does not finish within
    ``MYUTILS_PLUGIN_IMPORT_TIMEOUT``) raises ``PluginLoadError`` naming the component, its
    plugin and distribution, and the import error.
    """
    rec = get_registry().record(kind, name)
    if rec.description is None:
        raise PluginLoadError(f"{kind_label(kind)} {name!r} has no description")
    try:
        factory = _load_factory(rec.description)
    except Exception as exc:
        raise PluginLoadError(
            f"{kind_label(kind)} {name!r} from {owner_label(rec)} cannot be imported: {_reason(exc)} "
            "(`myutils plugins check` tests every plugin)"
        ) from exc
    return factory


def options_mismatch(factory: Callable[..., Any], *args: Any, **options: Any) -> str | None:
    """Why ``factory(*args, **options)`` would be refused by its signature, or None.

    Call this before the factory instead of catching ``TypeError`` after it: a TypeError
    raised *inside* a constructor or ``from_input`` is the plugin's bug, not rejected options.
    """
    import inspect

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return None
    try:
        signature.bind(*args, **options)
    except TypeError as exc:
        accepted = [p.name for p in signature.parameters.values()
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return f"{exc}; it accepts {', '.join(accepted) or 'no options'}"
    return None
