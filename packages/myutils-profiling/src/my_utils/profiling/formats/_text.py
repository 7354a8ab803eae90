"""Reading the text logs other tools write (DCGM, NCCL, perf): one line at a time, never the whole file.

The four text providers (``dcgm_dmon``, ``nccl_log``, ``nccl_inspector``, ``perf_stat``) read
through :func:`text_lines`: lines are decoded one by one (a damaged byte names its line), a
line longer than :data:`MAX_LINE_BYTES` is refused instead of being held in memory, binary
data and FIFOs are refused at once, and names read from the data pass through :func:`inert`
before they become part of an event name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.core.safe_io import open_regular
from my_utils.profiling.formats._files import FileProviderBase

#: Longest line read (1 MiB): real log lines are under a few KB; a longer one is not this input.
MAX_LINE_BYTES = 1 << 20
#: Longest name taken from the data into an event name (perf event, DCGM field, NCCL collective...).
MAX_NAME_CHARS = 200

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def text_lines(path: Path, what: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path`` (numbered from 1, line break removed).

    ``what`` names the expected input in errors (``"a perf stat output"``). A UTF-8 byte order
    mark is dropped; a NUL byte, a line that is not UTF-8 or a line over 1 MiB raises
    ``InputError`` naming the file and the line.
    """
    try:
        fh = open_regular(path, "rb")
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    with fh:
        number = 0
        while True:
            try:
                raw = fh.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise InputError(path, f"line {number + 1}", f"a readable file ({exc.strerror or exc})") from None
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(path, f"line {number}", f"{what} (lines under 1 MiB); this line is longer")
            if b"\x00" in raw:
                kind = UnsupportedInputError if number == 1 else InputError
                raise kind(path, f"line {number}", f"{what} (text); found binary data")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(path, f"line {number}", f"{what} (UTF-8 text)") from None
            if number == 1:
                text = text.lstrip("\ufeff")
            yield number, text.rstrip("\r\n")


def head_text(path: Path, size: int = 1 << 16) -> str:
    """The first ``size`` bytes of ``path`` as text (bad bytes replaced): enough to tell a format."""
    try:
        with open_regular(path, "rb") as fh:
            head = fh.read(size)
    except OSError as exc:
        raise InputError(path, None, f"a readable file ({exc.strerror or exc})") from None
    if b"\x00" in head:
        return "\x00"
    return head.decode("utf-8", errors="replace").lstrip("\ufeff")


def inert(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` read from a file, made safe to put in an event name: no control characters, bounded length.

    Names stay data: they are never parsed, formatted or used as paths; HTML and CSV writers
    escape them as they do every name.
    """
    cleaned = _CONTROL.sub(" ", text).strip()
    return cleaned if len(cleaned) <= limit else cleaned[:limit - 1] + "…"


def shown(line: str, limit: int = 80) -> str:
    """A line quoted in an error message: stripped, control characters removed, at most ``limit`` characters."""
    return repr(inert(line, limit))


class TextLogProvider(FileProviderBase):
    """Base of the text-log providers: binary files refused at once, a folder's files read when their head fits.

    A subclass sets ``expected`` (the input in words, for errors) and implements ``looks_like``
    (on the first ``head_bytes`` of a file found in a folder) and ``read`` (one file).
    """

    expected: ClassVar[str] = ""
    head_bytes: ClassVar[int] = 1 << 16

    def looks_like(self, head: str) -> bool:
        """Whether the head of a file found in a folder is this provider's input."""
        raise NotImplementedError

    def read(self, path: Path) -> list[MetricEvent]:
        """The events of one file."""
        raise NotImplementedError

    def in_folder(self, file: Path) -> bool:
        """In a folder, only the files whose head looks like this input are read (logs sit beside others)."""
        return self.looks_like(head_text(file, self.head_bytes))

    def sniff(self, file: Path) -> None:
        """Binary files are refused at once."""
        if "\x00" in head_text(file, 4096):
            raise UnsupportedInputError(file, None, f"{self.expected} (text); found binary data")

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            out.extend(self.read(f))
        return out
