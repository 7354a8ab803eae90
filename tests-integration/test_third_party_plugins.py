"""A third-party plugin package, installed into an isolated environment, is seen by `myutils`.

``PluginEnv`` (the contract kit's fixture) makes a venv that sees the my_utils the tests run
with through a ``.pth`` file, whatever the interpreter (venv, system, nox); the plugin
packages are installed into it only, so the development environment never sees them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from my_utils.core.testing.plugin_env import PluginEnv

HERE = Path(__file__).resolve().parent
PLUGINS = HERE / "plugins"
INSTALLED = ("myutils-ext-demo", "myutils-ext-broken", "myutils-ext-clash-a", "myutils-ext-clash-b",
             "myutils-ext-faulty")
FAULTY = "plugin 'ext_faulty' (myutils-ext-faulty 0.3.0)"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> PluginEnv:
    env = PluginEnv.create(tmp_path_factory.mktemp("plugin-venv"))
    env.install(*(PLUGINS / name for name in INSTALLED))
    return env


def _rows(env: PluginEnv, *args: str, extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    proc = env.myutils("plugins", *(args or ("list",)), "--json", env=extra)
    assert proc.returncode in (0, 1), proc.stderr
    rows: list[dict[str, str]] = json.loads(proc.stdout)
    return rows


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    return proc.stderr.strip()


def test_plugins_list_shows_third_party_and_broken(plugin_env: PluginEnv) -> None:
    proc = plugin_env.myutils("plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {"name", "kind", "distribution", "version", "status"} <= set(rows[0])
    by_name = {(r["name"], r["kind"]): r for r in rows}
    demo = by_name[("demo_kv", "metrics_provider")]
    assert demo["status"] == "ok"
    assert demo["distribution"] == "myutils-ext-demo" and demo["version"] == "1.2.3"
    broken_import = by_name[("ext_broken_import", "plugin")]
    assert broken_import["status"] == "BROKEN"
    assert broken_import["distribution"] == "myutils-ext-broken"
    assert "my_utils_ext_missing_dependency" in broken_import["reason"]
    broken_hook = by_name[("ext_broken_hook", "metrics_provider")]
    assert broken_hook["status"] == "BROKEN" and "demo failure inside the hook" in broken_hook["reason"]
    # everything else still works: core's own component is listed as ok
    assert by_name[("jsonl", "event_sink")]["status"] == "ok"


def test_plugins_table_and_cli_extension(plugin_env: PluginEnv) -> None:
    table = plugin_env.myutils("plugins", "list")
    assert table.returncode == 0
    header = table.stdout.splitlines()[0].split()
    assert header == ["name", "kind", "distribution", "version", "status"]
    assert any(line.startswith("demo_kv") and " ok" in line for line in table.stdout.splitlines())
    hello = plugin_env.myutils("demo-hello", "--name", "ranks")
    assert hello.returncode == 0, hello.stderr
    assert "hello ranks from myutils-ext-demo" in hello.stdout


def test_plugins_run_writes_events(plugin_env: PluginEnv, tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.kv").write_text("loss=0.5\nlr=0.001\n")
    (data / "b.kv").write_text("tokens_per_s=1234\n")
    out = tmp_path / "out"
    proc = plugin_env.myutils("plugins", "run", "demo_kv", "--input", str(data), "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = (out / "metrics_events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert sorted((e["name"], e["value"]) for e in events) == [
        ("loss", 0.5), ("lr", 0.001), ("tokens_per_s", 1234.0)
    ]
    assert all(e["source"] == "demo_kv" and e["schema_version"] == 1 for e in events)


def test_plugins_run_bad_input_exits_2_without_output(plugin_env: PluginEnv, tmp_path: Path) -> None:
    bad = tmp_path / "bad.kv"
    bad.write_text("loss=0.5\nthis line is garbage\n")
    out = tmp_path / "out"
    proc = plugin_env.myutils("plugins", "run", "demo_kv", "--input", str(bad), "--output-dir", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {bad}:line 2: expected NAME=NUMBER"
    assert "Traceback" not in proc.stderr
    assert not (out / "metrics_events.jsonl").exists()

    wrong = tmp_path / "notes.txt"
    wrong.write_text("x")
    proc = plugin_env.myutils("plugins", "run", "demo_kv", "--input", str(wrong), "--output-dir", str(out))
    assert proc.returncode == 2 and "expected a .kv file" in proc.stderr


def test_plugins_run_unknown_provider_lists_installed(plugin_env: PluginEnv, tmp_path: Path) -> None:
    proc = plugin_env.myutils("plugins", "run", "nope", "--input", str(tmp_path), "--output-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "no metrics provider named 'nope'" in proc.stderr and "demo_kv" in proc.stderr


def test_disable_plugins_by_name(plugin_env: PluginEnv) -> None:
    env = dict(os.environ, MYUTILS_DISABLE_PLUGINS="ext_broken_import, demo_kv")
    rows = json.loads(plugin_env.myutils("plugins", "list", "--json", env=env).stdout)
    status = {r["name"]: r["status"] for r in rows}
    assert status["ext_broken_import"] == "disabled"
    assert status["demo_kv"] == "disabled"
    assert status["ext_broken_hook"] == "BROKEN"


def test_plugins_show(plugin_env: PluginEnv) -> None:
    proc = plugin_env.myutils("plugins", "show", "demo_kv")
    assert proc.returncode == 0
    assert "my_utils_ext_demo.provider:KeyValueProvider" in proc.stdout
    assert "myutils-ext-demo 1.2.3" in proc.stdout
    missing = plugin_env.myutils("plugins", "show", "absent_plugin")
    assert missing.returncode == 2 and "no plugin named 'absent_plugin'" in missing.stderr


def test_listing_does_not_import_provider_code(plugin_env: PluginEnv) -> None:
    code = (
        "import sys; from my_utils.core.plugins import get_registry; get_registry().records(); "
        "print(sorted(m for m in sys.modules if m.startswith('my_utils_ext_demo')))"
    )
    proc = plugin_env.run("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['my_utils_ext_demo', 'my_utils_ext_demo.plugin']"


# -- the registry fails loudly, once, by name (issue 9) -----------------------------------


def test_a_str_result_is_one_broken_row(plugin_env: PluginEnv) -> None:
    rows = [r for r in _rows(plugin_env) if r["plugin"] == "ext_broken_str"]
    assert len(rows) == 1
    assert rows[0]["status"] == "BROKEN" and rows[0]["distribution"] == "myutils-ext-broken"
    assert rows[0]["reason"] == "hook myutils_metrics_providers must return a list of PluginDescription, got str"


def test_a_misspelled_hook_is_refused_by_name(plugin_env: PluginEnv) -> None:
    rows = _rows(plugin_env)
    (row,) = [r for r in rows if r["plugin"] == "ext_broken_misspelled"]
    assert row["status"] == "BROKEN"
    assert "unknown hook 'myutils_capture_backend' (did you mean 'myutils_capture_backends'?)" in row["reason"]
    assert not any(r["name"] == "never_seen" for r in rows)


def test_wrong_hook_arguments_keep_pluggys_whole_reason(plugin_env: PluginEnv) -> None:
    (row,) = [r for r in _rows(plugin_env) if r["plugin"] == "ext_broken_args"]
    assert row["status"] == "BROKEN" and "\n" not in row["reason"]
    assert row["reason"].startswith("PluginValidationError: Plugin 'ext_broken_args' for hook 'myutils_metrics_providers'")
    assert "Argument(s) {'config'} are declared in the hookimpl but can not be found in the hookspec" in row["reason"]


def test_every_builtin_stays_ok_with_broken_packages_installed(plugin_env: PluginEnv) -> None:
    from my_utils.core.plugin_policy import is_builtin
    from my_utils.core.plugins import PluginRegistry

    # the development environment (no third-party plugin) is the reference
    expected = {(r.name, r.kind) for r in PluginRegistry(disabled=()).records()
                if is_builtin(r.distribution) and r.status.value == "ok"}
    assert ("mytimer", "metrics_provider") in expected and ("jsonl", "event_sink") in expected
    rows = _rows(plugin_env)
    builtin_rows = {(r["name"], r["kind"]): r["status"] for r in rows if is_builtin(r["distribution"])}
    assert {k: builtin_rows.get(k) for k in expected} == dict.fromkeys(expected, "ok")
    assert sum(r["status"] == "BROKEN" for r in rows) >= 8


def test_a_builtin_is_never_displaced(plugin_env: PluginEnv) -> None:
    rows = [r for r in _rows(plugin_env) if r["name"] == "mytimer"]
    by_dist = {r["distribution"]: r for r in rows}
    assert by_dist["myutils-profiling"]["status"] == "ok"
    intruder = by_dist["myutils-ext-clash-a"]
    assert intruder["status"] == "BROKEN"
    assert intruder["reason"].startswith(
        "name clash: 'mytimer' is the built-in metrics provider of myutils-profiling, which is kept")
    shown = plugin_env.myutils("plugins", "show", "mytimer")
    assert shown.returncode == 0 and "my_utils.profiling.formats.mytimer:MyTimerMetricsProvider" in shown.stdout
    assert "myutils-ext-clash-a" in shown.stdout


def test_a_clash_between_third_parties_is_refused_until_one_is_disabled(
    plugin_env: PluginEnv, tmp_path: Path
) -> None:
    twins = {r["distribution"]: r for r in _rows(plugin_env) if r["name"] == "kv_twin"}
    assert set(twins) == {"myutils-ext-clash-a", "myutils-ext-clash-b"}
    assert all(r["status"] == "BROKEN" and r["reason"].startswith("name clash") for r in twins.values())
    data = tmp_path / "a.kv"
    data.write_text("loss=1.5\n")
    args = ("plugins", "run", "kv_twin", "--input", str(data), "--output-dir", str(tmp_path / "out"))
    refused = plugin_env.myutils(*args)
    assert refused.returncode == 2
    line = _one_line_error(refused)
    assert "myutils-ext-clash-a" in line and "myutils-ext-clash-b" in line
    assert "never picks one by installation order" in line and "MYUTILS_DISABLE_PLUGINS=" in line
    assert not (tmp_path / "out").exists()
    for off, kept in (("ext_clash_b:kv_twin", "myutils-ext-clash-a"), ("myutils-ext-clash-a:kv_twin",
                                                                          "myutils-ext-clash-b")):
        env = {"MYUTILS_DISABLE_PLUGINS": off}
        ran = plugin_env.myutils(*args, env=env)
        assert ran.returncode == 0, ran.stderr
        status = {r["distribution"]: r["status"] for r in _rows(plugin_env, extra=env) if r["name"] == "kv_twin"}
        assert status[kept] == "ok" and "disabled" in status.values()


def test_an_unimportable_factory_is_listed_ok_checked_broken_and_fails_by_name(
    plugin_env: PluginEnv, tmp_path: Path
) -> None:
    listed = {r["name"]: r for r in _rows(plugin_env)}
    assert listed["faulty_import"]["status"] == "ok"  # listing imports nothing behind a component
    check = plugin_env.myutils("plugins", "check", "--json")
    assert check.returncode == 1
    checked = {(r["name"], r["distribution"]): r for r in json.loads(check.stdout)}
    bad = checked[("faulty_import", "myutils-ext-faulty")]
    assert bad["status"] == "BROKEN" and "No module named 'my_utils_ext_not_installed'" in bad["reason"]
    assert checked[("mytimer", "myutils-profiling")]["status"] == "ok"
    assert checked[("demo_kv", "myutils-ext-demo")]["status"] == "ok"
    run = plugin_env.myutils("plugins", "run", "faulty_import", "--input", str(tmp_path),
                             "--output-dir", str(tmp_path / "out"))
    assert run.returncode == 1
    line = _one_line_error(run)
    assert f"metrics provider 'faulty_import' from {FAULTY} cannot be imported" in line
    assert "ModuleNotFoundError: No module named 'my_utils_ext_not_installed'" in line


@pytest.mark.parametrize(
    ("name", "options", "failure"),
    [
        ("faulty_keyerror", (), "KeyError: 'step_time'"),
        ("faulty_json", (), "JSONDecodeError: Expecting property name enclosed in double quotes"),
        # a TypeError inside from_input is the plugin's bug, not "options rejected"
        ("faulty_typeerror", ("--option", "scale=2"), "TypeError: unsupported operand type(s)"),
    ],
)
def test_a_provider_bug_is_one_line_naming_the_plugin(
    plugin_env: PluginEnv, tmp_path: Path, name: str, options: tuple[str, ...], failure: str
) -> None:
    out = tmp_path / "out"
    proc = plugin_env.myutils("plugins", "run", name, "--input", str(tmp_path), "--output-dir", str(out), *options)
    assert proc.returncode == 1
    line = _one_line_error(proc)
    assert line.startswith(f"error: metrics provider {name!r} from {FAULTY} failed"), line
    assert failure in line
    assert "rejected" not in line
    assert not out.exists()


def test_a_real_option_mismatch_is_bad_usage(plugin_env: PluginEnv, tmp_path: Path) -> None:
    proc = plugin_env.myutils("plugins", "run", "faulty_typeerror", "--input", str(tmp_path),
                              "--output-dir", str(tmp_path / "out"), "--option", "nope=1")
    assert proc.returncode == 2
    assert "nope" in _one_line_error(proc)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_traceback_on_request(plugin_env: PluginEnv, tmp_path: Path, how: str) -> None:
    args = ["plugins", "run", "faulty_keyerror", "--input", str(tmp_path), "--output-dir", str(tmp_path / "o")]
    proc = (plugin_env.myutils("--traceback", *args) if how == "flag"
            else plugin_env.myutils(*args, env={"MYUTILS_TRACEBACK": "1"}))
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr and 'return {}["step_time"]' in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: metrics provider 'faulty_keyerror'")


def test_plugin_commands_run_inside_the_guard(plugin_env: PluginEnv) -> None:
    bad_input = plugin_env.myutils("faulty-input", "data.txt")
    assert bad_input.returncode == 2
    assert _one_line_error(bad_input) == "error: data.txt:line 3: expected a number"
    crash = plugin_env.myutils("faulty-crash")
    assert crash.returncode == 1
    assert _one_line_error(crash) == f"error: command of {FAULTY} failed: KeyError: 'missing_column'"


def test_a_disabled_component_says_so(plugin_env: PluginEnv, tmp_path: Path) -> None:
    env = {"MYUTILS_DISABLE_PLUGINS": "demo_kv"}
    proc = plugin_env.myutils("plugins", "run", "demo_kv", "--input", str(tmp_path), "--output-dir",
                              str(tmp_path / "o"), env=env)
    assert proc.returncode == 2
    assert _one_line_error(proc) == ("error: metrics provider 'demo_kv' is installed but disabled by "
                                     "MYUTILS_DISABLE_PLUGINS (entry 'demo_kv'); remove that entry to use it")


def test_a_command_typer_cannot_build_is_dropped_not_fatal(plugin_env: PluginEnv) -> None:
    (row,) = [r for r in _rows(plugin_env) if r["plugin"] == "ext_broken_signature"]
    assert row["kind"] == "cli" and row["status"] == "BROKEN"
    assert "a signature cannot be evaluated: NameError: name 'typer' is not defined" in row["reason"]
    helped = plugin_env.myutils("--help")
    assert helped.returncode == 0 and "demo-hello" in helped.stdout and "broken-signature" not in helped.stdout


def _run_on_a_terminal(env: PluginEnv, *args: str) -> tuple[int, str]:
    """Run ``myutils ARGS`` with stderr on a pseudo-terminal; return the exit code and what it drew."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(env.python), "-m", "my_utils.core", *args], stdout=subprocess.PIPE,
                            stderr=follower, env=env.environ(), text=True)
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    proc.communicate(timeout=60)
    return proc.returncode, drawn.decode("utf-8", "replace")


