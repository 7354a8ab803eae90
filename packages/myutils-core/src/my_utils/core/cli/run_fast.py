"""``myutils plugins run`` parsed and run without typer, for the command lines whose meaning is certain.

Importing typer (~40 ms of CPU) and building its app is most of what ``myutils plugins run``
costs before it reads a byte, and a provider run is often one of many in a loop. When the
record of a clean start is current (``cli.start_cache``; checked by ``cli.entry``), a line this
module parses is run here: the same body (``cli.plugins_run.run_metrics_provider``), the same
guard, messages, exit codes and final line as under typer. Nothing here imports typer or click.

**Accepted**: ``[--traceback ...] plugins run`` followed, in any order, by

- the provider ``NAME`` (one word not starting with ``-``, or ``-`` itself);
- ``--input X`` / ``--input=X`` and ``--output-dir X`` / ``--output-dir=X`` (both required; the
  last one given wins, as click stores them);
- ``--option K=V``, ``--option=K=V``, ``-o K=V``, ``-oK=V``, ``-o=K=V`` (the value ``=K=V``, as
  click reads it), repeatable, in order (click's append);
- ``-q`` / ``--quiet``, repeatable; and short flags combined as click combines them
  (``-qq``, ``-qo K=V``, ``-qoK=V``: after ``-o`` the rest of the word is its value).

A value is the next word whatever it looks like (``--input -x`` reads the file ``-x``, as
click does). Paths become ``Path(text)``; one that exists but cannot be read is declined (typer
rejects it as a usage error).

**Declined** (``cli.entry`` then runs typer, which answers as always, usage errors included):
``--help`` anywhere, even as a value; ``--``; an unknown option or one typer would reject
(``--quiet=x``, ``-x``, ``--inp``: click has no abbreviations); an option without its value;
a missing ``NAME``, ``--input`` or ``--output-dir``; a second ``NAME``; root options other than
``--traceback``; a word with a NUL or an unpaired surrogate (bytes that are not UTF-8); shell
completion (``_MYUTILS_COMPLETE``); Windows; standard streams that click would re-wrap (ASCII
encoding, not a plain text file).

The parse is proven equal to click's own on the real command in
``tests/test_cli_run_fast.py``, on hand-picked lines and on generated token orders.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

__all__ = ["COMPLETE_VAR", "RunArgs", "can_write_as_click", "echo", "fast_run_args", "parse_run_argv", "run"]

#: the variable that turns a typer start into shell completion (typer's ``_{PROG}_COMPLETE``)
COMPLETE_VAR = "_MYUTILS_COMPLETE"

#: options of ``plugins run``: the spelling → (field, takes a value)
_LONG = {"--input": ("input_path", True), "--output-dir": ("output_dir", True), "--option": ("option", True),
         "--quiet": ("quiet", False)}
_SHORT = {"-o": ("option", True), "-q": ("quiet", False)}
_ROOT_FLAGS = frozenset({"--traceback"})
_ANSI_START = "\033["


class RunArgs(NamedTuple):
    """The parameters of one ``myutils plugins run`` line, as typer hands them to the command."""

    name: str
    input_path: Path
    output_dir: Path
    option: list[str]
    quiet: bool
    traceback: bool


class _Declined(Exception):
    """This parser is not certain of the line: typer reads it."""


def _plain_word(word: str) -> bool:
    if "\0" in word:
        return False  # cannot come from exec; a path check would raise
    if word.isascii():
        return True
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of argv, kept as surrogates
        return False
    return True


def _path(text: str) -> Path:
    """``Path(text)`` as typer coerces a plain ``Path`` option (no checks asked but ``readable``)."""
    path = Path(text)
    try:
        os.stat(path)
    except OSError:
        return path  # need not exist
    if not os.access(path, os.R_OK):
        raise _Declined  # typer: "Path '...' is not readable."
    return path


def _parse_run(words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Options and positional words of ``plugins run``, as click's parser takes them from ``words``."""
    values: dict[str, Any] = {}
    positional: list[str] = []
    rest = list(words)

    def take(field: str, value: str | None) -> None:
        if field == "option":
            values.setdefault("option", []).append(value)
        elif field == "quiet":
            values["quiet"] = True
        else:
            values[field] = value

    while rest:
        word = rest.pop(0)
        if word == "--":
            raise _Declined  # the rest positional: left to click
        if not (word[:1] == "-" and len(word) > 1):
            positional.append(word)
            continue
        spelling, eq, explicit = word.partition("=")
        if spelling in _LONG:
            field, takes_value = _LONG[spelling]
            if takes_value:
                if eq:
                    rest.insert(0, explicit)
                if not rest:
                    raise _Declined  # "Option '--input' requires an argument."
                take(field, rest.pop(0))
            elif eq:
                raise _Declined  # "Option '--quiet' does not take a value."
            else:
                take(field, None)
            continue
        if word[:2] == "--":
            raise _Declined  # no such option (click never abbreviates)
        for i, ch in enumerate(word[1:], start=2):  # combined short options, as click reads them
            if f"-{ch}" not in _SHORT:
                raise _Declined
            field, takes_value = _SHORT[f"-{ch}"]
            if not takes_value:
                take(field, None)
                continue
            if i < len(word):
                take(field, word[i:])  # the rest of the word is the value
                break
            if not rest:
                raise _Declined
            take(field, rest.pop(0))
    return values, positional


