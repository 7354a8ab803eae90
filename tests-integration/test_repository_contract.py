"""The repository contract: README's commands, .ci/run, and the CLI commands the README shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _readme_commands() -> list[str]:
    block = README.split("## The two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_has_exactly_two_setup_commands() -> None:
    setup_and_demo, tests = _readme_commands()
    assert "requirements-dev.txt" in setup_and_demo and "unified_metrics_demo" in setup_and_demo
    assert tests.endswith("python3 -m pytest")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    test_command = _readme_commands()[1]
    assert ci[-1] == test_command


def test_requirements_pin_torch_exactly() -> None:
    pins = [line for path in REPO.glob("**/requirements*.txt") for line in path.read_text().splitlines()
            if re.match(r"\s*torch\b", line)]
    assert pins and all(line.strip() == "torch==2.13.0" for line in pins), pins


@pytest.mark.parametrize(
    "command",
    [line.split("#")[0].strip() for line in
     README.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0].splitlines()
     if line.strip()],
)
def test_readme_cli_commands_exist(command: str) -> None:
    words = [w for w in shlex.split(command) if not w.startswith("[") and w.upper() != w]
    program, *sub = [w for w in words if not w.startswith("--")]
    module = {"myutils": "my_utils.core", "myutils-profile": "my_utils.profiling.cli"}[program]
    runner = ["-m", module] if program == "myutils" else ["-c", f"import {module} as m; m.main()"]
    proc = subprocess.run([sys.executable, *runner, *sub, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout
