"""Why a plugin component cannot be used: disabled, clashing by name, or broken.

Each error says which component, which plugin and distribution it came from, and the fix.
The CLI guard maps them to exit codes: a disabled or clashing name is the user's choice to
make (exit 2), a broken plugin is the plugin's fault (exit 1).
"""

from __future__ import annotations

from my_utils.core.errors import PluginError, UnknownPluginError


class PluginDisabledError(PluginError, LookupError):
    """The component exists but ``MYUTILS_DISABLE_PLUGINS`` switches it off."""

    def __init__(self, kind: str, name: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} is installed but {reason}; remove that entry to use it")


class PluginClashError(PluginError, LookupError):
    """Two third-party plugins offer a component of one kind under the same name."""

    def __init__(self, kind: str, name: str, owners: list[str], hint: str) -> None:
        self.kind = kind
        self.name = name
        self.owners = owners
        super().__init__(
            f"{kind} {name!r} is offered by {' and by '.join(owners)}; my_utils never picks one "
            f"by installation order: {hint}"
        )


class PluginLoadError(PluginError):
    """A plugin component is broken: its factory cannot be imported or its description is invalid."""


class UnknownComponentError(UnknownPluginError):
    """No component of that kind has the name; also says which plugins were not even looked at."""

    def __init__(self, kind: str, name: str, installed: list[str], disabled_plugins: list[str],
                 broken_plugins: list[str] | None = None) -> None:
        super().__init__(kind, name, installed)
        self.disabled_plugins = disabled_plugins
        self.broken_plugins = list(broken_plugins or [])
        message = self.args[0]
        if disabled_plugins:
            message += (f" (not searched: plugins {', '.join(sorted(disabled_plugins))} "
                        "are disabled by MYUTILS_DISABLE_PLUGINS)")
        if self.broken_plugins:
            message += (f" (not searched: {' and '.join(self.broken_plugins)} "
                        f"{'is' if len(self.broken_plugins) == 1 else 'are'} BROKEN; `myutils plugins list` says why)")
        self.args = (message,)
