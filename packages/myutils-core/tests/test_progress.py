"""The progress bar draws on a real pseudo-terminal, and never in a pipe, a file or when disabled."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO

import pytest

from my_utils.core.progress import Progress, progress

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX only")


@pytest.fixture
def terminal() -> Iterator[tuple[IO[str], int]]:
    """A text stream on the follower side of a pty, and the leader fd to read what was drawn."""
    leader, follower = os.openpty()
    stream = os.fdopen(follower, "w", encoding="utf-8")
    try:
        yield stream, leader
    finally:
        stream.close()
        os.close(leader)


def _drain(fd: int) -> str:
    chunks = []
    while select.select([fd], [], [], 0.05)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:  # Linux reports EIO once the follower side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_draws_on_a_terminal_after_the_delay_and_erases_itself(terminal: tuple[IO[str], int]) -> None:
    stream, leader = terminal
    with progress(4, "ingest", stream=stream, delay=0.05) as bar:
        assert bar.visible
        bar.advance()
        bar.note("a.csv")
        time.sleep(0.4)
    drawn = _drain(leader)
    assert "ingest [" in drawn and "1/4" in drawn and "a.csv" in drawn
    assert drawn.endswith("\r\x1b[K")  # the last thing written erases the line


def test_quick_work_draws_nothing_even_on_a_terminal(terminal: tuple[IO[str], int]) -> None:
    stream, leader = terminal
    with progress(3, "ingest", stream=stream, delay=5.0) as bar:
        bar.advance(3)
    assert _drain(leader) == ""


def test_disabled_draws_nothing_on_a_terminal(terminal: tuple[IO[str], int]) -> None:
    stream, leader = terminal
    with progress(3, "ingest", stream=stream, enabled=False, delay=0.0) as bar:
        assert not bar.visible
        bar.advance()
        time.sleep(0.2)
    assert _drain(leader) == ""


def test_a_pipe_gets_nothing() -> None:
    code = (
        "import time\n"
        "from my_utils.core.progress import progress\n"
        "with progress(None, 'work', delay=0.0) as bar:\n"
        "    bar.advance(); time.sleep(0.3)\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    assert proc.stderr == ""


def test_render_counts_and_strips_control_characters() -> None:
    bar = Progress(10, "read", delay=0.0)
    bar.advance(5)
    bar.note("evil\x1b[2Jname\n")
    line = bar.render(200)
    assert "5/10" in line and "#" * 12 + "." * 12 in line
    assert "\x1b" not in line and "\n" not in line
    assert len(bar.render(30)) <= 29
    unknown = Progress(None, "read")
    unknown.advance(7)
    assert "7 done" in unknown.render()


def test_hidden_bar_is_cheap() -> None:
    # hidden: advance is a counter update, no thread and no write
    with progress(None, "x", stream=sys.stderr, enabled=False) as bar:
        start = time.perf_counter()
        for _ in range(100_000):
            bar.advance()
        elapsed = time.perf_counter() - start
    assert bar.done == 100_000
    assert elapsed < 0.5
