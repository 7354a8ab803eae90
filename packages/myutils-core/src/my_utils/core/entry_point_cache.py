"""Entry points of the installed distributions, cached on disk and keyed on their metadata.

Every ``myutils`` start needs the ``my_utils.plugins`` entry points. ``importlib.metadata``
finds them by reading the metadata of every installed distribution (about 140 in a venv
with torch) and costs 40–90 ms per start, half of it importing ``importlib.metadata`` itself
(``email``, ``zipfile``, ``csv``). This module keeps the answer in a small JSON file and
reads it again only while the installed distributions are unchanged.

**The key** (:func:`metadata_fingerprint`): for every ``sys.path`` folder, the names and
modification times (ns) of its ``*.dist-info`` / ``*.egg-info`` entries and of their
``entry_points.txt``. Installing, upgrading, removing or re-installing a distribution
(editable ones included) creates, renames or rewrites one of these, so the answer is looked up
again; so does any other ``sys.path``, interpreter or cache format. A missing, unreadable or
foreign cache file is a miss, never an error: the entry points then come from
``importlib.metadata`` exactly as before, and the file is rewritten (atomically).

**Where**: ``$MYUTILS_CACHE_DIR``, else ``$XDG_CACHE_HOME/myutils``, else ``~/.cache/myutils``;
``MYUTILS_NO_CACHE=1`` reads and writes nothing. A folder that cannot be written costs only
the speed.

Kept light on purpose (``os``, ``json``, ``zlib``; named tuples, not dataclasses, whose import
pulls in ``inspect``): it runs on every start, before anything else.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = [
    "CACHE_DIR_ENV",
    "NO_CACHE_ENV",
    "CachedDistribution",
    "CachedEntryPoint",
    "EntryPointLike",
    "cache_dir",
    "cached_entry_points",
    "environment_key",
    "metadata_fingerprint",
    "read_json",
    "reuse_fingerprint",
    "write_json",
]

CACHE_DIR_ENV = "MYUTILS_CACHE_DIR"
NO_CACHE_ENV = "MYUTILS_NO_CACHE"
#: bumped whenever the file layout changes: an older file is then a miss
FORMAT = 1
_METADATA_SUFFIXES = (".dist-info", ".egg-info")


class _DistributionLike(Protocol):
    @property
    def name(self) -> str | None: ...

    @property
    def version(self) -> str | None: ...


class EntryPointLike(Protocol):
    """What the plugin registry reads of an entry point (``importlib.metadata.EntryPoint`` has it all)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def dist(self) -> _DistributionLike | None: ...

    def load(self) -> Any:
        """Import the module named by ``value`` and return it (or the attribute after ``:``)."""


class CachedDistribution(NamedTuple):
    """The name and version of the distribution that declares an entry point."""

    name: str | None
    version: str | None


class CachedEntryPoint(NamedTuple):
    """An entry point read from the cache: loads like ``importlib.metadata.EntryPoint``."""

    name: str
    value: str
    group: str
    dist: CachedDistribution | None = None

    def load(self) -> Any:
        """Import ``module`` of ``module:attr.sub [extras]`` and return it or the attribute (as importlib.metadata does)."""
        import importlib
        import re

        match = re.match(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$", self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: {self.value!r} is not of the form 'module' or "
                             "'module:attribute'")
        obj: Any = importlib.import_module(match.group("module"))
        for part in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, part)
        return obj


def cache_dir() -> str | None:
    """The folder of my_utils' caches, or None when ``MYUTILS_NO_CACHE`` is set (not ``0``)."""
    if os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0"):
        return None
    chosen = os.environ.get(CACHE_DIR_ENV, "").strip()
    if chosen:
        return chosen
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "myutils")
    return os.path.join(os.path.expanduser("~"), ".cache", "myutils")


def environment_key() -> str:
    """This interpreter and its ``sys.path``: the cache files of one environment are named after it."""
    return "\0".join([f"format {FORMAT}", sys.executable, *sys.path])


def _file_name(prefix: str) -> str:
    # one file per prefix and environment: a changed setting (in the key stored inside) overwrites it
    return f"{prefix}-{zlib.crc32(environment_key().encode('utf-8', 'surrogatepass')):08x}.json"


