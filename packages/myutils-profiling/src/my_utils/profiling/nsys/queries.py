"""Named, parameterised SQL queries over the canonical views: list them, read them, run them.

Each query is one ``.sql`` file whose header says what it is::

    -- name: kernel_summary
    -- title: Kernels by total GPU time
    -- description: One row per kernel name ... (several description lines join)
    -- param: limit int 20 How many rows (the busiest first)
    -- param: kind text null Only kernels of this kind
    SELECT ... WHERE (:kind IS NULL OR kind = :kind) ... LIMIT :limit

A ``param`` line is ``NAME TYPE DEFAULT HELP``: TYPE is ``int``, ``float`` or ``text``;
DEFAULT is a value, ``null``, or ``required``. The body binds them as ``:NAME``. Queries
read the views of :mod:`.views` (``nsys_kernel``, ``nsys_gpu_op``...), so one file runs on
every exporter version.

Where queries come from, later ones replacing earlier ones of the same name:
the built-ins in ``nsys/sql/``; every package named by an entry point of the group
``myutils.nsys_queries`` (its folder's ``*.sql``; a broken plugin is reported by name and
the rest still load); the folders in ``MYUTILS_NSYS_QUERIES`` (``os.pathsep``-separated);
and folders given by the caller.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError, UsageError

if TYPE_CHECKING:
    from my_utils.profiling.nsys.schema import NsysExport

ENTRY_POINT_GROUP = "myutils.nsys_queries"
QUERIES_ENV = "MYUTILS_NSYS_QUERIES"
BUILTIN_DIR = Path(__file__).resolve().with_name("sql")
_TYPES = {"int": int, "float": float, "text": str}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_HEADER = re.compile(r"^--\s*(name|title|description|param)\s*:\s*(.*)$")


@dataclass(frozen=True)
class QueryParam:
    """One parameter of a named query: its type, default (None: SQL NULL) and whether it must be given."""

    name: str
    type: str
    default: Any
    required: bool
    help: str

    def convert(self, raw: Any, query: str) -> Any:
        """``raw`` (text from a command line, or a value) as this parameter's type; UsageError when it is not."""
        if raw is None or (isinstance(raw, str) and raw.strip().lower() == "null" and not self.required):
            return None
        kind = _TYPES[self.type]
        if isinstance(raw, kind) and not isinstance(raw, bool):
            return raw
        try:
            return kind(raw) if kind is str else kind(str(raw).strip())
        except ValueError:
            raise UsageError(f"query {query}: parameter {self.name} takes {self.type}, got {raw!r}") from None


@dataclass(frozen=True)
class NamedQuery:
    """A named query: header fields, parameters, the SQL body and the file it came from."""

    name: str
    title: str
    description: str
    params: tuple[QueryParam, ...]
    sql: str
    path: Path
    origin: str = "built-in"

    def bind(self, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every parameter's value: given ones converted, the rest their defaults; unknown or missing -> UsageError."""
        values = dict(values or {})
        known = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise UsageError(f"query {self.name}: unknown parameter(s) {', '.join(unknown)}; it takes "
                             f"{', '.join(known) or 'none'}")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in values:
                out[p.name] = p.convert(values[p.name], self.name)
            elif p.required:
                raise UsageError(f"query {self.name}: parameter {p.name} ({p.type}) is required: --param "
                                 f"{p.name}=VALUE")
            else:
                out[p.name] = p.default
        return out

    @property
    def text(self) -> str:
        """The whole file as written (header and SQL)."""
        return self.path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of one named query on one export (rows already bounded by the query)."""

    query: str
    export: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


@dataclass
class QueryCatalog:
    """The queries found, by name, and the sources that failed to load (each with its reason)."""

    queries: dict[str, NamedQuery] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> NamedQuery:
        """The query called ``name``; UsageError listing the known names otherwise."""
        if name not in self.queries:
            raise UsageError(f"no nsys query named {name!r}; known: {', '.join(sorted(self.queries))}")
        return self.queries[name]


def parse_query(path: Path, origin: str = "built-in") -> NamedQuery:
    """Read one ``.sql`` file; InputError names the file and line of a malformed header."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"a readable UTF-8 .sql file ({exc})") from None
    fields: dict[str, str] = {}
    desc: list[str] = []
    params: list[QueryParam] = []
    body: list[str] = []
    in_header = True
    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line.strip()) if in_header else None
        if m:
            key, value = m.group(1), m.group(2).strip()
            if key == "param":
                params.append(_param(path, number, value))
            elif key == "description":
                desc.append(value)
            else:
                fields[key] = value
            continue
        if in_header and (line.strip().startswith("--") or not line.strip()):
            continue
        in_header = False
        body.append(line)
    name = fields.get("name", "")
    if not _NAME.match(name):
        raise InputError(path, "header", f"a '-- name: <lower_snake_case>' line; got {name!r}")
    sql = "\n".join(body).strip()
    if not sql:
        raise InputError(path, "body", "an SQL statement after the header")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise InputError(path, "header", f"distinct parameter names; got {names}")
    return NamedQuery(name, fields.get("title", name), " ".join(desc), tuple(params), sql, path, origin)


