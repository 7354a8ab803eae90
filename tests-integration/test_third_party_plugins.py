"""A third-party plugin package, installed into a fresh venv, is seen by `myutils`.

The venv uses --system-site-packages so it sees the my_utils distributions of the
development environment; the plugin packages are built and installed into the venv only
(so the development environment never sees them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLUGINS = HERE / "plugins"


def _run(python: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "my_utils.core", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plugin-venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(root)
    python = root / "bin" / "python"
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    # The base interpreter's pip installs into the venv's site-packages; no network, no
    # build isolation (hatchling comes from the dev environment).
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", target,
         str(PLUGINS / "myutils-ext-demo"), str(PLUGINS / "myutils-ext-broken")],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return python


def test_plugins_list_shows_third_party_and_broken(plugin_venv: Path) -> None:
    proc = _run(plugin_venv, "plugins", "list", "--json")
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


def test_plugins_table_and_cli_extension(plugin_venv: Path) -> None:
    table = _run(plugin_venv, "plugins", "list")
    assert table.returncode == 0
    header = table.stdout.splitlines()[0].split()
    assert header == ["name", "kind", "distribution", "version", "status"]
    assert any(line.startswith("demo_kv") and " ok" in line for line in table.stdout.splitlines())
    hello = _run(plugin_venv, "demo-hello", "--name", "ranks")
    assert hello.returncode == 0, hello.stderr
    assert "hello ranks from myutils-ext-demo" in hello.stdout


def test_plugins_run_writes_events(plugin_venv: Path, tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.kv").write_text("loss=0.5\nlr=0.001\n")
    (data / "b.kv").write_text("tokens_per_s=1234\n")
    out = tmp_path / "out"
    proc = _run(plugin_venv, "plugins", "run", "demo_kv", "--input", str(data), "--output-dir", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = (out / "metrics_events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert sorted((e["name"], e["value"]) for e in events) == [
        ("loss", 0.5), ("lr", 0.001), ("tokens_per_s", 1234.0)
    ]
    assert all(e["source"] == "demo_kv" and e["schema_version"] == 1 for e in events)


def test_plugins_run_bad_input_exits_2_without_output(plugin_venv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.kv"
    bad.write_text("loss=0.5\nthis line is garbage\n")
    out = tmp_path / "out"
    proc = _run(plugin_venv, "plugins", "run", "demo_kv", "--input", str(bad), "--output-dir", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {bad}:line 2: expected NAME=NUMBER"
    assert "Traceback" not in proc.stderr
    assert not (out / "metrics_events.jsonl").exists()

    wrong = tmp_path / "notes.txt"
    wrong.write_text("x")
    proc = _run(plugin_venv, "plugins", "run", "demo_kv", "--input", str(wrong), "--output-dir", str(out))
    assert proc.returncode == 2 and "expected a .kv file" in proc.stderr


def test_plugins_run_unknown_provider_lists_installed(plugin_venv: Path, tmp_path: Path) -> None:
    proc = _run(plugin_venv, "plugins", "run", "nope", "--input", str(tmp_path), "--output-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "no metrics provider named 'nope'" in proc.stderr and "demo_kv" in proc.stderr


def test_disable_plugins_by_name(plugin_venv: Path) -> None:
    env = dict(os.environ, MYUTILS_DISABLE_PLUGINS="ext_broken_import, demo_kv")
    rows = json.loads(_run(plugin_venv, "plugins", "list", "--json", env=env).stdout)
    status = {r["name"]: r["status"] for r in rows}
    assert status["ext_broken_import"] == "disabled"
    assert status["demo_kv"] == "disabled"
    assert status["ext_broken_hook"] == "BROKEN"


def test_plugins_show(plugin_venv: Path) -> None:
    proc = _run(plugin_venv, "plugins", "show", "demo_kv")
    assert proc.returncode == 0
    assert "my_utils_ext_demo.provider:KeyValueProvider" in proc.stdout
    assert "myutils-ext-demo 1.2.3" in proc.stdout
    missing = _run(plugin_venv, "plugins", "show", "absent_plugin")
    assert missing.returncode == 2 and "no plugin named 'absent_plugin'" in missing.stderr


def test_listing_does_not_import_provider_code(plugin_venv: Path) -> None:
    code = (
        "import sys; from my_utils.core.plugins import get_registry; get_registry().records(); "
        "print(sorted(m for m in sys.modules if m.startswith('my_utils_ext_demo')))"
    )
    proc = subprocess.run([str(plugin_venv), "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "['my_utils_ext_demo', 'my_utils_ext_demo.plugin']"
