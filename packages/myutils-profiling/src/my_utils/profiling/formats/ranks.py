"""Which exports make one run, and which rank each one is.

An input is a file, a folder (every ``*.sqlite`` below it, hidden entries skipped, sorted),
a shell glob, or nsys's own output template as the launch scripts write it:
``report_%q{RANK}.sqlite`` — each ``%q{VAR}``, ``%h`` (host), ``%p`` (pid) and ``%n``
matches any text, ``%%`` a percent sign. The rank of a file is, in order:

1. the text matched by ``%q{RANK}`` (or ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``,
   ``PMIX_RANK``, ``SLURM_PROCID``, ``MV2_COMM_WORLD_RANK``) in a template;
2. the launcher's variables in the environment nsys recorded for the profiled process
   (``META_DATA_CAPTURE``'s ``PROCESS_<n>:ENVIRONMENT_VARIABLE`` rows, or ``TARGET_INFO_SYSTEM_ENV``):
   ``RANK``/``WORLD_SIZE`` (torchrun), ``OMPI_COMM_WORLD_RANK``/``_SIZE``, ``PMI_RANK``/``PMI_SIZE``,
   ``PMIX_RANK``, ``SLURM_PROCID``/``SLURM_NTASKS``, ``MV2_COMM_WORLD_RANK``/``_SIZE`` — the rank the job
   gave the process, which file names and their order need not follow; the world size comes with it;
3. a rank written in the file name (``rank3``, ``rank_3``, ``worker3``);
4. else, when no file of the run says its rank, the position in sorted order (stated as
   ``rank_source = "file order"``).

Two files of one run with the same rank are refused.
"""

from __future__ import annotations

import glob
import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError, UsageError

RANK_VARIABLES: tuple[str, ...] = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                                   "MV2_COMM_WORLD_RANK")
_TEMPLATE = re.compile(r"%q\{([A-Za-z_][A-Za-z0-9_]*)\}|%([hpn%])")
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_=]?(\d+)(?![0-9])", re.IGNORECASE)
SUFFIXES = (".sqlite", ".db")
#: (rank variable, world-size variables) of each launcher, in the order they are trusted.
LAUNCH_VARIABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("RANK", ("WORLD_SIZE",)), ("OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",)), ("PMI_RANK", ("PMI_SIZE",)),
    ("PMIX_RANK", ("PMIX_SIZE", "OMPI_COMM_WORLD_SIZE")), ("SLURM_PROCID", ("SLURM_NTASKS", "SLURM_STEP_NUM_TASKS")),
    ("MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",)),
)


@dataclass(frozen=True)
class RankInput:
    """One export of a run: its path, its rank (None: unknown) and where the rank came from."""

    path: Path
    rank: int | None
    rank_source: str  # "template %q{RANK}", "environment PMI_RANK", "file name", "file order", "given", "none"
    world_size: int | None = None  # the job's size, from the same launcher's variables
    world_source: str = ""  # "environment PMI_SIZE"...


def _template_regex(template: str) -> tuple[str, re.Pattern[str] | None, str | None]:
    """(glob pattern, regex capturing the rank variable, the variable's name) of an nsys output template."""
    glob_parts, regex_parts, rank_var = [], [], None
    pos = 0
    for m in _TEMPLATE.finditer(template):
        literal = template[pos:m.start()]
        glob_parts.append(glob.escape(literal))
        regex_parts.append(re.escape(literal))
        var, spec = m.group(1), m.group(2)
        if spec == "%":
            glob_parts.append("%")
            regex_parts.append("%")
        elif var is not None and var in RANK_VARIABLES and rank_var is None:
            glob_parts.append("*")
            regex_parts.append(r"(?P<rank>\d+)")
            rank_var = var
        else:
            glob_parts.append("*")
            regex_parts.append(".*?")
        pos = m.end()
    glob_parts.append(glob.escape(template[pos:]))
    regex_parts.append(re.escape(template[pos:]))
    if rank_var is None and not _TEMPLATE.search(template):
        return template, None, None
    return "".join(glob_parts), re.compile("^" + "".join(regex_parts) + "$"), rank_var


def rank_in_name(path: Path) -> int | None:
    """A rank written in the file name (``rank3``, ``rank_3``, ``worker3``), the last one when several."""
    found = _RANK_IN_NAME.findall(path.name)
    return int(found[-1]) if found else None


