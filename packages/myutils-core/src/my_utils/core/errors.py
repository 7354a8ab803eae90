"""Exception types shared by every my_utils distribution.

Two families, handled differently by callers:
- ``InputError``: something read from outside (a file, a config) is not what was
  expected. The message names the file, the place and what was expected; the CLI
  prints it on one line and exits with code 2.
- ``UsageError``: the caller misused an API (a mismatched ``stop``, an unknown
  plugin name). Raised at once, with the object, the place and the fix.
"""

from __future__ import annotations

from pathlib import Path


class MyUtilsError(Exception):
    """Base class of every error my_utils raises on purpose."""


class InputError(MyUtilsError, ValueError):
    """Input from outside the program is malformed; the message is one line for humans.

    ``where`` is the file (or config source); ``place`` pins the spot (``"line 12"``,
    ``"key features.capture.backend"``); ``expected`` says what should have been there.
    """

    def __init__(self, where: str | Path, place: str | None, expected: str) -> None:
        self.where = str(where)
        self.place = place
        self.expected = expected
        location = f"{self.where}:{place}" if place else self.where
        super().__init__(f"{location}: {expected}")


class UnsupportedInputError(InputError):
    """A reader recognised that it cannot read this input at all (wrong kind of file)."""


class ConfigError(InputError):
    """A configuration value is invalid; ``place`` names the key."""


class UsageError(MyUtilsError, RuntimeError):
    """An API was called in a way that cannot work; the message names the fix."""


class PluginError(MyUtilsError):
    """A plugin could not be found, loaded or called."""


class UnknownPluginError(PluginError, LookupError):
    """No plugin of the requested kind has that name; the message lists the installed ones."""

    def __init__(self, kind: str, name: str, installed: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.installed = installed
        listing = ", ".join(sorted(installed)) or "none"
        super().__init__(f"no {kind} named {name!r} is installed; installed: {listing}")
