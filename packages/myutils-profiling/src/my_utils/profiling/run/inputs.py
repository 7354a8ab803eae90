"""The inputs of one run: every file ``PATH...`` names, its kind, its rank, and what the analysis does with it.

:func:`collect_inputs` turns the arguments into files (``formats.discover``), tells each one's
kind by its content (``formats.sniff``), exports Nsight Systems reports when ``nsys`` can
(``formats.nsys_rep``), and gives each file its rank: a Kineto trace's ``distributedInfo`` or
its name, an nsys export's ``%q{RANK}`` template, name or place in the file order
(``formats.ranks``), a profile CSV's name or ``machine_id``; an NCCL log holds the ranks of every
process in it. The result, :class:`RunInputs`, is what the run model reads from: one object
instead of a list of paths per tool.

A file ``analyze`` cannot read is never dropped silently: its row says what it is and the
command that reads it. When the user named such a file directly, :meth:`RunInputs.refuse_named`
makes it an error (exit 2); found in a folder, it is a note.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from my_utils.core.errors import UnsupportedInputError
from my_utils.profiling.formats.discover import Found, discover, is_pattern
from my_utils.profiling.formats.kinds import FileKind, Role
from my_utils.profiling.formats.sniff import Sniffed, sniff

__all__ = ["InputFile", "RunInputs", "collect_inputs"]


@dataclass(frozen=True)
class InputFile:
    """One file of the run: its kind, rank (and where the rank came from), whether it was named, and its use.

    ``use`` says in words what the analysis does with the file, or why it does not read it;
    ``command`` is what reads it when the analysis does not (shell-quoted, "" when none).
    """

    path: Path
    kind: FileKind
    rank: int | None
    rank_source: str
    named: bool
    use: str
    command: str = ""
    detail: str = ""

    @property
    def read(self) -> bool:
        """Whether the analysis reads this file."""
        return not self.command and self.kind.readable

    def line(self) -> str:
        """One line for the terminal: the file, what it is, and what to run (files the analysis leaves out)."""
        what = self.kind.label + (f" ({self.detail})" if self.detail else "")
        return f"{self.path}: {what}; {self.use}" + (f": {self.command}" if self.command else "")

    def row(self) -> dict[str, Any]:
        """The file as a row of the report's ``run_inputs`` table."""
        return {"file": str(self.path), "kind": self.kind.name.lower(), "what": self.kind.label,
                "rank": self.rank, "rank_from": self.rank_source, "read": self.read, "use": self.use,
                "command": self.command, "detail": self.detail}


@dataclass(frozen=True)
class RunInputs:
    """Every file of a run with its kind and rank (module docstring)."""

    files: tuple[InputFile, ...] = ()
    nsys_specs: tuple[str, ...] = field(default=())  # what formats.ranks reads the exports' ranks from

    def of(self, *kinds: FileKind) -> list[Path]:
        """The paths of the files read of these kinds, in order."""
        return [f.path for f in self.files if f.kind in kinds and f.read]

    def by_role(self, role: Role) -> list[InputFile]:
        """The files read in this role."""
        return [f for f in self.files if f.read and f.kind.role is role]

    @property
    def left_out(self) -> list[InputFile]:
        """The files the analysis does not read, each with what it is and what to run."""
        return [f for f in self.files if not f.read]

    def refuse_named(self) -> None:
        """UnsupportedInputError (exit 2) for the first file the user named that the analysis cannot read."""
        for f in self.left_out:
            if f.named:
                reason = f"a file analyze reads; this is {f.kind.label}" + (f" ({f.detail})" if f.detail else "")
                raise UnsupportedInputError(f.path, None, reason + (f": run `{f.command}`" if f.command else ""))

    def rows(self) -> list[dict[str, Any]]:
        """The ``run_inputs`` table: one row per file, in order."""
        return [f.row() for f in self.files]

    @property
    def readers(self) -> tuple[tuple[str, Path, int | None], ...]:
        """``(provider, file, rank)`` of the files a provider's reader turns into events (several events files too:
        one alone is streamed into the analyzer as it is)."""
        out = [(f.kind.provider, f.path, f.rank) for f in self.by_role(Role.EVENTS)]
        jsonl = self.of(FileKind.EVENTS_JSONL)
        if len(jsonl) > 1:
            out += [("metric_events", p, None) for p in jsonl]
        return tuple(out)

    def table(self, skipped: dict[Path, str]) -> list[dict[str, Any]]:
        """The report's ``run_inputs`` table; a file left out because its events were already counted says so."""
        rows = self.rows()
        for row in rows:
            why = skipped.get(Path(row["file"]))
            if why:
                row.update(read=False, use=why)
        return rows

    def __bool__(self) -> bool:
        return bool(self.files)


