"""A third-party plugin package, installed into an isolated environment, is seen by `myutils`.

``PluginEnv`` (the contract kit's fixture) makes a venv that sees the my_utils the tests run
with through a ``.pth`` file, whatever the interpreter (venv, system, nox); the plugin
packages are installed into it only, so the development environment never sees them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from my_utils.core.testing.plugin_env import PluginEnv

HERE = Path(__file__).resolve().parent
PLUGINS = HERE / "plugins"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> PluginEnv:
    env = PluginEnv.create(tmp_path_factory.mktemp("plugin-venv"))
    env.install(PLUGINS / "myutils-ext-demo", PLUGINS / "myutils-ext-broken")
    return env


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
