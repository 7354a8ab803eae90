"""The `myutils` command line: version, plugins list/show/run, error handling."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
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


# -- plugin components and commands inside the guard --------------------------------------


class _Boom(BaseException):
    """A plugin's own BaseException subclass."""


class _KeyErrorProvider:
    name = "cli_test_keyerror"

    @classmethod
    def from_input(cls, path: Path) -> _KeyErrorProvider:
        return cls()

    def collect(self, step: int | None = None) -> list[object]:
        raise KeyError("step_time")


@pytest.fixture
def test_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """An in-process plugin with a failing provider, described options and failing commands."""

    from my_utils.core.errors import InputError
    from my_utils.core.hookspecs import hookimpl
    from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind
    from my_utils.core.plugins import get_registry, reset_registry

    module = types.ModuleType("cli_test_plugin")
    module.KeyErrorProvider = _KeyErrorProvider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cli_test_plugin", module)  # the factory's module

    def providers() -> list[PluginDescription]:
        desc = PluginDescription("cli_test_keyerror", PluginKind.METRICS_PROVIDER,
                                 "cli_test_plugin:KeyErrorProvider", "raises KeyError")
        return [
            dataclasses.replace(desc, options=(OptionSpec("scale", float, 1.0, "multiply values"),
                                               OptionSpec("unit", str, "ms", "unit of every value"),
                                               OptionSpec("columns", list, None, "columns to read"))),
            PluginDescription("cli_test_unimportable", PluginKind.METRICS_PROVIDER,
                              "cli_test_not_installed.module:Provider", "its module is not installed"),
            PluginDescription("cli test blank", PluginKind.METRICS_PROVIDER, "cli_test_plugin:KeyErrorProvider",
                              "a name with blanks is refused: listed BROKEN"),
        ]

    def cli(app: typer.Typer) -> None:
        @app.command("cli-test-input")
        def bad_input() -> None:
            raise InputError("data.csv", "line 4", "expected a number")

        @app.command("cli-test-crash")
        def crash() -> None:
            raise ZeroDivisionError("division by zero")

        @app.command("cli-test-exit")
        def own_exit() -> None:
            sys.exit(3)  # a plugin's own command may end itself so

        @app.command("cli-test-boom")
        def boom() -> None:
            raise _Boom("from the command")

    module.myutils_metrics_providers = hookimpl(providers)  # type: ignore[attr-defined]
    module.myutils_cli = hookimpl(cli)  # type: ignore[attr-defined]
    reset_registry()
    get_registry().register(module, "cli_test", "myutils-ext-cli-test", "9.9")
    yield module
    reset_registry()


OWNER = "plugin 'cli_test' (myutils-ext-cli-test 9.9)"