def expand_inputs(specs: Sequence[str | Path]) -> list[RankInput]:
    """The exports named by ``specs`` (files, folders, globs, nsys templates), each with its rank."""
    found: list[tuple[Path, int | None, str]] = []
    for spec in specs:
        text = str(spec)
        pattern, regex, var = _template_regex(text)
        path = Path(text)
        if regex is None and path.is_file():
            found.append((path, None, "none"))
        elif regex is None and path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not files:
                raise InputError(path, None, "a folder holding nsys exports (*.sqlite); found none")
            found += [(p, None, "none") for p in files]
        else:
            matches = sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
            if not matches and regex is None and os.path.lexists(text):  # a path that is there, but no file
                from my_utils.core.safe_io import path_problem

                raise InputError(path, None, path_problem(path))
            if not matches:
                raise UsageError(f"{text}: no file matches (nsys exports: a file, a folder, a glob, or a "
                                 "template like report_%q{RANK}.sqlite)")
            for p in matches:
                rank = None
                if regex is not None and var is not None:
                    m = regex.match(str(p))
                    rank = int(m.group("rank")) if m else None
                found.append((p, rank, f"template %q{{{var}}}" if rank is not None else "none"))
    return _assign(found)


def launch_environment(path: Path) -> dict[str, str]:
    """The launcher variables (:data:`LAUNCH_VARIABLES`) nsys recorded for the profiled process; {} when none.

    Read with a query of its own (a few rows); a file that is no readable export gives {} here and its
    error when the analysis opens it.
    """
    wanted = {v for rank, worlds in LAUNCH_VARIABLES for v in (rank, *worlds)}
    out: dict[str, str] = {}
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return out
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows: list[tuple[str, str]] = []
        if "META_DATA_CAPTURE" in tables:  # PROCESS_<n>:ENVIRONMENT_VARIABLE rows hold NAME="value"
            for (text,) in conn.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%' "
                                        "AND name LIKE '%:ENVIRONMENT_VARIABLE' ORDER BY rowid"):
                name, sep, value = str(text).partition("=")
                if sep and name in wanted:
                    rows.append((name, value))
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            marks = ",".join("?" * len(wanted))
            rows += [(str(n), str(v)) for n, v in conn.execute(
                f"SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ({marks})", sorted(wanted))]
    except (sqlite3.Error, UnicodeDecodeError):
        return {}
    finally:
        conn.close()
    for name, value in rows:
        out.setdefault(name, value.strip().strip('"').strip())
    return out


def rank_from_environment(env: dict[str, str]) -> tuple[int, str, int | None, str] | None:
    """(rank, its variable, world size, its variable) of the first launcher whose rank variable is a number."""
    for rank_var, world_vars in LAUNCH_VARIABLES:
        text = env.get(rank_var, "")
        if not text.isdigit():
            continue
        for world_var in world_vars:
            size = env.get(world_var, "")
            if size.isdigit() and int(size) > 0:
                return int(text), rank_var, int(size), world_var
        return int(text), rank_var, None, ""
    return None


def _assign(found: list[tuple[Path, int | None, str]]) -> list[RankInput]:
    seen: dict[Path, None] = {}
    unique = []
    for p, r, src in found:
        key = p.resolve()
        if key not in seen:
            seen[key] = None
            unique.append((p, r, src))
    out = []
    for p, r, src in unique:
        world, world_src = None, ""
        launched = rank_from_environment(launch_environment(p))
        if launched is not None:
            env_rank, var, world, world_var = launched
            world_src = f"environment {world_var}" if world is not None else ""
            if r is None:
                r, src = env_rank, f"environment {var}"
        if r is None and (named := rank_in_name(p)) is not None:
            r, src = named, "file name"
        out.append(RankInput(p, r, src, world, world_src))
    if len(out) > 1 and all(x.rank is None for x in out):
        out = [RankInput(x.path, i, "file order", x.world_size, x.world_source) for i, x in enumerate(out)]
    ranks: dict[int, Path] = {}
    for x in out:
        if x.rank is not None:
            if x.rank in ranks:
                raise InputError(x.path, None, f"one export per rank; rank {x.rank} is also {ranks[x.rank]}")
            ranks[x.rank] = x.path
    return sorted(out, key=lambda x: (x.rank is None, x.rank or 0, str(x.path)))
