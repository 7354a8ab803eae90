"""The ``myutils`` console script: answers ``--help``, ``plugins list`` and ``plugins run`` at once when it can.

Importing typer, click and every plugin's commands is most of a start. When the record of the
last clean start is current (``cli.start_cache``), ``myutils --help`` prints the help it drew,
``myutils plugins list [--json]`` lists the plugins (loaded and asked as always), and a
``myutils plugins run`` line that ``cli.run_fast`` parses with certainty runs there, all without
building the typer app. Anything else — other arguments, no current record, a cache turned
off with ``MYUTILS_NO_CACHE=1`` — runs ``cli.app.run``, which records a clean start for next
time (``--help`` and ``plugins list`` do; a ``plugins run`` under typer builds no plugin
command, so it proves nothing to record). Nothing here imports typer.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from my_utils.core.cli.run_fast import RunArgs
    from my_utils.core.cli.start_cache import StartRecord

__all__ = ["FAST_ARGS", "asks_for_version", "main", "quiet_plugin_warnings"]

#: the argument lists a current start record can answer without typer
FAST_ARGS = (["--help"], ["plugins", "list"], ["plugins", "list", "--json"])


def quiet_plugin_warnings() -> None:
    """Keep broken-plugin warnings off the CLI's stderr; ``myutils plugins list`` shows them.

    Without importing ``logging`` (~5 ms of a start) unless a warning comes (``plugins.quiet_warnings``).
    """
    from my_utils.core.plugins import quiet_warnings

    quiet_warnings()


def asks_for_version(args: list[str]) -> bool:
    """True when ``--version`` is among the root options (before the first command word)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--version":
            return True
        if not arg.startswith("-"):
            return False  # a command: its own options follow
    return False


def _fast(argv: list[str], record: StartRecord) -> bool:
    """Answer ``argv`` from the current ``record``; False when it cannot."""
    from my_utils.core.cli.start_cache import terminal_width

    if argv == ["--help"]:
        text = record.help_text(terminal_width())
        if text is None:
            return False
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return True
    from my_utils.core.cli.listing import render_records
    from my_utils.core.plugin_calls import abandoned, send_plugin_output_to_stderr
    from my_utils.core.plugins import get_registry

    quiet_plugin_warnings()
    send_plugin_output_to_stderr(True)
    text = render_records(get_registry().records(), as_json=argv[-1] == "--json")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if abandoned():  # a plugin import that hangs now: end without waiting for its thread
        from my_utils.core.cli.app import exit_abandoned

        exit_abandoned(0)
    return True


def main() -> None:
    """Console-script entry point of ``myutils``.

    ``--version`` reads installed metadata only and imports no plugin (a plugin that hangs or
    exits at import cannot stop it). Elsewhere, what plugin code prints goes to stderr, and
    when a plugin import was abandoned (it did not finish within its bound) the process ends
    without waiting for that thread.
    """
    try:
        _main(sys.argv[1:])
    finally:
        if "my_utils.core.entry_point_cache" in sys.modules:
            from my_utils.core.entry_point_cache import reuse_fingerprint

            reuse_fingerprint(None)


def _main(argv: list[str]) -> None:
    if asks_for_version(argv):
        from my_utils.core.cli.app import _print_versions

        _print_versions()
        return
    record: StartRecord | None = None
    run_args: RunArgs | None = None
    if argv not in FAST_ARGS:
        from my_utils.core.cli.run_fast import fast_run_args  # os, sys, pathlib: what typer imports anyway

        run_args = fast_run_args(argv)
    if argv in FAST_ARGS or run_args is not None:
        from my_utils.core.entry_point_cache import cache_dir, metadata_fingerprint, reuse_fingerprint

        if cache_dir() is not None:
            from my_utils.core.cli.start_cache import StartRecord

            prints = metadata_fingerprint()
            reuse_fingerprint(prints)  # the registry's entry-point lookup checks the same fingerprint
            record = StartRecord.load(prints)
            if record.current and run_args is not None:
                from my_utils.core.cli.run_fast import run as run_fast

                quiet_plugin_warnings()
                run_fast(run_args)
                return
            if record.current and _fast(argv, record):
                return
        # a plugins run line without a current record: typer runs it with every plugin's commands built
        # (~40 ms, once) so that a clean start is recorded and the next runs of the loop it is often
        # part of take the line above
    quiet_plugin_warnings()
    from my_utils.core.cli.app import run

    run(argv, record)
