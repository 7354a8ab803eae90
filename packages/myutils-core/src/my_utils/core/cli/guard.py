"""Turn failures into one line on stderr and an exit code, never a traceback.

Exit 2: the input or the request is wrong (``InputError``, ``UsageError``, an unknown,
disabled or clashing plugin name, an ``OSError`` on a named file). Exit 1: a plugin broke
(it cannot be imported, or raised something unexpected); the line names the plugin and its
distribution. ``myutils --traceback ...`` or ``MYUTILS_TRACEBACK=1`` also prints the stack.

Plugin code may also end a command with ``sys.exit`` or another ``BaseException`` (a provider,
a rule, a sink called deep inside a command): that is a plugin failure too, exit 1, and the line
names the plugin whose code raised it (found in the stack). Only ``KeyboardInterrupt`` passes
(a real Ctrl-C stops the command), and a plugin's *own* command may end itself with ``sys.exit``.
While a command runs, what plugin code prints goes to stderr (``plugin_calls.plugin_output``).

Under typer a failure ends in ``typer.Exit``. A runner that parses without typer
(``cli.run_fast``) calls :func:`run_without_typer` first: the same line is then written by the
writer it gives, and the command ends in :class:`CommandExit`; nothing here imports typer then.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from my_utils.core.errors import MyUtilsError, ProviderError, Terminated, one_line
from my_utils.core.plugin_calls import PluginAbort, describe_failure, send_plugin_output_to_stderr
from my_utils.core.plugin_errors import PluginLoadError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_PLUGIN_FAILED = 1
TRACEBACK_ENV = "MYUTILS_TRACEBACK"
_GUARDED = "__myutils_guarded__"


_state: dict[str, Any] = {"traceback": False, "echo_error": None}


class CommandExit(SystemExit):
    """Ends a command that typer does not run, with the exit code of the failure just reported.

    A ``SystemExit`` so that it ends the process with its code even when nothing catches it; the
    guards let it pass as they let ``typer.Exit`` pass (it is not plugin code exiting).
    """

    @property
    def exit_code(self) -> int:
        """The process's exit status (as ``typer.Exit.exit_code``)."""
        return int(self.code or 0)


def run_without_typer(echo_error: Callable[[str], None] | None) -> None:
    """Report failures with ``echo_error`` (one line, newline added) and end them in :class:`CommandExit`.

    Called by a runner that does not use typer (``cli.run_fast``); ``None`` restores typer's
    ``echo`` and ``typer.Exit``.
    """
    _state["echo_error"] = echo_error


def _passing() -> tuple[type[BaseException], ...]:
    """Deliberate exits (SIGTERM's :class:`Terminated` among them) and usage errors, which the guards re-raise.

    typer's own classes only when typer is imported: no instance of a class never imported can
    have been raised, and importing typer here would cost a typer-free run what it avoids.
    """
    exceptions = sys.modules.get("typer.exceptions")
    if exceptions is None:
        return (CommandExit, Terminated)
    return (CommandExit, Terminated, exceptions.Exit, exceptions.Abort, exceptions.TyperException)


def set_traceback(show: bool) -> None:
    """Called by the root command for every invocation with the value of ``--traceback``."""
    _state["traceback"] = show


def want_traceback() -> bool:
    """True when ``--traceback`` was given to ``myutils`` or ``MYUTILS_TRACEBACK`` is set (not 0)."""
    return _state["traceback"] or os.environ.get(TRACEBACK_ENV, "").strip() not in ("", "0")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


def plugin_in_traceback(exc: BaseException) -> str | None:
    """``plugin 'ext_x' (myutils-ext-x 1.0)`` for the innermost frame of ``exc`` in a third-party plugin's code.

    A frame belongs to a plugin when its module's top-level package is installed by a
    distribution (not one of my_utils' own) that declares ``my_utils.plugins`` entry points.
    """
    import importlib.metadata

    from my_utils.core.hookspecs import ENTRY_POINT_GROUP
    from my_utils.core.plugin_policy import is_builtin

    modules = []
    tb = exc.__traceback__
    while tb is not None:
        modules.append(str(tb.tb_frame.f_globals.get("__name__") or ""))
        tb = tb.tb_next
    try:
        owners = importlib.metadata.packages_distributions()
    except Exception:  # broken metadata somewhere: no attribution, the message still says what happened
        return None
    for module in reversed(modules):
        for dist_name in owners.get(module.partition(".")[0], []):
            if is_builtin(dist_name):
                continue
            try:
                dist = importlib.metadata.distribution(dist_name)
            except importlib.metadata.PackageNotFoundError:
                continue
            plugins = sorted(ep.name for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)
            if plugins:
                names = ", ".join(repr(p) for p in plugins)
                return f"plugin {names} ({dist.metadata['Name'] or dist_name} {dist.version})"
    return None


