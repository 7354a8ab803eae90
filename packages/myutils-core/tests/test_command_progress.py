"""Every command says it is working after a second (``cli.command_progress``), on a real pseudo-terminal.

A command without a bar of its own shows ``<program> <command>: working Ns``; one with its own bar
shows only that one; ``-q`` or a pipe shows nothing. Each case runs a typer app in a child process
whose stderr is the follower side of a pty.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pty", reason="pseudo-terminals are POSIX only")

APP = textwrap.dedent("""
    import sys, time
    import typer
    from my_utils.core.cli.command_progress import start_command_progress
    from my_utils.core.progress import progress

    app = typer.Typer(add_completion=False)

    @app.callback()
    def root(ctx: typer.Context) -> None:
        start_command_progress(ctx, "demo")

    @app.command()
    def slow(quiet: bool = typer.Option(False, "-q")) -> None:
        time.sleep(1.6)

    @app.command()
    def own() -> None:
        with progress(3, "reading", delay=0.0) as bar:
            bar.advance()
            time.sleep(1.6)

    app()
""")


def _stderr_on_a_terminal(*args: str) -> str:
    leader, follower = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", APP, *args], stdout=subprocess.DEVNULL, stderr=follower)
        os.close(follower)
        chunks = []
        while True:
            ready = select.select([leader], [], [], 10)[0]
            if not ready:
                break
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_command_without_its_own_bar_says_it_is_working() -> None:
    drawn = _stderr_on_a_terminal("slow")
    assert "demo slow: working 1s" in drawn
    assert drawn.endswith("\r\x1b[K")  # erased at the end


def test_a_command_with_its_own_bar_shows_only_that_one() -> None:
    drawn = _stderr_on_a_terminal("own")
    assert "reading [" in drawn and "1/3" in drawn
    assert "working" not in drawn


def test_quiet_and_pipes_show_nothing() -> None:
    assert _stderr_on_a_terminal("slow", "-q") == ""
    proc = subprocess.run([sys.executable, "-c", APP, "slow"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == ""
