"""All of a command's outputs or none: each is written to a temporary beside it, all are renamed at the end.

``atomic_write`` makes one file whole or absent; a command that writes three (the JSON,
Markdown and HTML reports) could still leave the first two when the third fails (a full
disk, a file-size limit, memory running out while rendering). :class:`StagedOutputs` renders
every output into a hidden temporary in its target's folder, and only when all of them are
complete renames them into place, all or none (``atomic.replace_all``: a rename failing half-way
puts the earlier files back); on any failure, ``BaseException`` included (Ctrl-C), every
temporary is removed and no target is touched. A run killed outright
(SIGKILL) cannot clean up: the next run writing the same target removes what it left.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from my_utils.core.errors import UsageError


def _host_tag() -> str:
    import hashlib
    import socket

    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


# temporaries carry this host's tag and their writer (pid and start time, :func:`~my_utils.core.scratch.owner_token`):
# a later run removes only those whose writer is gone (SIGKILL runs no cleanup), never a live writer's, nor one of
# another machine sharing the folder, nor that of a process that took a dead writer's pid since
_OWNER = _host_tag()


def _sweep_dead(target: Path) -> None:
    """Remove the temporaries of ``target`` that a killed run of this machine left (its writer no longer lives)."""
    from my_utils.core.scratch import owner_alive

    prefix = f".{target.name}.{_OWNER}."
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix) and n.endswith(".staged.tmp")]
    except OSError:
        return
    for name in names:
        writer = name[len(prefix):].split(".", 1)[0]
        if not writer.isdigit() and owner_alive(writer):  # an unreadable name counts as alive: left alone
            continue
        if writer.isdigit() and (int(writer) == os.getpid() or _alive(int(writer))):  # an earlier release's: the pid alone
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.parent / name)


def _alive(pid: int) -> bool:
    if os.name != "posix":  # Windows' os.kill(pid, 0) terminates the process: never probe there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process, or a pid this system cannot hold: not ours to judge
    return True


class StagedOutputs:
    """``with StagedOutputs(inputs) as out: out.write_text(p, text); out.write_with(p, fn)`` → renamed at exit.

    ``inputs`` are the files the command reads: an output that is (or links to) one of
    them is refused before anything is written (``UsageError``). Two outputs with one
    path are refused too. ``written`` lists the targets once they are in place.
    """

    def __init__(self, inputs: Iterable[str | Path] = ()) -> None:
        self.inputs = [Path(p) for p in inputs]
        self.staged: list[tuple[Path, Path]] = []  # (temporary, target)
        self.written: list[Path] = []
        self.created: list[Path] = []  # folders made for the outputs: removed again when nothing lands there

    def check(self, targets: Iterable[str | Path]) -> None:
        """Refuse, before any work, outputs that would replace an input or each other."""
        from my_utils.core.safe_io import refuse_overwriting_inputs

        paths = [Path(t) for t in targets]
        refuse_overwriting_inputs(paths, self.inputs)
        seen: dict[Path, Path] = {}
        for p in paths:
            key = p.resolve()
            if key in seen:
                raise UsageError(f"{seen[key]} and {p} are the same output file; give each output its own path")
            seen[key] = p

    def _temporary(self, target: Path) -> Path:
        missing = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        self.created.extend(reversed(missing))  # outermost first: removed last
        _sweep_dead(target)
        from my_utils.core.scratch import owner_token

        tmp = target.parent / f".{target.name}.{_OWNER}.{owner_token()}.{uuid.uuid4().hex[:8]}.staged.tmp"
        self.staged.append((tmp, target))
        return tmp

    def write_text(self, target: str | Path, text: str) -> None:
        """Stage ``text`` (UTF-8; a lone surrogate from a trace's name is written as ``\\xNN`` text).

        JSON must be cleaned as data first (:func:`utf8_clean`): an escape made inside JSON text is no JSON.
        """
        from my_utils.core.safe_io import utf8_text

        def write(tmp: Path) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(utf8_text(text))

        self.write_with(target, write)

    def write_with(self, target: str | Path, writer: Callable[[Path], Any]) -> None:
        """Stage what ``writer(temporary_path)`` writes for ``target`` (a renderer that writes files itself).

        An ``OSError`` (disk full, file-size limit, read-only folder) names ``target``, not
        the hidden temporary the user never asked for.
        """
        path = Path(target)
        tmp = self._temporary(path)
        try:
            writer(tmp)
        except OSError as exc:
            # a renderer writing through atomic_write already says "... writing <the temporary>"
            reason = str(exc.strerror or exc).replace(f" writing {tmp}", "")
            raise OSError(exc.errno, f"cannot write {path}: {reason}", str(path)) from None

    def commit(self) -> list[Path]:
        """Rename every staged file over its target, all or none (``atomic.replace_all``); return the targets."""
        from my_utils.core.atomic import replace_all

        replace_all(self.staged)  # a target that is a folder, or a rename failing half-way: no target changed
        self.written.extend(target for _tmp, target in self.staged)
        self.staged = []
        return self.written

    def discard(self) -> None:
        """Remove every staged temporary (no target is touched), and the folders made for them if empty."""
        for tmp, _ in self.staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.staged = []
        if not self.written:
            for folder in reversed(self.created):
                with contextlib.suppress(OSError):  # not empty (another writer): keep it
                    folder.rmdir()
        self.created = []

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            try:
                self.commit()
            finally:
                self.discard()  # what a failed rename left
        else:
            self.discard()


def is_out_of_memory(exc: BaseException) -> bool:
    """``exc`` says memory ran out: a ``MemoryError``, or a lazy import whose shared library could not be mapped
    (under an address-space limit ``import sqlite3`` fails with "failed to map segment", not ``MemoryError``)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, ImportError) and ("failed to map segment" in text or "Cannot allocate memory" in text)


@contextlib.contextmanager
def exits_on_out_of_memory(what: str) -> Iterator[None]:
    """Memory running out in the block (:func:`is_out_of_memory`) ends the command ``what`` in one line, exit 1."""
    try:
        yield
    except (MemoryError, ImportError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise out_of_memory(what) from None


def out_of_memory(what: str) -> Any:
    """The one-line exit of a command that ran out of memory (``raise out_of_memory("analyze")``): exit 1."""
    import typer

    typer.echo(f"error: {what}: out of memory; nothing was written (free memory, or analyse fewer/smaller "
               "inputs at a time)", err=True)
    return typer.Exit(1)
