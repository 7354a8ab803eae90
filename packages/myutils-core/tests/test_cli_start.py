"""A clean start is recorded: `myutils --help` and `plugins list` then answer without typer, and the same.

Every run is a real ``python -m my_utils.core`` with its own cache folder and plugins installed
for real (``write_distribution`` into a folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.cli.start_cache import SETTINGS_PREFIX, terminal_width
from my_utils.core.entry_point_cache import CACHE_DIR_ENV, NO_CACHE_ENV
from my_utils.core.plugin_policy import DISABLE_ENV
from my_utils.core.testing.plugin_env import write_distribution

PLUGIN = '''
from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers():
    return [PluginDescription("{command}-kv", PluginKind.METRICS_PROVIDER, "json:loads", "a provider")]


@hookimpl
def myutils_cli(app):
    import typer

    @app.command("{command}")
    def hello() -> None:
        """{doc}"""
        typer.echo("hello")
'''

BROKEN_CLI = '''
from my_utils.core.hookspecs import hookimpl


@hookimpl
def myutils_cli(app):
    raise RuntimeError("no commands today")
'''


def _plugin(site: Path, short: str, doc: str = "Say hello.", body: str = PLUGIN) -> Path:
    module = f"my_utils_ext_{short}"
    write_distribution(site, f"myutils-ext-{short}", "0.1",
                       {f"{module}/__init__.py": "", f"{module}/plugin.py": body.format(command=f"{short}-hello",
                                                                                         doc=doc)},
                       {f"ext_{short}": f"{module}.plugin"})
    return site / module / "plugin.py"


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    _plugin(folder, "starta")
    return folder


#: runs the CLI as ``python -m my_utils.core`` does and reports at exit every module it imported
#: (``-X importtime`` does not see the plugin imports, which run in a worker thread)
_MAIN = ("import atexit, runpy, sys\n"
         "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
         "sys.argv = ['myutils', *sys.argv[1:]]\n"
         "runpy.run_module('my_utils.core', run_name='__main__')\n")


def _run(site: Path, cache: Path | None, *args: str, env: Mapping[str, str] | None = None
         ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``myutils ARGS`` (always launched alike: ``sys.path`` is part of the cache's key); its output and modules."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIX)}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    if cache is None:
        environ[NO_CACHE_ENV] = "1"
    else:
        environ[CACHE_DIR_ENV] = str(cache)
    environ.update(env or {})
    proc = subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, env=environ,
                          timeout=120)
    modules: set[str] = set()
    stderr_lines = []
    for line in proc.stderr.splitlines():
        if line.startswith("MODULES "):
            modules.update(line.split()[1:])
        else:
            stderr_lines.append(line)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(stderr_lines)), modules


def test_help_is_the_same_first_from_the_record_and_without_cache(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, first_modules = _run(site, cache, "--help")
    second, second_modules = _run(site, cache, "--help")
    plain, _ = _run(site, None, "--help")
    assert "starta-hello" in first.stdout and "Say hello." in first.stdout
    assert first.stdout == second.stdout == plain.stdout
    assert "typer" in first_modules and "my_utils_ext_starta.plugin" in first_modules
    # from the record: neither typer nor any plugin is imported
    assert not {m for m in second_modules if m.split(".")[0] in ("typer", "click", "pluggy", "my_utils_ext_starta")}
    assert [p.name for p in cache.glob("cli-start-*.json")] and [p.name for p in cache.glob("entry-points-*.json")]


def test_the_help_is_typers_own(site: Path, tmp_path: Path) -> None:
    ours, _ = _run(site, tmp_path / "cache", "--help", env={"COLUMNS": "80"})
    theirs = CliRunner().invoke(build_app(), ["--help"], prog_name="myutils")  # draws 80 columns
    assert theirs.exit_code == 0
    installed_here = {line.split()[0] for line in theirs.output.split("Commands:")[1].splitlines() if line.strip()}
    ours_commands = {line.split()[0] for line in ours.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert ours_commands == installed_here | {"starta-hello"}  # the site adds one command
    assert ours.stdout.split("Commands:")[0] == theirs.output.split("Commands:")[0]


@pytest.mark.parametrize("columns", ["60", "140"])
def test_each_width_is_drawn_for_itself(site: Path, tmp_path: Path, columns: str) -> None:
    cache = tmp_path / "cache"
    _run(site, cache, "--help", env={"COLUMNS": "100"})
    first, _ = _run(site, cache, "--help", env={"COLUMNS": columns})
    recorded, modules = _run(site, cache, "--help", env={"COLUMNS": columns})
    plain, _ = _run(site, None, "--help", env={"COLUMNS": columns})
    assert first.stdout == recorded.stdout == plain.stdout
    assert "typer" not in modules
    record = json.loads(next(cache.glob("cli-start-*.json")).read_text())
    assert set(record["help"]) == {"100", columns}


@pytest.mark.parametrize("args", [["plugins", "list"], ["plugins", "list", "--json"]])
def test_list_from_the_record_is_the_same_without_typer(site: Path, tmp_path: Path, args: list[str]) -> None:
    cache = tmp_path / "cache"
    first, first_modules = _run(site, cache, *args)
    second, second_modules = _run(site, cache, *args)
    plain, _ = _run(site, None, *args)
    assert first.stdout == second.stdout == plain.stdout
    assert "typer" in first_modules and "typer" not in second_modules
    # the rows are never cached: the plugins are loaded and asked again
    assert "my_utils_ext_starta.plugin" in second_modules and "my_utils.core.plugin" in second_modules
    if args[-1] == "--json":
        assert {r["plugin"] for r in json.loads(second.stdout)} >= {"core", "ext_starta"}


def test_an_edited_command_module_is_drawn_again(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(site, cache, "--help")
    path = _plugin(site.parent / "unused", "starta", doc="Say hello again.")  # the new text, written elsewhere
    target = site / "my_utils_ext_starta" / "plugin.py"
    before = target.stat()
    target.write_text(path.read_text())
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    edited, modules = _run(site, cache, "--help")
    assert "Say hello again." in edited.stdout and "typer" in modules


def test_a_new_plugin_is_listed_at_once(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(site, cache, "--help")
    _run(site, cache, "plugins", "list")
    _plugin(site, "startb")
    helped, _ = _run(site, cache, "--help")
    listed, _ = _run(site, cache, "plugins", "list", "--json")
    assert "startb-hello" in helped.stdout
    assert "ext_startb" in {r["plugin"] for r in json.loads(listed.stdout)}


def test_a_changed_setting_is_never_answered_from_the_record(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for _ in range(2):
        shown, _ = _run(site, cache, "--help")
        hidden, _ = _run(site, cache, "--help", env={DISABLE_ENV: "ext_starta"})
        other, _ = _run(site, cache, "--help", env={"MYUTILS_EXT_STARTA_MODE": "x"})  # a plugin's own setting
        assert "starta-hello" in shown.stdout and "starta-hello" in other.stdout
        assert "starta-hello" not in hidden.stdout
    assert len(list(cache.glob("cli-start-*.json"))) == 1  # one file per environment, overwritten


def test_a_start_with_a_broken_plugin_is_not_recorded(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _plugin(site, "startbad", body=BROKEN_CLI)
    for _ in range(2):
        helped, modules = _run(site, cache, "--help")
        assert "starta-hello" in helped.stdout and "typer" in modules
        listed, modules = _run(site, cache, "plugins", "list", "--json")
        (row,) = [r for r in json.loads(listed.stdout) if r["plugin"] == "ext_startbad"]
        assert row["kind"] == "cli" and row["status"] == "BROKEN" and "no commands today" in row["reason"]
        assert "typer" in modules
    assert not list(cache.glob("cli-start-*.json"))


def test_commands_that_are_not_asked_for_help_import_no_pydantic(site: Path) -> None:
    listed, modules = _run(site, None, "plugins", "list")
    assert "starta" in listed.stdout and "typer" in modules
    assert not {m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core")}
    helped, _ = _run(site, None, "plugins", "list", "--help")
    assert "Usage: python -m my_utils.core plugins list" in helped.stdout or "Usage:" in helped.stdout
    assert "--json" in helped.stdout


def test_terminal_width_reads_columns_as_shutil_does(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    for value in ("132", "0", "-3", "wide"):
        monkeypatch.setenv("COLUMNS", value)
        assert terminal_width() == shutil.get_terminal_size().columns
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == shutil.get_terminal_size().columns
