"""Build hook: compile the optional C scanner of Kineto traces (``kineto/read/_kineto_scan.c``).

Run by hatchling for wheels and editable installs. It calls the C compiler the interpreter
was built with (``sysconfig``: ``LDSHARED``, ``CFLAGS``, ``CCSHARED``) on the one C file. When
that is not possible -- no compiler, no Python headers, Windows, or ``MYUTILS_NO_COMPILE=1``
-- it prints why and the build goes on as pure Python: ``trace_scan`` then reports the
scanner absent and the typed decoder reads every trace, with the same results.

An editable install puts the module beside its source (the ``.pth`` points at ``src``); a
wheel gets it through ``force_include`` and a platform tag. After editing the C file, install
again (``pip install -e packages/myutils-profiling``); a module whose ``ABI`` differs from the
one ``trace_scan`` expects is ignored, never called, and the module keeps the sha256 of the source
it was compiled from (``SOURCE_SHA256``), so that the tests fail on a build older than its source.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("src/my_utils/profiling/kineto/read/_kineto_scan.c")
MODULE_DIR = "my_utils/profiling/kineto/read"
NO_COMPILE_ENV = "MYUTILS_NO_COMPILE"


def _compile_command(source: Path, target: Path) -> list[str] | str:
    """The compiler command line for ``source`` -> ``target``, or why there is none."""
    if os.environ.get(NO_COMPILE_ENV, "").strip() not in ("", "0"):
        return f"{NO_COMPILE_ENV} is set"
    if sys.platform == "win32":
        return "compiling on Windows is not set up (pure Python there)"
    ldshared = sysconfig.get_config_var("LDSHARED")
    include = sysconfig.get_paths().get("include")
    if not ldshared or not include or not (Path(include) / "Python.h").is_file():
        return "the Python headers (Python.h) are not installed"
    flags = shlex.split(sysconfig.get_config_var("CFLAGS") or "") + shlex.split(sysconfig.get_config_var("CCSHARED") or "")
    # the module records the source it was built from: the tests fail on a build older than the source
    built_from = f'-DMYUTILS_SCAN_SOURCE_SHA256="{source_sha256(source)}"'
    return [*shlex.split(ldshared), *flags, "-O2", built_from, "-I", include, str(source), "-o", str(target)]


def source_sha256(source: Path) -> str:
    """The sha256 (hex) of the C source, which the compiled module keeps as ``SOURCE_SHA256``."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


class CompileScanner(BuildHookInterface):  # type: ignore[type-arg]
    """Compile ``_kineto_scan`` when a compiler is there; otherwise leave the build pure Python."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile, then either place the module (editable) or add it to the wheel with a platform tag."""
        root = Path(self.root)
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        name = "_kineto_scan" + suffix
        if version == "editable":
            target = root / "src" / MODULE_DIR / name
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="myutils-build-")
            target = Path(self._tmp.name) / name
        command = _compile_command(root / SOURCE, target)
        if isinstance(command, str):
            self.app.display_warning(f"myutils-profiling: C scanner not built ({command}); pure Python")
            return
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            self.app.display_warning(f"myutils-profiling: C scanner not built ({exc}); pure Python")
            return
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            self.app.display_warning(f"myutils-profiling: C scanner not built (compiler exit {done.returncode}: "
                                     f"{last}); pure Python")
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["force_include"][str(target)] = f"{MODULE_DIR}/{name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the temporary folder of a wheel build."""
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
