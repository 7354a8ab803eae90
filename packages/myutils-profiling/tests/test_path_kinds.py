"""A path that is no input is named for what it is (issue 35, item 11).

A symbolic link that loops was "no such file or folder" and a FIFO named ``*.sqlite`` "no file matches".
Each kind of path is made for real (``os.symlink``, ``os.mkfifo``) and given to every command that reads
inputs: ``plugins run``, ``ingest`` (through its config), ``nsys summary``/``timeline``. Each must exit 2
with one line that names the path and says what it is, without waiting on the pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.safe_io import path_problem

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo: no FIFOs on this OS")

KINDS = {
    "loop": ("a symbolic link in a loop", lambda p: os.symlink(p.name, p)),
    "two-link loop": ("a symbolic link in a loop", lambda p: (os.symlink(p.name + ".b", p),
                                                             os.symlink(p.name, p.with_name(p.name + ".b")))),
    "dangling link": ("a symbolic link to 'nowhere', which does not exist", lambda p: os.symlink("nowhere", p)),
    "fifo": ("not a regular file or folder: a FIFO", os.mkfifo),
    "absent": ("no such file or folder", lambda p: None),
}
PROFILE = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def _make(kind: str, folder: Path, name: str) -> Path:
    path = folder / name
    KINDS[kind][1](path)
    return path


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_path_problem_says_what_the_path_is(kind: str, tmp_path: Path) -> None:
    path = _make(kind, tmp_path, "x.sqlite")
    assert path_problem(path).startswith(KINDS[kind][0])


def test_a_path_through_a_file_is_said(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert path_problem(tmp_path / "file" / "x.json").startswith("no such file or folder (a part of the path")


def _commands(path: Path, out: Path) -> dict[str, list[str]]:
    config = out.parent / "config.json"
    config.write_text(json.dumps({"providers": [{"provider": "torch_profiler", "input": str(path)}]}))
    return {
        "plugins run": [sys.executable, "-m", "my_utils.core", "plugins", "run", "torch_profiler", "--input",
                        str(path), "--output-dir", str(out)],
        "ingest": [*PROFILE, "ingest", "--config", str(config), "--output-dir", str(out)],
        "nsys summary": [*PROFILE, "nsys", "summary", str(path), "--json", str(out / "s.json")],
        "nsys timeline": [*PROFILE, "nsys", "timeline", str(path), "--output", str(out / "t.json")],
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["loop", "fifo", "dangling link"])
def test_every_command_names_what_the_path_is(kind: str, tmp_path: Path) -> None:
    path = _make(kind, tmp_path, "report.sqlite")
    out = tmp_path / "out"
    for name, args in _commands(path, out).items():
        res = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, (name, res.stderr)
        (line,) = res.stderr.splitlines()
        assert str(path) in line and KINDS[kind][0] in line, (name, line)
        assert "no file matches" not in line and not out.exists(), (name, line)
