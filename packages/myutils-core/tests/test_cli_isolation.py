"""Rule 4: a plugin cannot take the `myutils` CLI down (sys.exit, BaseException, stdout, hangs, huge data).

The misbehaving plugins are installed for real (``write_distribution``: modules and a
``.dist-info`` with entry points in a folder on ``PYTHONPATH``) and the CLI runs in a
subprocess, as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from my_utils.core.testing.plugin_env import write_distribution

PLUGIN = '''
from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers():
    return [PluginDescription("{name}", PluginKind.METRICS_PROVIDER, "{module}.provider:Provider", "test provider")]
'''

PROVIDER = '''
import sys
from my_utils.core.events import MetricEvent


class Provider:
    name = "{name}"

    def __init__(self, path):
        self.path = path

    @classmethod
    def from_input(cls, path):
        {from_input}
        return cls(path)

    def collect(self, step=None):
        {collect}
        return [MetricEvent(source=self.name, name="x", value=1.0, step=0)]
'''


def _provider_plugin(site: Path, short: str, *, at_import: str = "", from_input: str = "pass",
                     collect: str = "pass", hook: str = "") -> None:
    module = f"my_utils_ext_{short}"
    name = f"{short}_kv"
    plugin = PLUGIN.format(name=name, module=module)
    if hook:
        plugin = plugin.replace("    return [PluginDescription", f"    {hook}\n    return [PluginDescription")
    write_distribution(site, f"myutils-ext-{short}", "0.1", {
        f"{module}/__init__.py": "class Boom(BaseException):\n    pass\n" + at_import + "\n",
        f"{module}/plugin.py": plugin,
        f"{module}/provider.py": "from . import Boom\n" + PROVIDER.format(name=name, from_input=from_input,
                                                                            collect=collect),
    }, {f"ext_{short}": f"{module}.plugin"})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of misbehaving plugins (and one that works), installed once for the module."""
    root = tmp_path_factory.mktemp("site")
    _provider_plugin(root, "good")
    _provider_plugin(root, "hang", at_import="import time\nwhile True:\n    time.sleep(0.05)")
    _provider_plugin(root, "boom", at_import="raise Boom('at import')")
    _provider_plugin(root, "exitimport", at_import="import sys\nsys.exit(0)")
    _provider_plugin(root, "genexit", hook="raise GeneratorExit()")
    _provider_plugin(
        root, "noisy",
        at_import="import os, subprocess, sys\nprint('noisy: print at import')\nos.write(1, b'noisy: fd 1\\n')\n"
                  f"subprocess.run([{sys.executable!r}, '-c', 'print(\"noisy: child\")'])",
        hook="print('noisy: print in the hook')",
        from_input="print('noisy: print in from_input')", collect="sys.stdout.write('noisy: collect\\n')")
    _provider_plugin(root, "exits", from_input="sys.exit(0) if 'exit_from_input' in str(path) else None",
                     collect="raise Boom('in collect') if 'boom' in str(self.path) else sys.exit(3)")
    return root


@pytest.fixture(scope="module")
def huge_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plugins whose hooks return a million descriptions, or a 100 MB summary."""
    root = tmp_path_factory.mktemp("huge")
    _provider_plugin(root, "huge", hook="return [PluginDescription(f'h{i}', PluginKind.METRICS_PROVIDER, "
                                        "'m:C', 's') for i in range(10**6)]")
    _provider_plugin(root, "bigtext", hook="return [PluginDescription('big', PluginKind.METRICS_PROVIDER, 'm:C', "
                                           "'x' * 100_000_000)]")
    return root


def _myutils(site: Path, *args: str, env: Mapping[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("MYUTILS_DISABLE_PLUGINS", "MYUTILS_TRACEBACK")}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    environ["MYUTILS_PLUGIN_IMPORT_TIMEOUT"] = "1"
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "my_utils.core", *args], capture_output=True, text=True,
                          env=environ, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("noisy:")]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_version_imports_no_plugin(site: Path) -> None:
    started = time.monotonic()
    proc = _myutils(site, "--version", env={"MYUTILS_PLUGIN_IMPORT_TIMEOUT": "600"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 50  # the hanging plugin was not imported (its bound is 600 s)
    assert any(line.startswith("myutils-core ") for line in proc.stdout.splitlines())
    assert "noisy:" not in proc.stdout + proc.stderr


def test_list_reports_each_misbehaving_import_and_keeps_stdout_json(site: Path) -> None:
    proc = _myutils(site, "plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {(r["name"], r["kind"]): r for r in json.loads(proc.stdout)}  # stdout holds JSON only
    assert rows[("good_kv", "metrics_provider")]["status"] == "ok"
    assert rows[("noisy_kv", "metrics_provider")]["status"] == "ok"
    assert rows[("jsonl", "event_sink")]["status"] == "ok"
    expected = {
        "ext_hang": "PluginTimeout: import of 'my_utils_ext_hang.plugin' did not finish within 1 s "
                    "(set MYUTILS_PLUGIN_IMPORT_TIMEOUT to wait longer)",
        "ext_boom": "Boom: at import",
        "ext_exitimport": "SystemExit: the plugin called sys.exit(0)",
    }
    for plugin, reason in expected.items():
        row = rows[(plugin, "plugin")]
        assert row["status"] == "BROKEN" and row["distribution"] == f"myutils-ext-{plugin[4:]}", row
        assert row["reason"] == reason
    genexit = rows[("ext_genexit", "metrics_provider")]
    assert genexit["status"] == "BROKEN" and genexit["reason"] == "GeneratorExit: raised with no message"
    for line in ("noisy: print at import", "noisy: fd 1", "noisy: child", "noisy: print in the hook"):
        assert line in proc.stderr.splitlines()


def test_huge_hook_results_are_refused_with_the_reason(huge_site: Path) -> None:
    proc = _myutils(huge_site, "plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["plugin"]: r for r in json.loads(proc.stdout) if r["plugin"] in ("ext_huge", "ext_bigtext")}
    assert rows["ext_huge"]["status"] == "BROKEN"
    assert rows["ext_huge"]["reason"] == ("hook myutils_metrics_providers returned 1000000 descriptions; "
                                          "at most 256 are accepted")
    assert rows["ext_bigtext"]["status"] == "BROKEN"
    assert rows["ext_bigtext"]["reason"] == ("hook myutils_metrics_providers: 'big': the summary is 100000000 "
                                             "characters long; at most 2000 are accepted")
    assert len(proc.stdout) < 100_000


@pytest.mark.parametrize("args", [["--help"], ["plugins", "show", "good_kv"], ["plugins", "check", "--json"]])
def test_every_command_stays_up(site: Path, args: list[str]) -> None:
    proc = _myutils(site, *args)
    assert proc.returncode == (1 if args[1:2] == ["check"] else 0), proc.stderr  # check: BROKEN rows exit 1
    assert "Traceback" not in proc.stderr and "noisy:" not in proc.stdout
    if args[-1] == "--json":
        assert {r["name"] for r in json.loads(proc.stdout)} >= {"good_kv", "ext_hang", "ext_boom"}


@pytest.mark.parametrize(("input_name", "what"), [
    ("exit_from_input", "SystemExit: the plugin called sys.exit(0)"),
    ("plain", "SystemExit: the plugin called sys.exit(3)"),
    ("boom", "Boom: in collect"),
])
def test_a_provider_calling_sys_exit_is_a_plugin_failure(site: Path, tmp_path: Path, input_name: str,
                                                        what: str) -> None:
    data = tmp_path / input_name
    data.write_text("x")
    out = tmp_path / "out"
    proc = _myutils(site, "plugins", "run", "exits_kv", "--input", str(data), "--output-dir", str(out))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert _one_line_error(proc) == (f"error: metrics provider 'exits_kv' from plugin 'ext_exits' "
                                     f"(myutils-ext-exits 0.1) failed on {data}: {what}")
    assert proc.stdout == "" and not out.exists()


def test_a_provider_printing_keeps_stdout_for_the_result(site: Path, tmp_path: Path) -> None:
    data = tmp_path / "in.txt"
    data.write_text("x")
    proc = _myutils(site, "plugins", "run", "noisy_kv", "--input", str(data), "--output-dir", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wrote 1 metric events to {tmp_path / 'o' / 'metrics_events.jsonl'}\n"
    assert "noisy: print in from_input" in proc.stderr and "noisy: collect" in proc.stderr


def test_a_name_from_a_broken_plugin_says_which_plugins_are_broken(site: Path, tmp_path: Path) -> None:
    proc = _myutils(site, "plugins", "run", "boom_kv", "--input", str(tmp_path), "--output-dir", str(tmp_path / "o"))
    assert proc.returncode == 2
    line = _one_line_error(proc)
    assert line.startswith("error: no metrics provider named 'boom_kv' is installed")
    assert "plugin 'ext_boom' (myutils-ext-boom 0.1)" in line and "BROKEN" in line