def _fail(code: int, message: str) -> None:
    if want_traceback():
        import traceback  # here: only a failure asked to show its stack needs it

        traceback.print_exc(file=sys.stderr)
    echo_error = _state["echo_error"]
    if echo_error is not None:
        echo_error(f"error: {message}")
        raise CommandExit(code)
    import typer

    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def _plugin_output_to_stderr() -> Iterator[None]:
    previous = send_plugin_output_to_stderr(True)
    try:
        yield
    finally:
        send_plugin_output_to_stderr(previous)


@contextlib.contextmanager
def plugin_guard(owner: str | None = None, *, own_exit: bool = False) -> Iterator[None]:
    """Run a command body: expected errors exit 2, a broken plugin exits 1, both on one line.

    ``owner`` (e.g. ``metrics provider 'x' from plugin 'ext_x' (myutils-ext-x 1.0)``) is
    named when anything unexpected escapes; without it unexpected ``Exception``s propagate.
    ``sys.exit`` and other ``BaseException``s (not ``KeyboardInterrupt``) exit 1 naming the
    plugin found in the stack, except ``SystemExit`` with ``own_exit`` (a plugin's own command).
    """
    try:
        with _plugin_output_to_stderr():
            yield
    except _passing():
        raise  # deliberate exits and usage errors: the runner (click, or cli.run_fast) ends them
    except PluginLoadError as exc:
        _fail(EXIT_PLUGIN_FAILED, _one_line(exc))
    except ProviderError as exc:  # the provider's own bug, already wrapped by run_provider_on_input
        cause = exc.cause
        _fail(EXIT_PLUGIN_FAILED, f"{owner} failed on {exc.where}: {describe_failure(cause)}"
              if owner else _one_line(exc))
    except (MyUtilsError, OSError) as exc:
        message = _one_line(exc)
        if isinstance(exc, OSError) and exc.strerror:  # "[Errno 28] ..." says nothing a user needs
            message = one_line(f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror)
        elif isinstance(exc, OSError) and exc.filename and str(exc.filename) not in message:
            message = f"{exc.filename}: {message}"
        _fail(EXIT_BAD_INPUT, message)
    except PluginAbort as exc:  # sys.exit or a BaseException of plugin code, contained where it was called
        _fail(EXIT_PLUGIN_FAILED, f"{owner or plugin_in_traceback(exc) or 'plugin code'} failed: "
                                  f"{describe_failure(exc)}")
    except Exception as exc:
        if owner is None:
            raise
        _fail(EXIT_PLUGIN_FAILED, f"{owner} failed: {describe_failure(exc)}")
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:
        if own_exit:
            raise
        _fail_base(exc, owner)
    except BaseException as exc:  # GeneratorExit, a plugin's own BaseException subclass
        _fail_base(exc, owner)


def _fail_base(exc: BaseException, owner: str | None) -> None:
    """Exit 1 for a ``BaseException`` that plugin code let escape into a command."""
    who = owner or plugin_in_traceback(exc)
    if who:
        _fail(EXIT_PLUGIN_FAILED, f"{who} failed: {describe_failure(PluginAbort(exc))}")
    what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else describe_failure(exc)
    _fail(EXIT_PLUGIN_FAILED, f"the command was stopped by {what} (not raised by my_utils; "
                              "run with --traceback to see where)")


def exit_on_error(func: F) -> F:
    """Decorate a CLI command: InputError, UsageError, PluginError and OSError exit with 2.

    A plugin that cannot be imported exits with 1; other exceptions propagate.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with plugin_guard():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def guard_plugin_command(func: F, owner: str) -> F:
    """Wrap a command a plugin added: errors as ``plugin_guard(owner)`` (wrapped once only)."""
    if getattr(func, _GUARDED, False):
        return func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with plugin_guard(owner, own_exit=True):
            return func(*args, **kwargs)

    setattr(wrapper, _GUARDED, True)
    return wrapper  # type: ignore[return-value]
