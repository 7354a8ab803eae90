"""Import-time promise: the core, the namespace root and `myutils --help` stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "pandas", "plotly")


def _imported_modules(*args: str) -> set[str]:
    """Top-level modules a fresh interpreter imports, as reported by -X importtime."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "encodings" in names  # the parser really saw the import log
    return names


@pytest.mark.parametrize(
    "args",
    [
        ("-c", "import my_utils.core"),
        ("-c", "import my_utils"),
        ("-c", "import my_utils.core.plugins, my_utils.core.events, my_utils.core.providers"),
        ("-m", "my_utils.core", "--help"),
        ("-m", "my_utils.core", "plugins", "list"),
    ],
    ids=["core", "root", "core-modules", "cli-help", "plugins-list"],
)
def test_no_heavy_imports(args: tuple[str, ...]) -> None:
    heavy = sorted(_imported_modules(*args) & set(HEAVY))
    assert heavy == [], f"{' '.join(args)} imported {heavy}"