_USE = {Role.EVENTS_FILE: "metric events, analysed as they are",
        Role.EVENTS: "read into metric events",
        Role.KINETO: "read once: its events and every Kineto analysis",
        Role.NSYS: "read once: its events and the Nsight Systems analyses",
        Role.NCU: "read once: its events and the Nsight Compute analysis"}


def collect_inputs(specs: Sequence[str | os.PathLike[str]], exclude: Iterable[Path] = (),
                   nsys: str | None = None) -> RunInputs:
    """The run's files (module docstring); ``exclude`` are files to leave out (the command's own outputs).

    ``nsys`` is the ``nsys`` binary for ``.nsys-rep`` reports (default: the one on ``PATH``).
    """
    found = discover(specs, exclude)
    sniffed = [(f, sniff(f.path)) for f in found]
    files: list[InputFile] = []
    exported: dict[Path, Path] = {}  # resolved export -> the report it came from
    for f, s in sniffed:
        files.append(_file(f, s, nsys, exported))
    files = _without_export_twins(files, exported)
    specs_for_nsys = _nsys_specs(found, files)
    return RunInputs(tuple(_with_nsys_ranks(files, specs_for_nsys)), tuple(specs_for_nsys))


def _file(f: Found, s: Sniffed, nsys: str | None, exported: dict[Path, Path]) -> InputFile:
    kind = s.kind
    base = InputFile(f.path, kind, s.rank, s.rank_source, f.named, _USE.get(kind.role, ""), detail=s.detail)
    if kind is FileKind.NSYS_REP:
        from my_utils.profiling.formats.nsys_rep import find_export

        export = find_export(f.path, nsys)
        if export.sqlite is None:
            return replace(base, use="nsys is not on PATH; export it, then analyze the .sqlite", command=export.command)
        exported[export.sqlite.resolve()] = f.path
        return replace(base, path=export.sqlite, kind=FileKind.NSYS_SQLITE, use=_USE[Role.NSYS],
                       detail=f"exported from {f.path.name} ({export.how})")
    if kind is FileKind.NCU_REP:
        from my_utils.profiling.ncu.report_file import ncu_report_module

        module, reason = ncu_report_module()
        if module is None:
            command = shlex.join(["ncu", "--import", str(f.path), "--csv", "--page", "details"]) \
                + f" > {shlex.quote(str(f.path.with_suffix('.csv')))}"
            return replace(base, use=f"NVIDIA's ncu_report module is not importable ({reason}); export a CSV",
                           command=command)
        return base
    if not kind.readable:
        stem = f.path.name.split(".", 1)[0]
        command = kind.value.command.format(path=shlex.quote(str(f.path)), stem=shlex.quote(stem),
                                            sqlite=shlex.quote(stem + ".sqlite"))
        use = kind.value.use or ("not read by analyze" if command else
                                 "not read by analyze; no tool of this package reads it")
        return replace(base, use=use, command=command)
    return base


def _without_export_twins(files: list[InputFile], exported: dict[Path, Path]) -> list[InputFile]:
    """An export found both as a file and as the export of a report counts once (the report's row keeps it)."""
    out: list[InputFile] = []
    for f in files:
        key = f.path.resolve()
        if key in exported and not f.detail.startswith("exported from"):
            continue
        out.append(f)
    return out


def _nsys_specs(found: Sequence[Found], files: Sequence[InputFile]) -> list[str]:
    """The exports as ``formats.ranks`` reads them: an nsys template as written (its ``%q{RANK}`` is the rank)."""
    nsys_paths = {f.path.resolve() for f in files if f.kind is FileKind.NSYS_SQLITE and f.read}
    specs: list[str] = []
    for f in found:
        if "%q{" in f.spec and is_pattern(f.spec) and f.path.resolve() in nsys_paths and f.spec not in specs:
            specs.append(f.spec)
    covered: set[Path] = set()
    if specs:
        from my_utils.profiling.formats.ranks import expand_inputs

        covered = {i.path.resolve() for i in expand_inputs(specs)}
    specs += [str(f.path) for f in files if f.kind is FileKind.NSYS_SQLITE and f.read
              and f.path.resolve() not in covered]
    return specs


def _with_nsys_ranks(files: list[InputFile], specs: Sequence[str]) -> list[InputFile]:
    if not specs:
        return files
    from my_utils.profiling.formats.ranks import expand_inputs

    ranks = {i.path.resolve(): i for i in expand_inputs(specs)}
    out = []
    for f in files:
        rank_input = ranks.get(f.path.resolve()) if f.kind is FileKind.NSYS_SQLITE else None
        if rank_input is not None:
            source = {"none": "", "file order": "file order (no rank in the names)"}.get(rank_input.rank_source,
                                                                                      rank_input.rank_source)
            f = replace(f, rank=rank_input.rank, rank_source=source)
        out.append(f)
    return out
