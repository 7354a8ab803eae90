"""What a clean ``myutils`` start found, so that ``--help`` and ``plugins list`` need not import typer.

Drawing the root help means importing typer and every plugin's command modules and building
the app (~150 ms of a ~250 ms start). After a start in which every plugin loaded and added
its commands without a failure, this record keeps:

- the root help text as it was printed, per terminal width;
- the files whose code drew it: every module loaded then that is not in the standard
  library, each with its modification time (ns) and size.

While the record is *current* — same interpreter, ``sys.path``, ``MYUTILS_*`` settings (the
plugins' own included: ``MYUTILS_DISABLE_PLUGINS``, a plugin's ``MYUTILS_<NAME>_...``), installed
distributions (``entry_point_cache.metadata_fingerprint``) and every recorded file unchanged (an
edited module of an editable install counts) —

- ``myutils --help`` prints the recorded text and imports nothing else;
- ``myutils plugins list [--json]`` loads the plugins and calls their hooks as always (the rows
  are never cached) but skips building the typer app: the record proves that building it adds
  no failure row.

A start with a broken plugin (an import that failed or timed out, commands that could not be
added) writes no record, so each start looks again. ``MYUTILS_NO_CACHE=1`` turns this off
with the entry-point cache. Checking a record costs about 2 ms (a stat per recorded file).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from my_utils.core.entry_point_cache import CACHE_DIR_ENV, environment_key, read_json, write_json

__all__ = ["MAX_WIDTHS", "SETTINGS_PREFIX", "StartRecord", "loaded_files", "terminal_width"]

_PREFIX = "cli-start"
#: the settings a record depends on: every environment variable of my_utils and its plugins
SETTINGS_PREFIX = "MYUTILS_"
#: help texts kept per record (one per terminal width seen); the oldest goes first
MAX_WIDTHS = 8


def _key() -> str:
    settings = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(SETTINGS_PREFIX) and k != CACHE_DIR_ENV)
    return "\0".join([environment_key(), "cli", *settings])


def terminal_width() -> int:
    """The columns click draws the help for: ``shutil.get_terminal_size().columns``, read as that function does.

    (Without importing ``shutil``: ``$COLUMNS`` when positive, else the terminal of stdout, else 80.)
    """
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


def loaded_files() -> list[list[Any]]:
    """``[path, mtime_ns, size]`` of every loaded module outside the standard library, sorted."""
    stdlib = sys.stdlib_module_names
    paths = set()
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] in stdlib:
            continue
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            paths.add(path)
    out = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
        except OSError:
            continue  # a module whose file is gone: a later start cannot check it either
        out.append([path, st.st_mtime_ns, st.st_size])
    return out


def _files_unchanged(files: object) -> bool:
    if not isinstance(files, list) or not files:
        return False
    try:
        for path, mtime, size in files:
            st = os.stat(path)
            if st.st_mtime_ns != mtime or st.st_size != size:
                return False
    except (OSError, TypeError, ValueError):
        return False
    return True


class StartRecord:
    """The record of this environment's last clean start (see the module docstring)."""

    def __init__(self, fingerprint: Sequence[str], data: dict[str, Any] | None) -> None:
        self.fingerprint = list(fingerprint)
        self._data = data

    @classmethod
    def load(cls, fingerprint: Sequence[str]) -> StartRecord:
        """The record as stored; :attr:`current` says whether it still describes this environment."""
        data = read_json(_PREFIX, _key())
        current = (data is not None and data.get("fingerprint") == list(fingerprint)
                   and _files_unchanged(data.get("files")))
        return cls(fingerprint, data if current else None)

    @property
    def current(self) -> bool:
        """True when the last clean start saw exactly this environment."""
        return self._data is not None

    def help_text(self, width: int) -> str | None:
        """The root help drawn for ``width`` columns, when a clean start drew it."""
        if self._data is None:
            return None
        texts = self._data.get("help")
        text = texts.get(str(width)) if isinstance(texts, dict) else None
        return text if isinstance(text, str) else None

    def save(self, help_text: str | None = None, width: int | None = None) -> None:
        """Record a clean start now (with the help it drew for ``width``), keeping what is still current."""
        texts: dict[str, str] = {}
        if self._data is not None and isinstance(self._data.get("help"), dict):
            texts = {k: v for k, v in self._data["help"].items() if isinstance(v, str)}
        if help_text is not None and width is not None:
            texts.pop(str(width), None)
            texts[str(width)] = help_text
            while len(texts) > MAX_WIDTHS:
                texts.pop(next(iter(texts)))
        data = {"fingerprint": self.fingerprint, "files": loaded_files(), "help": texts}
        write_json(_PREFIX, _key(), data)
        self._data = data
