"""The seed's part names ``my_utils.legacy_profilers`` and ``my_utils.artifacts``, each in a fresh interpreter.

The seed lists its parts as core, tracing, hooks, distributed, memory, artifacts,
legacy_profilers and profiling. ``legacy_profilers`` is a flat legacy alias like the nine
others (the same module object as ``my_utils.legacy``); ``artifacts`` collects the dump
utilities (core) and the NCU CSV entry points (profiling). With only myutils-core on the
path, both name the distribution to install.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CORE_SRC = Path(__file__).resolve().parents[1] / "src"


def _run(code: str, *, core_only: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; ``core_only``: no site-packages, only core's source on the path."""
    if core_only:
        # -S: no site-packages, so no other distribution and no installed metadata: what a
        # `pip install myutils-core` alone gives, as far as these stdlib-only imports go
        code = f"import sys; sys.path.insert(0, {str(CORE_SRC)!r})\n" + code
        argv = [sys.executable, "-S", "-c", code]
    else:
        argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_legacy_profilers_is_the_legacy_package() -> None:
    out = _run(
        "import my_utils.legacy_profilers, my_utils.legacy, my_utils\n"
        "from my_utils.legacy_profilers import ProfilerWrapper, create_profiler_context\n"
        "from my_utils.legacy import ProfilerWrapper as PW\n"
        "print(my_utils.legacy_profilers is my_utils.legacy, ProfilerWrapper is PW)\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.parametrize("statement", ["import my_utils.legacy_profilers",
                                       "from my_utils import legacy_profilers"])
def test_legacy_profilers_without_its_distribution_names_pip_install(statement: str) -> None:
    out = _run(statement, core_only=True)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    # LegacyHomeMissing is the ImportError subclass every legacy path raises
    assert last == ("my_utils.core._legacy.LegacyHomeMissing: my_utils.legacy_profilers now lives in my_utils.legacy, shipped by the "
                    "'myutils-legacy' distribution, which is not installed. Run: pip install myutils-legacy")