@pytest.mark.slow
def test_plugins_run_shows_progress_on_a_terminal_unless_quiet(plugin_env: PluginEnv, tmp_path: Path) -> None:
    args = ("plugins", "run", "demo_slow", "--input", str(tmp_path), "--output-dir", str(tmp_path / "o"),
            "--option", "seconds=1.6")
    code, drawn = _run_on_a_terminal(plugin_env, *args)
    assert code == 0
    assert "demo_slow" in drawn and "\r\x1b[K" in drawn  # drawn, then erased at the end
    code, drawn = _run_on_a_terminal(plugin_env, *args, "--quiet")
    assert code == 0 and drawn == ""
    piped = plugin_env.myutils(*args)  # not a terminal: nothing on stderr
    assert piped.returncode == 0 and piped.stderr == ""


def test_a_typeerror_inside_a_backend_constructor_is_not_options_rejected(plugin_env: PluginEnv) -> None:
    code = (
        "from my_utils.tracing.capture import ProfileManager\n"
        "cfg = {'enabled': True, 'features': {'capture': {'enabled': True, 'backend': 'faulty_backend',"
        " 'backend_options': {'output_dir': 'x'}}}}\n"
        "ProfileManager(cfg).create_backend()\n"
    )
    proc = plugin_env.run("-c", code)
    assert proc.returncode == 1
    assert "TypeError" in proc.stderr and "rejected" not in proc.stderr
