"""``myutils plugins new``: write a ready plugin package from the templates beside this module.

The package is written into a temporary folder next to the target and renamed into place,
so a failure never leaves half a package behind.
"""

from __future__ import annotations

import os
import re
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from my_utils.core.errors import UsageError

__all__ = ["KINDS", "PackageNames", "plan_package", "write_plugin_package"]

#: --kind -> (module written beside plugin.py, what the kind is called, package summary)
KINDS: dict[str, tuple[str, str, str]] = {
    "provider": ("provider", "metrics provider", "Reads NAME VALUE lines of *.{name}.txt into metric events."),
    "backend": ("backend", "capture backend", "Writes one record per captured window."),
    "rule": ("rule", "analysis rule", "Finds steps slower than a threshold."),
    "sink": ("sink", "event sink", "Appends metric events to a CSV file."),
    "cli": ("command", "command", "Adds `myutils {cmd}`: counts the lines of a text file."),
}
# fullmatch, never ``$``: ``$`` also matches before a final newline, so "foo\n" passed and
# became a folder named with a newline
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class PackageNames:
    """Every name derived from the short NAME of ``myutils plugins new NAME``."""

    name: str
    kind: str
    dist: str
    pkg: str
    entry_point: str
    cmd: str
    class_prefix: str


def plan_package(name: str, kind: str) -> PackageNames:
    """Check ``name`` and ``kind`` and derive the distribution, package and entry-point names."""
    if kind not in KINDS:
        raise UsageError(f"plugins new: --kind {kind!r} is not one of {', '.join(KINDS)}")
    if not _NAME.fullmatch(name):
        raise UsageError(f"plugins new: NAME {name!r} must be a lowercase identifier (letters, digits, '_'), "
                         "e.g. foo_log")
    return PackageNames(
        name=name, kind=kind, dist=f"myutils-ext-{name.replace('_', '-')}", pkg=f"my_utils_ext_{name}",
        entry_point=f"ext_{name}", cmd=name.replace("_", "-"),
        class_prefix="".join(part.capitalize() for part in name.split("_")),
    )


def _render(folder: str, file: str, values: dict[str, str]) -> str:
    text = resources.files("my_utils.core.scaffold").joinpath(f"templates/{folder}/{file}").read_text("utf-8")
    return string.Template(text).substitute(values)


def write_plugin_package(name: str, kind: str, directory: str | os.PathLike[str] = ".") -> Path:
    """Write ``<directory>/myutils-ext-NAME/`` for a plugin of ``kind``; return its path.

    ``kind`` is provider, backend, rule, sink or cli. Refuses an existing target folder.
    """
    names = plan_package(name, kind)
    template, label, summary = KINDS[kind]
    target = Path(directory) / names.dist
    if target.exists():
        raise UsageError(f"plugins new: {target} already exists; choose another NAME or --dir")
    deps = ['"myutils-core>=0.1"'] + (['"myutils-tracing>=0.1"'] if kind == "backend" else [])
    values = {
        "name": names.name, "dist": names.dist, "pkg": names.pkg, "ep": names.entry_point, "cmd": names.cmd,
        "Class": names.class_prefix, "deps": ", ".join(deps), "kind_label": label,
        "summary": summary.format(name=names.name, cmd=names.cmd),
    }
    files = {
        "pyproject.toml": _render("common", "pyproject.toml.tmpl", values),
        "README.md": _render("common", "README.md.tmpl", values),
        f"src/{names.pkg}/__init__.py": _render("common", "__init__.py.tmpl", values),
        f"src/{names.pkg}/plugin.py": _render(kind, "plugin.py.tmpl", values),
        f"src/{names.pkg}/{template}.py": _render(kind, f"{template}.py.tmpl", values),
        f"tests/test_{names.name}.py": _render(kind, "test.py.tmpl", values),
    }
    Path(directory).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{names.dist}-", dir=directory))
    try:
        for relative, text in files.items():
            path = scratch / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        scratch.chmod(0o777 & ~_umask())
        scratch.rename(target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
