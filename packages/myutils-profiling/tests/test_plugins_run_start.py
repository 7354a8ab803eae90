"""``myutils plugins run torch_profiler``: what its start imports, and that the light coercion changes nothing.

typer 0.29 coerces every ``str``/``Path`` parameter through a pydantic ``TypeAdapter`` (pydantic's
import alone was ~0.1 s of CPU, a third of the command's fixed cost); ``cli.app.light_parameters``
coerces argv's text the same way without it. ``plugins run`` also leaves the plugins' own commands
unbuilt (``cli.app.needs_plugin_commands``). Every run here is a real ``myutils`` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: the console script, optionally with ``cli.app.light_parameters`` turned off (typer's own coercion
#: for every parameter); reports the modules imported at exit
_MAIN = ("import atexit, sys\n"
         "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
         "if sys.argv[1] == 'full':\n"
         "    import my_utils.core.cli.app as app\n"
         "    app.light_parameters = lambda command: None\n"
         "sys.argv = ['myutils', *sys.argv[2:]]\n"
         "from my_utils.core.cli.entry import main\n"
         "main()\n")


def _myutils(mode: str, *args: str, cwd: Path) -> tuple[int, str, str, set[str]]:
    """Exit code, stdout, stderr (module report removed) and imported modules of one ``myutils`` run."""
    env = {**os.environ, "MYUTILS_NO_CACHE": "1"}
    proc = subprocess.run([sys.executable, "-c", _MAIN, mode, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)
    modules: set[str] = set()
    err = []
    for line in proc.stderr.splitlines():
        if line.startswith("MODULES "):
            modules.update(line.split()[1:])
        else:
            err.append(line)
    return proc.returncode, proc.stdout, "\n".join(err), modules


def test_plugins_run_imports_no_pydantic_numpy_pandas_or_pools(real_fixtures: Any, tmp_path: Path) -> None:
    trace = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    code, out, err, modules = _myutils("light", "plugins", "run", "torch_profiler", "--input", str(trace),
                                       "--output-dir", str(tmp_path / "out"), "-q", cwd=tmp_path)
    assert code == 0, err
    assert "metric events" in out and (tmp_path / "out" / "metrics_events.jsonl").is_file()
    heavy = {m.split(".")[0] for m in modules} & {"pydantic", "pydantic_core", "numpy", "pandas", "torch", "plotly"}
    assert not heavy, heavy
    # one file is read in this process: no pool machinery is imported for it
    assert not {"multiprocessing", "concurrent.futures.process", "my_utils.profiling.formats.parallel"} & modules
    # nor the plugins' own commands, which `plugins run` does not serve
    assert "my_utils.profiling.cli" not in modules and "my_utils.profiling.provider_plugin" not in modules


def test_plugins_run_after_the_traceback_flag_and_other_commands_keep_the_plugins_commands(
        real_fixtures: Any, tmp_path: Path) -> None:
    trace = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    code, out, err, modules = _myutils("light", "--traceback", "plugins", "run", "torch_profiler", "--input",
                                       str(trace), "--output-dir", str(tmp_path / "out"), "-q", cwd=tmp_path)
    assert code == 0 and "metric events" in out, err
    assert "my_utils.profiling.cli" not in modules
    code, out, err, modules = _myutils("light", "profile", "analyze", "--help", cwd=tmp_path)  # a plugin's command
    assert code == 0 and "Usage:" in out, err
    assert "my_utils.profiling.cli" in modules


@pytest.mark.parametrize("args", [
    ["--input", "{trace}", "--output-dir", "out", "-q"],  # relative output folder
    ["--input", "{trace}", "--output-dir", "out", "-o", "rank=3", "--option", "executor=serial", "-q"],
    ["--input", "missing.json", "--output-dir", "out", "-q"],  # exit 2: no such file
    ["--input", "{trace}", "-q"],  # --output-dir missing: click's usage error
    ["--input", "", "--output-dir", "out", "-q"],  # the empty path is '.', a folder of no traces
    ["--input", "{trace}", "--output-dir", "out", "-o"],  # an option without its value
    ["--input", "{trace}", "--output-dir", "out", "-o", "not an identifier=1", "-q"],
])
def test_plugins_run_light_coercion_answers_as_typers_own(args: list[str], real_fixtures: Any,
                                                          tmp_path: Path) -> None:
    trace = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    argv = ["plugins", "run", "torch_profiler", *(a.format(trace=trace) for a in args)]
    answers = []
    for mode in ("light", "full"):
        folder = tmp_path / mode
        folder.mkdir()
        code, out, err, modules = _myutils(mode, *argv, cwd=folder)
        written = folder / "out" / "metrics_events.jsonl"
        answers.append((code, out, err, written.read_bytes() if written.exists() else None))
        if mode == "light" and code == 0:
            assert "pydantic" not in modules
    assert answers[0] == answers[1]


def _answers(argv: list[str], light: bool, tmp_path: Path) -> tuple[int | None, str, str]:
    """A small typer app with every kind of ``str``/``Path``/``list[str]`` option, run on ``argv``."""
    import typer
    import typer.testing

    from my_utils.core.cli.app import light_parameters

    app = typer.Typer()

    @app.command()
    def cmd(name: str = typer.Argument(...),
            existing: Path = typer.Option(None, "--existing", exists=True, dir_okay=False),
            resolved: Path = typer.Option(Path("."), "--resolved", resolve_path=True),
            folder: Path = typer.Option(None, "--folder", file_okay=False, writable=True),
            dash: Path = typer.Option(None, "--dash", allow_dash=True, exists=True),
            many: list[str] = typer.Option([], "--many"),
            paths: list[Path] = typer.Option([], "--path")) -> None:
        typer.echo(repr((name, existing, resolved, folder, dash, many, paths)))

    @app.command()
    def other() -> None:  # a second command, so that `cmd` is a subcommand
        pass

    command = typer.main.get_command(app)
    if light:
        light_parameters(command)
    built = typer.testing._get_command
    typer.testing._get_command = lambda _app: command  # the runner builds the app itself otherwise
    try:
        result = typer.testing.CliRunner().invoke(app, argv)
    finally:
        typer.testing._get_command = built
    return result.exit_code, result.output + getattr(result, "stderr", ""), str(result.exception)


@pytest.mark.parametrize("argv", [
    ["cmd", "n"],
    ["cmd", "n", "--existing", "{file}", "--resolved", "a//b/../c", "--many", "x", "--many", ""],
    ["cmd", "n", "--existing", "{dir}"],  # a folder where a file is asked
    ["cmd", "n", "--existing", "{dir}//nothing.json"],  # quoted as given
    ["cmd", "n", "--folder", "{file}", "--path", "a", "--path", "b//c"],
    ["cmd", "n", "--dash", "-"],
    ["cmd", "n", "--existing", ""],  # Path('') is '.', a folder
    ["cmd", "n", "--existing", "{file}/"],  # Path drops the slash: typer's own coercion decides
    ["cmd", "n", "--existing", "./f.json", "--folder", "sub"],
    ["cmd"],
])
def test_light_coercion_answers_as_typers_own_for_every_path_check(argv: list[str], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.json").write_text("{}")
    argv = [a.format(file=tmp_path / "f.json", dir=tmp_path) for a in argv]
    assert _answers(argv, True, tmp_path) == _answers(argv, False, tmp_path)
