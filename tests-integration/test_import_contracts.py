"""The import contracts hold: the layers of myutils-profiling and the distributions' boundaries (issue 37).

``.ci/lint_imports.py`` runs import-linter over the whole ``my_utils`` namespace with the contracts of the
root ``pyproject.toml``. The second test proves the check can fail: it adds one upward import (a format
reader importing the CLI) to a copy of the tree and expects that contract to break, naming the import.

Plain ``lint-imports`` in the repository root works in the development venv through the dev-only finder
of ``tools/myutils-dev-namespace`` (installed by requirements-dev.txt); the last tests check that finder:
the whole namespace is analysed, the spec before import agrees with ``my_utils.__path__`` after it, and
an error inside the finder leaves the import to Python's own finders.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
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
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "MYUTILS_DEV_NAMESPACE": "off"},
                          capture_output=True, text=True,
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


DEV_FINDER = "_myutils_dev_namespace"
needs_dev_finder = pytest.mark.skipif(
    importlib.util.find_spec(DEV_FINDER) is None,
    reason="the dev-only finder is not installed: pip install -r requirements-dev.txt (tools/myutils-dev-namespace)")


def _portions() -> list[str]:
    """Every distribution's ``src/my_utils`` folder, from the repository (independent of any finder)."""
    return sorted(str(p) for p in REPO.glob("packages/*/src/my_utils"))


@needs_dev_finder
def test_plain_lint_imports_in_the_root_analyses_the_whole_namespace() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
    # every module of the seven distributions is in the graph, not only core's
    modules = [p for portion in _portions() for p in Path(portion).rglob("*.py") if "__pycache__" not in p.parts]
    analysed = re.search(r"Analyzed (\d+) files", proc.stdout)
    assert analysed is not None, proc.stdout[-2000:]
    assert int(analysed.group(1)) == len(modules)


@needs_dev_finder
def test_the_spec_before_import_lists_the_portions_path_has_after_it() -> None:
    code = ("import importlib.util, json\n"
            "spec = importlib.util.find_spec('my_utils')\n"
            "before = list(spec.submodule_search_locations)\n"
            "import my_utils\n"
            "print(json.dumps([before, list(my_utils.__path__), importlib.util.find_spec('json').origin]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after, json_origin = json.loads(proc.stdout)
    assert before == after
    assert sorted(before) == _portions() and len(set(before)) == len(before)
    assert json_origin.endswith("json/__init__.py")  # other names untouched


@needs_dev_finder
def test_an_error_in_the_finder_leaves_the_import_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    finder = importlib.import_module(DEV_FINDER)

    class Broken:
        @staticmethod
        def find_spec(*args: object) -> None:
            raise OSError("unreadable sys.path entry")

    assert finder.MyUtilsNamespaceFinder.find_spec("json") is None
    assert finder.MyUtilsNamespaceFinder.find_spec("my_utils") is not None
    monkeypatch.setattr(finder, "PathFinder", Broken)
    assert finder.MyUtilsNamespaceFinder.find_spec("my_utils") is None
    finder.install()  # already on sys.meta_path: not added twice
    assert sum(f is finder.MyUtilsNamespaceFinder for f in sys.meta_path) == 1
