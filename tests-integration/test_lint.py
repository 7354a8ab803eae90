"""ruff and mypy stay clean over the whole tree (STYLE.md: mypy only gets stricter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MEMBERS = ["tracing", "hooks", "distributed", "memory", "profiling", "legacy"]

pytestmark = pytest.mark.slow


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff() -> None:
    pytest.importorskip("ruff", reason="ruff is in requirements-test.txt")
    proc = _run("ruff", "check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_mypy_over_the_namespace_packages() -> None:
    pytest.importorskip("mypy", reason="mypy is in requirements-test.txt")
    # never `-p my_utils.core`: it is part of `-p my_utils` and would be a duplicate module
    packages = [arg for member in MEMBERS for arg in ("-p", f"my_utils.{member}")]
    proc = _run("mypy", "--no-incremental", "-p", "my_utils", *packages)
    assert proc.returncode == 0, proc.stdout[-4000:]
