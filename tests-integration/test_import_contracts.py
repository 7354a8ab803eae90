"""The import contracts hold: the layers of myutils-profiling and the distributions' boundaries (issue 37).

``.ci/lint_imports.py`` runs import-linter over the whole ``my_utils`` namespace with the contracts of the
root ``pyproject.toml``. The second test proves the check can fail: it adds one upward import (a format
reader importing the CLI) to a copy of the tree and expects that contract to break, naming the import.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "lint_imports.py"

pytestmark = pytest.mark.skipif(not Path(sys.executable).with_name("lint-imports").is_file(),
                                reason="import-linter is in requirements-test.txt")


def _load_script():
    spec = importlib.util.spec_from_file_location("_lint_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--config", str(REPO / "pyproject.toml"), "--no-cache"], cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=600)


def test_every_import_contract_is_kept(tmp_path: Path) -> None:
    proc = _lint(_load_script().merged_tree(tmp_path))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
    assert "myutils-profiling: interfaces > views > diagnosis" in proc.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    tree = _load_script().merged_tree(tmp_path)
    reader = tree / "my_utils" / "profiling" / "formats" / "cprofile.py"
    reader.write_text(reader.read_text() + "\nfrom my_utils.profiling.cli import app as _app  # noqa\n")
    proc = _lint(tree)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "BROKEN" in proc.stdout
    assert "my_utils.profiling.formats.cprofile -> my_utils.profiling.cli" in proc.stdout
