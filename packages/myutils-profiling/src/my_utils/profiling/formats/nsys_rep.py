"""An Nsight Systems report (``.nsys-rep``) made readable: exported to SQLite with ``nsys``, once, and cached.

The analyses read nsys's SQLite export. For a ``.nsys-rep`` this module finds or makes that
export, in this order:

1. ``<stem>.sqlite`` beside the report, when it is at least as new as the report (``nsys
   export``'s own default name, so an export the user made is found);
2. the cached export in ``<cache>/nsys-export/`` (``MYUTILS_CACHE_DIR``, as core's caches),
   named after the report's path, size and modification time;
3. ``nsys export --type sqlite`` when ``nsys`` is on ``PATH``: written beside the report, or into
   the cache folder when the report's folder is not writable, under a temporary name renamed
   into place once complete, so a killed export leaves no half database behind.

Without ``nsys``, :func:`find_export` returns the exact command to run instead. The ``nsys``
binary is the seam: tests put a stand-in on ``PATH``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from my_utils.core.errors import InputError

__all__ = ["RepExport", "export_command", "find_export"]


@dataclass(frozen=True)
class RepExport:
    """The SQLite export of a report (None when none could be had), how it was had, and the command otherwise."""

    report: Path
    sqlite: Path | None
    how: str  # "beside the report", "cached", "exported now", or "" when none
    command: str  # the command that makes it, shell-quoted


def export_command(report: Path, out: Path) -> str:
    """``nsys export --type sqlite --output OUT REPORT``, shell-quoted."""
    return shlex.join(["nsys", "export", "--type", "sqlite", "--output", str(out), str(report)])


def _beside(report: Path) -> Path:
    return report.with_name(report.name.rsplit(".", 1)[0] + ".sqlite")


def _cached(report: Path) -> Path | None:
    from my_utils.core.entry_point_cache import cache_dir

    folder = cache_dir()
    if folder is None:
        return None
    st = report.stat()
    key = hashlib.sha256(f"{report.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode("utf-8", "surrogatepass"))
    return Path(folder) / "nsys-export" / f"{_beside(report).stem}-{key.hexdigest()[:16]}.sqlite"


def _fresh(export: Path, report: Path) -> bool:
    try:
        return export.is_file() and export.stat().st_mtime_ns >= report.stat().st_mtime_ns \
            and export.read_bytes()[:16] == b"SQLite format 3\x00"
    except OSError:
        return False


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


def find_export(report: Path, nsys: str | None = None) -> RepExport:
    """The SQLite export of ``report`` (module docstring); ``nsys`` defaults to the one on ``PATH``."""
    beside, cached = _beside(report), _cached(report)
    command = export_command(report, beside)
    if _fresh(beside, report):
        return RepExport(report, beside, "beside the report", command)
    if cached is not None and _fresh(cached, report):
        return RepExport(report, cached, "cached", export_command(report, cached))
    binary = nsys or shutil.which("nsys")
    if binary is None:
        return RepExport(report, None, "", command)
    target = beside if _writable(report.parent) else cached
    if target is None:
        return RepExport(report, None, "", command)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.partial.sqlite")
    try:
        done = subprocess.run([binary, "export", "--type", "sqlite", "--force-overwrite", "true", "--output",
                               str(tmp), str(report)], capture_output=True, text=True, check=False)
        if done.returncode != 0 or not tmp.is_file():
            said = (done.stderr or done.stdout).strip().splitlines()
            raise InputError(report, None, f"a report `nsys export` can read (it exited {done.returncode}: "
                             f"{said[-1] if said else 'no message'}); run `{export_command(report, target)}` "
                             "to see why")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return RepExport(report, target, "exported now", export_command(report, target))