def metadata_fingerprint(paths: Iterable[str] | None = None) -> list[str]:
    """One line per distribution metadata folder on ``paths`` (default ``sys.path``): name and mtimes.

    About a millisecond for 140 distributions: one directory listing per path entry and two
    ``stat`` calls per distribution (its folder and its ``entry_points.txt``).
    """
    lines: list[str] = []
    for entry in sys.path if paths is None else paths:
        folder = entry or "."
        try:
            with os.scandir(folder) as listing:
                found = sorted((d.name, d.path) for d in listing if d.name.endswith(_METADATA_SUFFIXES))
        except NotADirectoryError:  # a zip file on sys.path: its own mtime stands for its contents
            lines.append(f"{entry}\0{_mtime(folder)}")
            continue
        except OSError:
            lines.append(f"{entry}\0-")
            continue
        lines.append(entry)
        for name, path in found:
            lines.append(f"\t{name}\0{_mtime(path)}\0{_mtime(os.path.join(path, 'entry_points.txt'))}")
    return lines


_reused: list[str] | None = None  # the fingerprint the running command took at its start


def reuse_fingerprint(prints: Sequence[str] | None) -> None:
    """Let this command's later lookups use ``prints`` (its start's fingerprint); None ends that.

    The CLI takes the fingerprint once to check its start record and the registry would take it
    again (a listing per ``sys.path`` folder and two ``stat`` calls per distribution, ~1–2 ms
    each time); the command that took it hands it on here and withdraws it when it ends, so a
    later command in the same process (a test, an embedding program) takes its own.
    """
    global _reused
    _reused = None if prints is None else list(prints)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def read_json(prefix: str, key: str) -> dict[str, Any] | None:
    """This environment's cache file ``prefix`` when it exists, parses and was written for ``key``; else None."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, _file_name(prefix)), "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return data


def write_json(prefix: str, key: str, data: dict[str, Any]) -> None:
    """Write this environment's cache file ``prefix`` for ``key``, atomically; a failure is silent (it is a cache)."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        from my_utils.core.atomic import atomic_write

        os.makedirs(folder, mode=0o700, exist_ok=True)
        with atomic_write(os.path.join(folder, _file_name(prefix)), "w") as fh:
            json.dump({**data, "key": key}, fh, separators=(",", ":"))
    except (OSError, ValueError, TypeError) as exc:
        import logging

        logging.getLogger("my_utils.plugins").debug("cache %s not written in %s: %s", prefix, folder, exc)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _from_metadata(group: str) -> list[CachedEntryPoint]:
    import importlib.metadata

    out = []
    for ep in importlib.metadata.entry_points(group=group):
        dist = ep.dist
        out.append(CachedEntryPoint(ep.name, ep.value, group,
                                    CachedDistribution(dist.name, dist.version) if dist is not None else None))
    return out


def cached_entry_points(group: str, fingerprint: Sequence[str] | None = None) -> list[CachedEntryPoint]:
    """The entry points of ``group``, in ``importlib.metadata``'s order, from the cache when it is current.

    ``fingerprint``: :func:`metadata_fingerprint` when the caller already computed it.
    """
    if cache_dir() is None:
        return _from_metadata(group)
    key = environment_key()
    if fingerprint is not None:
        prints = list(fingerprint)
    else:
        prints = list(_reused) if _reused is not None else metadata_fingerprint()
    data = read_json("entry-points", key)
    groups = data.get("groups") if data is not None and data.get("fingerprint") == prints else None
    rows = groups.get(group) if isinstance(groups, dict) else None
    if isinstance(rows, list):
        try:
            return [CachedEntryPoint(str(name), str(value), group,
                                     CachedDistribution(_text(dist[0]), _text(dist[1])) if dist else None)
                    for name, value, dist in rows]
        except (TypeError, ValueError, IndexError):
            pass  # a damaged file: read the metadata and write it again
    found = _from_metadata(group)
    kept = groups if isinstance(groups, dict) else {}
    kept[group] = [[ep.name, ep.value, [ep.dist.name, ep.dist.version] if ep.dist else None] for ep in found]
    write_json("entry-points", key, {"fingerprint": prints, "groups": kept})
    return found
