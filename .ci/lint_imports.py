"""Run import-linter over the whole ``my_utils`` namespace, as one tree (issue 37).

Seven distributions share ``my_utils``, each from its own ``src/`` folder; grimp (import-linter's
graph builder) reads the folders that ``importlib.util.find_spec("my_utils")`` names, which is core's
alone unless the dev-only finder of ``tools/myutils-dev-namespace`` is installed (requirements-dev.txt
installs it, and then plain ``lint-imports`` in the root works). This works in any venv with
import-linter: it copies every distribution's ``my_utils`` Python files into one temporary tree, puts
it first on ``PYTHONPATH`` and runs ``lint-imports`` with the contracts of the root ``pyproject.toml``,
the dev finder switched off (``MYUTILS_DEV_NAMESPACE=off``) so that the copy is the only ``my_utils``
folder read. It is also how a test lints a modified copy. Exit status: lint-imports'.

Usage: ``python .ci/lint_imports.py [lint-imports options]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def merged_tree(dest: Path) -> Path:
    """``dest/my_utils`` holding the Python files of every distribution's ``src/my_utils``."""
    for src in sorted(ROOT.glob("packages/*/src/my_utils")):
        shutil.copytree(src, dest / "my_utils", dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or Path(d, n).is_dir())
                                                 or n == "__pycache__"])
    return dest


def main(argv: list[str]) -> int:
    exe = Path(sys.executable).with_name("lint-imports")
    with tempfile.TemporaryDirectory(prefix="myutils-imports-") as tmp:
        merged_tree(Path(tmp))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
                   MYUTILS_DEV_NAMESPACE="off")
        return subprocess.run([str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache", *argv],
                              cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
