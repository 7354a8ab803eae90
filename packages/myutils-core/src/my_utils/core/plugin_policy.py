"""Who wins a name, and what ``MYUTILS_DISABLE_PLUGINS`` switches off.

Names are per kind (a capture backend and a metrics provider may both be called
``torch_profiler``). When two plugins offer one kind under one name:

- a built-in (a component of one of the seven my_utils distributions) is kept and the
  third-party one is listed BROKEN, so nothing is displaced silently;
- between third parties nobody wins: site-packages order is an accident of installation,
  so both are listed BROKEN and using the name fails, naming both distributions and the
  ``MYUTILS_DISABLE_PLUGINS`` entry that settles it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DISABLE_ENV = "MYUTILS_DISABLE_PLUGINS"

#: the distributions of this project; their components are the built-ins
BUILTIN_DISTRIBUTIONS = frozenset({
    "myutils-core", "myutils-tracing", "myutils-hooks", "myutils-distributed", "myutils-memory",
    "myutils-profiling", "myutils-legacy",
})


def is_builtin(distribution: str | None) -> bool:
    """True for a component shipped by one of the seven my_utils distributions."""
    return distribution is not None and distribution.lower().replace("_", "-") in BUILTIN_DISTRIBUTIONS


def disabled_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Entries of ``MYUTILS_DISABLE_PLUGINS`` (comma separated, blanks ignored)."""
    raw = (os.environ if environ is None else environ).get(DISABLE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class DisableList:
    """The parsed ``MYUTILS_DISABLE_PLUGINS`` entries.

    ``NAME`` disables the plugin (entry point) ``NAME``, which is then never imported, and
    every component called ``NAME`` of any kind. ``OWNER:NAME`` disables only the component
    ``NAME`` of one plugin, ``OWNER`` being its entry-point or distribution name.
    """

    entries: frozenset[str]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> DisableList:
        """Keep the non-blank entries, stripped."""
        return cls(frozenset(e.strip() for e in entries if e.strip()))

    def plugin_entry(self, plugin: str) -> str | None:
        """The entry that disables the whole plugin ``plugin``, if any."""
        return plugin if plugin in self.entries else None

    def component_entry(self, name: str, plugin: str, distribution: str | None) -> str | None:
        """The entry that disables component ``name`` of ``plugin``, if any."""
        candidates = [name, f"{plugin}:{name}"]
        if distribution:
            candidates.append(f"{distribution}:{name}")
        return next((c for c in candidates if c in self.entries), None)


def disabled_reason(entry: str) -> str:
    """The reason shown for something switched off by ``entry``."""
    return f"disabled by {DISABLE_ENV} (entry {entry!r})"
