"""Exception types shared by every my_utils distribution.

Two families, handled differently by callers:
- ``InputError``: something read from outside (a file, a config) is not what was
  expected. The message names the file, the place and what was expected; the CLI
  prints it on one line and exits with code 2.
- ``UsageError``: the caller misused an API (a mismatched ``stop``, an unknown
  plugin name). Raised at once, with the object, the place and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_BREAKS = re.compile(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")


def one_line(text: str) -> str:
    """``text`` with every line break (and the spaces around it) folded into one space.

    Messages quote things read from outside (SQLite schema text, CSV cells, names in a
    trace) that can hold newlines; the CLI promise is one line per error.
    """
    return _BREAKS.sub(" ", text).strip() if _BREAKS.search(text) else text


def _rebuild(cls: type[MyUtilsError], args: tuple[Any, ...], state: dict[str, Any]) -> MyUtilsError:
    """Unpickle a ``MyUtilsError`` without calling its ``__init__`` (whose signature varies)."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def _picklable(value: Any) -> Any:
    """``value`` when pickle can carry it, else a ``RuntimeError`` with its type name and text."""
    import pickle

    try:
        pickle.dumps(value)
    except Exception:  # any failure of pickling: what crosses is the text
        if isinstance(value, BaseException):
            return RuntimeError(f"{type(value).__name__}: {value}")
        return repr(value)
    return value


class MyUtilsError(Exception):
    """Base class of every error my_utils raises on purpose; ``str()`` is always one line.

    Instances pickle with their attributes (``where``, ``place``, ...) whatever the
    subclass's ``__init__`` takes, so an error raised in a process-pool or Dask worker
    reaches the parent as itself, not as a ``BrokenProcessPool`` that names no file.
    """

    def __str__(self) -> str:
        return one_line(super().__str__())

    def __reduce__(self) -> tuple[Any, ...]:
        state = {key: _picklable(value) for key, value in self.__dict__.items()}
        return _rebuild, (type(self), self.args, state)


class InputError(MyUtilsError, ValueError):
    """Input from outside the program is malformed; the message is one line for humans.

    ``where`` is the file (or config source); ``place`` pins the spot (``"line 12"``,
    ``"key features.capture.backend"``); ``expected`` says what should have been there.
    """

    def __init__(self, where: str | Path, place: str | None, expected: str) -> None:
        self.where = one_line(str(where))
        self.place = one_line(place) if place else place
        self.expected = one_line(expected)
        location = f"{self.where}:{place}" if place else self.where
        super().__init__(f"{location}: {self.expected}")


class UnsupportedInputError(InputError):
    """A reader recognised that it cannot read this input at all (wrong kind of file)."""


class ConfigError(InputError):
    """A configuration value is invalid; ``place`` names the key."""


class UsageError(MyUtilsError, RuntimeError):
    """An API was called in a way that cannot work; the message names the fix."""


class PluginError(MyUtilsError):
    """A plugin could not be found, loaded or called."""


class ProviderError(PluginError):
    """A metrics provider failed while reading for a reason that is not its input (a bug, a library error).

    The message names the provider, the input and the cause; the CLI exits with code 1
    (bad input is an ``InputError`` and exits with 2).
    """

    def __init__(self, provider: str, where: str | Path, cause: BaseException) -> None:
        self.provider = provider
        self.where = str(where)
        self.cause = cause
        from my_utils.core.plugin_calls import describe_failure  # bounded, one line, the original type

        super().__init__(f"{self.where}: metrics provider {provider!r} failed: {describe_failure(cause)}")


class UnknownPluginError(PluginError, LookupError):
    """No plugin of the requested kind has that name; the message lists the installed ones."""

    def __init__(self, kind: str, name: str, installed: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.installed = installed
        listing = ", ".join(sorted(installed)) or "none"
        super().__init__(f"no {kind} named {name!r} is installed; installed: {listing}")


class Terminated(SystemExit):
    """SIGTERM ended the command (:func:`~my_utils.core.lifecycle.sigterm_exits`): exit status ``128 + signal``.

    A ``SystemExit``, so that ``finally`` blocks and context managers clean up as for Ctrl-C and
    the process ends with that status; the CLI's guards let it pass (it is no plugin's exit).
    """
