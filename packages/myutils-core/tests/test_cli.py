"""The `myutils` command line: version, plugins list/show/run, error handling."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.cli.app import installed_distributions

runner = CliRunner()


def test_version_lists_every_installed_distribution() -> None:
    result = runner.invoke(build_app(), ["--version"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines == [f"{name} {version}" for name, version in installed_distributions()]
    assert any(line.startswith("myutils-core ") for line in lines)


def test_help_lists_core_and_plugin_commands() -> None:
    result = runner.invoke(build_app(), ["--help"])
    assert result.exit_code == 0
    assert "plugins" in result.output
    # myutils-profiling adds `profile` through the myutils_cli hook (absent in isolated runs)
    profiling = any(name == "myutils-profiling" for name, _ in installed_distributions())
    commands = result.output.split("Commands:", 1)[1]
    assert (re.search(r"^\s+profile\s", commands, re.MULTILINE) is not None) is profiling


def test_plugins_list_json_shape() -> None:
    result = runner.invoke(build_app(), ["plugins", "list", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.output)
    assert rows and all({"name", "kind", "distribution", "version", "status"} <= set(r) for r in rows)
    assert {"name": "jsonl", "kind": "event_sink", "status": "ok"}.items() <= next(
        r for r in rows if r["name"] == "jsonl"
    ).items()


def test_plugins_run_missing_input_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "my_utils.core", "plugins", "run", "jsonl", "--input",
         str(tmp_path / "absent"), "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True,
    )
    # jsonl is an event sink, not a provider: the error says what is installed instead
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: no metrics provider named 'jsonl'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["plugins"], []])
def test_groups_without_command_show_help(args: list[str]) -> None:
    result = runner.invoke(build_app(), args)
    assert "Usage:" in result.output


def test_plugins_run_rejects_malformed_option(tmp_path: Path) -> None:
    result = runner.invoke(build_app(), ["plugins", "run", "jsonl", "--input", str(tmp_path),
                                         "--output-dir", str(tmp_path / "o"), "--option", "no-equals"])
    assert result.exit_code == 2
    assert "--option: expected KEY=VALUE with a Python identifier as KEY, got 'no-equals'" in result.output


def test_option_values_are_json_or_text() -> None:
    from my_utils.core.cli.plugins_cmd import _parse_options

    assert _parse_options(["rank=3", "name=run a", "cols={\"a\": 1}"]) == {"rank": 3, "name": "run a", "cols": {"a": 1}}