def _param(path: Path, line: int, spec: str) -> QueryParam:
    parts = spec.split(None, 3)
    if len(parts) < 3 or parts[1] not in _TYPES or not _NAME.match(parts[0]):
        raise InputError(path, f"line {line}", "'-- param: NAME int|float|text DEFAULT|null|required HELP'; "
                                               f"got {spec!r}")
    name, kind, raw = parts[0], parts[1], parts[2]
    required = raw.lower() == "required"
    default: Any = None
    if not required and raw.lower() != "null":
        try:
            default = _TYPES[kind](raw)
        except ValueError:
            raise InputError(path, f"line {line}", f"a {kind} default for {name}; got {raw!r}") from None
    return QueryParam(name, kind, default, required, parts[3] if len(parts) > 3 else "")


def _load_dir(catalog: QueryCatalog, folder: Path, origin: str) -> None:
    if not folder.is_dir():
        catalog.problems.append(f"{origin}: {folder} is not a folder of .sql files")
        return
    for path in sorted(folder.glob("*.sql")):
        try:
            q = parse_query(path, origin)
        except InputError as exc:
            catalog.problems.append(f"{origin}: {exc}")
            continue
        catalog.queries[q.name] = q


def load_catalog(extra_dirs: Iterable[str | Path] = (), *, plugins: bool = True) -> QueryCatalog:
    """Every named query: built-ins, plugin packages, ``MYUTILS_NSYS_QUERIES`` folders, then ``extra_dirs``."""
    catalog = QueryCatalog()
    _load_dir(catalog, BUILTIN_DIR, "built-in")
    if plugins:
        for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            origin = f"plugin {ep.name} ({ep.dist.name if ep.dist else 'unknown distribution'})"
            try:  # a broken plugin is reported and the others still load
                module = importlib.import_module(ep.value)
                folder = Path(module.__file__ or "").resolve().parent
            except Exception as exc:
                catalog.problems.append(f"{origin}: cannot import {ep.value} ({type(exc).__name__}: {exc})")
                continue
            _load_dir(catalog, folder, origin)
    for part in os.environ.get(QUERIES_ENV, "").split(os.pathsep):
        if part.strip():
            _load_dir(catalog, Path(part.strip()), QUERIES_ENV)
    for extra in extra_dirs:
        _load_dir(catalog, Path(extra), "--queries")
    return catalog


def run_query(db: NsysExport, query: NamedQuery, values: Mapping[str, Any] | None = None,
              *, max_rows: int | None = None) -> QueryResult:
    """Run ``query`` on ``db`` (views created first); at most ``max_rows`` rows are kept."""
    db.ensure_views()
    bound = query.bind(values)
    columns, cur = db.description(query.sql, bound, place=f"query {query.name}")
    rows: list[tuple[Any, ...]] = []
    for row in db.iterate_cursor(cur, place=f"query {query.name}"):
        if max_rows is not None and len(rows) >= max_rows:
            break
        rows.append(tuple(row))
    return QueryResult(query.name, db.label, tuple(columns), tuple(rows))


def run_builtin(db: NsysExport, name: str, values: Mapping[str, Any] | None = None) -> QueryResult:
    """Run the built-in query ``name`` (the analyses use these, so users can read what they compute)."""
    return run_query(db, builtin(name), values)


_BUILTINS: dict[str, NamedQuery] = {}


def builtin(name: str) -> NamedQuery:
    """The built-in query ``name`` (parsed once per process)."""
    if name not in _BUILTINS:
        _BUILTINS[name] = parse_query(BUILTIN_DIR / f"{name}.sql")
    return _BUILTINS[name]


def builtin_names() -> Sequence[str]:
    """The names of the built-in queries, sorted."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.sql"))