def parse_run_argv(argv: Sequence[str]) -> RunArgs | None:
    """The parameters of ``argv`` (``sys.argv[1:]``) when it is a ``plugins run`` line this parser is certain of.

    ``None`` for anything else (see the module docstring): typer then parses it.
    """
    words = list(argv)
    if "--help" in words or not all(_plain_word(w) for w in words):
        return None
    root = 0
    while root < len(words) and words[root] in _ROOT_FLAGS:
        root += 1
    if words[root:root + 2] != ["plugins", "run"]:
        return None
    try:
        values, positional = _parse_run(words[root + 2:])
        if len(positional) != 1 or "input_path" not in values or "output_dir" not in values:
            raise _Declined  # missing NAME or option, or an extra argument
        # typer processes the parameters in the order given; only the outcome matters here
        return RunArgs(positional[0], _path(values["input_path"]), _path(values["output_dir"]),
                       list(values.get("option", [])), bool(values.get("quiet", False)), root > 0)
    except _Declined:
        return None


def can_write_as_click(stream: object) -> bool:
    """True when click's ``echo`` would write to ``stream`` itself (it re-wraps an ASCII or odd stream)."""
    import codecs
    import io

    if type(stream) is not io.TextIOWrapper:
        return False
    try:
        return codecs.lookup(stream.encoding).name != "ascii" and stream.errors is not None
    except LookupError:
        return False


def fast_run_args(argv: Sequence[str]) -> RunArgs | None:
    """:func:`parse_run_argv`, and ``None`` too where typer's start would differ in more than the parse."""
    if sys.platform == "win32" or os.environ.get(COMPLETE_VAR):
        return None  # Windows consoles and argv expansion; shell completion
    if not (can_write_as_click(sys.stdout) and can_write_as_click(sys.stderr)):
        return None
    return parse_run_argv(argv)


def _write(stream: IO[str], text: str) -> None:
    """What click's ``echo`` writes on a stream it uses as it is: ANSI styles dropped when not a terminal."""
    if _ANSI_START in text:
        try:
            keep = stream.isatty()
        except Exception:
            keep = False
        if not keep:
            import re

            text = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", text)
    stream.write(text)
    stream.flush()


def echo(message: str) -> None:
    """``typer.echo(message)`` for a stdout :func:`can_write_as_click` accepts."""
    _write(sys.stdout, message + "\n")


def _echo_error(message: str) -> None:
    _write(sys.stderr, message + "\n")


class _Aborted(Exception):
    """typer's ``Abort`` of its own ``main`` (end of input): "Aborted!" and exit 1."""


class _PacifiedFlush:
    """A standard stream whose ``flush`` ignores a closed pipe (click's ``PacifyFlushWrapper``)."""

    def __init__(self, wrapped: IO[str]) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.wrapped, attr)


def _typer_class(module: str, name: str) -> type[BaseException] | None:
    """A typer exception class when plugin code imported typer (then it can have been raised), else None."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _main(args: RunArgs) -> None:
    """Run the command as typer's ``main`` runs it: its endings of exits, usage errors, EOF, Ctrl-C, a closed pipe."""
    from my_utils.core.cli.plugins_run import run_metrics_provider

    try:
        try:
            run_metrics_provider(args.name, args.input_path, args.output_dir, args.option, args.quiet, echo)
        except EOFError as exc:
            _write(sys.stderr, "\n")
            raise _Aborted from exc
        except KeyboardInterrupt:
            raise SystemExit(130) from None
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            sys.stdout = _PacifiedFlush(sys.stdout)
            sys.stderr = _PacifiedFlush(sys.stderr)
            raise SystemExit(1) from None
        except Exception as exc:
            usage = _typer_class("typer._click.exceptions", "ClickException")
            if usage is None or not isinstance(exc, usage):
                raise
            exc.show()  # type: ignore[attr-defined]
            raise SystemExit(exc.exit_code) from None  # type: ignore[attr-defined]
    except _Aborted:
        _write(sys.stderr, "Aborted!\n")
        raise SystemExit(1) from None
    except Exception as exc:
        typer_exit = _typer_class("typer.exceptions", "Exit")
        typer_abort = _typer_class("typer.exceptions", "Abort")
        if typer_exit is not None and isinstance(exc, typer_exit):
            raise SystemExit(exc.exit_code) from None  # type: ignore[attr-defined]
        if typer_abort is not None and isinstance(exc, typer_abort):
            _write(sys.stderr, "Aborted!\n")
            raise SystemExit(1) from None
        raise


def run(args: RunArgs) -> None:
    """Run ``myutils plugins run`` with ``args`` as ``cli.app.run`` would, then end as it ends.

    Returns after a success; a failure raises ``SystemExit`` with its code. When a plugin import
    was abandoned (it did not finish within its bound) the process ends at once, as under typer.
    """
    from my_utils.core.cli.guard import run_without_typer, set_traceback
    from my_utils.core.plugin_calls import abandoned, send_plugin_output_to_stderr

    send_plugin_output_to_stderr(True)
    set_traceback(args.traceback)  # what the root command does with --traceback
    run_without_typer(_echo_error)
    code: object = 0
    try:
        _main(args)
    except SystemExit as exc:
        if not abandoned():
            raise
        code = exc.code
    finally:
        run_without_typer(None)
    if abandoned():
        from my_utils.core.cli.app import exit_abandoned  # imports typer: only when ending without a thread

        exit_abandoned(code)