def test_show_prints_declared_options(test_plugin: types.ModuleType) -> None:
    result = runner.invoke(build_app(), ["plugins", "show", "cli_test_keyerror"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "  distribution: myutils-ext-cli-test 9.9" in lines
    # every declared option, in order, right under the header
    at = lines.index("  options:")
    assert lines[at + 1:] == ["    scale (float, default 1.0): multiply values",
                              "    unit (str, default 'ms'): unit of every value",
                              "    columns (list, default None): columns to read"]
    none = runner.invoke(build_app(), ["plugins", "show", "cli_test_unimportable"])
    assert none.exit_code == 0 and none.output.splitlines()[-1] == "  options:      -"


def test_a_broken_component_exits_1_naming_its_plugin(test_plugin: types.ModuleType, tmp_path: Path) -> None:
    run = ["--input", str(tmp_path), "--output-dir", str(tmp_path / "o")]
    unimportable = runner.invoke(build_app(), ["plugins", "run", "cli_test_unimportable", *run])
    assert unimportable.exit_code == 1
    assert unimportable.output == (
        f"error: metrics provider 'cli_test_unimportable' from {OWNER} cannot be imported: ModuleNotFoundError: "
        "No module named 'cli_test_not_installed' (`myutils plugins check` tests every plugin)\n")
    refused = runner.invoke(build_app(), ["plugins", "run", "cli test blank", *run])
    assert refused.exit_code == 1
    assert refused.output.startswith(f"error: metrics provider 'cli test blank' from {OWNER} is broken: hook "
                                     "myutils_metrics_providers: name 'cli test blank' must be letters")
    shown = runner.invoke(build_app(), ["plugins", "show", "cli test blank"])  # show describes, whatever the status
    assert shown.exit_code == 0 and "  status:       BROKEN (hook myutils_metrics_providers: name" in shown.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("traceback", [False, True])
def test_a_provider_bug_exits_1_naming_the_plugin(test_plugin: types.ModuleType, tmp_path: Path, traceback: bool,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    args = ["plugins", "run", "cli_test_keyerror", "--input", str(tmp_path), "--output-dir", str(tmp_path / "o")]
    result = runner.invoke(build_app(), ["--traceback", *args] if traceback else args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1] == (f"error: metrics provider 'cli_test_keyerror' from {OWNER} failed on {tmp_path}: "
                         "KeyError: 'step_time'")
    printed = result.output + capfd.readouterr().err  # the stack goes to the real stderr
    assert ("Traceback (most recent call last)" in printed) is traceback
    assert not (tmp_path / "o").exists()


def test_plugin_commands_are_guarded(test_plugin: types.ModuleType) -> None:
    bad = runner.invoke(build_app(), ["cli-test-input"])
    assert bad.exit_code == 2 and bad.output == "error: data.csv:line 4: expected a number\n"
    crash = runner.invoke(build_app(), ["cli-test-crash"])
    assert crash.exit_code == 1
    assert crash.output == f"error: command of {OWNER} failed: ZeroDivisionError: division by zero\n"


def test_a_plugin_command_may_exit_but_not_escape_the_guard(test_plugin: types.ModuleType) -> None:
    assert runner.invoke(build_app(), ["cli-test-exit"]).exit_code == 3
    boom = runner.invoke(build_app(), ["cli-test-boom"])
    assert boom.exit_code == 1
    assert boom.output == f"error: command of {OWNER} failed: _Boom: from the command\n"


@pytest.fixture
def deep_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """An installed plugin distribution whose functions end the process when called from a command."""
    import importlib

    from my_utils.core.testing.plugin_env import write_distribution

    write_distribution(tmp_path, "myutils-ext-deep", "0.2", {"my_utils_ext_deep/__init__.py": (
        "import sys\n"
        "class Boom(BaseException):\n    pass\n"
        "def exits():\n    sys.exit(0)\n"
        "def booms():\n    raise Boom('deep inside')\n"
        "def fails():\n    raise LookupError('an ordinary bug')\n")}, {"ext_deep": "my_utils_ext_deep"})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "my_utils_ext_deep", raising=False)
    return importlib.import_module("my_utils_ext_deep")


def _command_calling(target: object) -> typer.Typer:
    """A command of my_utils (guarded by exit_on_error, no owner) that calls ``target`` deep inside."""
    from my_utils.core.cli.guard import exit_on_error

    app = typer.Typer()

    @app.command()
    @exit_on_error
    def analyse(what: str) -> None:
        getattr(target, what)()

    return app


@pytest.mark.parametrize(("what", "reason"), [
    ("exits", "SystemExit: the plugin called sys.exit(0)"),
    ("booms", "Boom: deep inside"),
])
def test_sys_exit_deep_inside_a_command_is_a_plugin_failure_naming_it(deep_plugin: types.ModuleType, what: str,
                                                                      reason: str) -> None:
    result = runner.invoke(_command_calling(deep_plugin), [what])
    assert result.exit_code == 1
    assert result.output == f"error: plugin 'ext_deep' (myutils-ext-deep 0.2) failed: {reason}\n"
    ordinary = runner.invoke(_command_calling(deep_plugin), ["fails"])  # not ours to summarise: propagates
    assert isinstance(ordinary.exception, LookupError)


def test_sys_exit_from_no_plugin_still_stops_with_one_line() -> None:
    result = runner.invoke(_command_calling(sys), ["exit"])
    assert result.exit_code == 1
    assert result.output == ("error: the command was stopped by sys.exit(None) "
                             "(not raised by my_utils; run with --traceback to see where)\n")


def test_check_exits_1_on_a_broken_component(test_plugin: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    ok = runner.invoke(build_app(), ["plugins", "check", "--json"])
    rows = {r["name"]: r for r in json.loads(ok.stdout)}
    assert rows["cli_test_keyerror"]["status"] == "ok"
    # the exit code is 0 exactly when no row is BROKEN (the installed built-ins included)
    assert ok.exit_code == (1 if any(r["status"] == "BROKEN" for r in rows.values()) else 0)
    assert rows["cli_test_unimportable"]["status"] == "BROKEN"
    assert ok.exit_code == 1
    monkeypatch.delattr(test_plugin, "KeyErrorProvider")
    broken = runner.invoke(build_app(), ["plugins", "check"])
    assert broken.exit_code == 1
    assert "cli_test_keyerror (metrics_provider, myutils-ext-cli-test)" in broken.output


def test_guard_passes_deliberate_exits_through() -> None:
    from my_utils.core.cli.guard import plugin_guard

    with pytest.raises(typer.Exit), plugin_guard("someone"):
        raise typer.Exit(3)
    with pytest.raises(RuntimeError), plugin_guard(None):  # no owner: not ours to summarise
        raise RuntimeError("boom")
