"""Every command says it is working once it has taken a second: a fallback bar for the whole command.

The group callbacks of ``myutils`` and ``myutils-profile`` start one :func:`~my_utils.core.progress.progress`
bar with ``fallback=True`` per command and close it when the command's context closes. It draws,
on a terminal only and after one second, the command and its elapsed time, and steps aside while
the command draws a bar of its own (reading files, analysing events), so a command never shows
two. It stays silent with ``-q``/``--quiet``/``--json`` and when stderr is not a terminal (pipes,
files, CI logs keep their exact output), as every bar of the project does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QUIET_FLAGS", "start_command_progress"]

#: Command-line flags after which nothing is drawn.
QUIET_FLAGS = frozenset({"-q", "--quiet", "--json"})
# one fallback bar per process: `myutils profile analyze` passes through two group callbacks
_RUNNING = [False]


def start_command_progress(ctx: Any, program: str, argv: list[str] | None = None) -> None:
    """Start the fallback bar of the command ``ctx`` is about to run; it ends when ``ctx`` closes.

    ``argv`` (default ``sys.argv[1:]``) is read for the quiet flags and the subcommand's name: a group's
    callback runs before click parses the command's own options.
    """
    name = getattr(ctx, "invoked_subcommand", None)
    if not name or getattr(ctx, "resilient_parsing", False) or _RUNNING[0]:
        return
    import sys

    tokens = [t for t in (sys.argv[1:] if argv is None else argv) if isinstance(t, str)]
    if any(t in QUIET_FLAGS or t.startswith("--json=") for t in tokens):
        return
    words = [name]
    if name in tokens:  # a group's command: `nsys summary`
        after = tokens[tokens.index(name) + 1:tokens.index(name) + 2]
        sub: Any = ctx.command.get_command(ctx, name) if hasattr(ctx.command, "get_command") else None
        if after and sub is not None and hasattr(sub, "list_commands") and after[0] in sub.list_commands(ctx):
            words.append(after[0])
    from my_utils.core.progress import progress

    block = progress(None, f"{program} {' '.join(words)}", fallback=True)
    block.__enter__()
    _RUNNING[0] = True

    def close() -> None:
        _RUNNING[0] = False
        block.__exit__(None, None, None)

    ctx.call_on_close(close)
