"""`myutils plugins new` writes, for every kind, a package that installs and passes its own test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.scaffold import KINDS
from my_utils.core.testing.plugin_env import PluginEnv

# one component per kind; the short names avoid every built-in name
COMPONENTS = {"provider": ("scaf_provider", "metrics_provider"), "backend": ("scaf_backend", "capture_backend"),
              "rule": ("scaf_rule", "analysis_rule"), "sink": ("scaf_sink", "event_sink"), "cli": ("scaf_cli", None)}


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> tuple[PluginEnv, Path]:
    root = tmp_path_factory.mktemp("scaffold")
    for kind, (name, _) in COMPONENTS.items():
        proc = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "new", name, "--kind", kind,
                               "--dir", str(root)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    env = PluginEnv.create(tmp_path_factory.mktemp("scaffold-env"))
    env.install(*sorted(root.iterdir()))
    return env, root


def test_one_package_per_kind() -> None:
    assert set(COMPONENTS) == set(KINDS)


def test_generated_tests_pass_in_an_isolated_env(scaffolded: tuple[PluginEnv, Path]) -> None:
    env, root = scaffolded
    tests = sorted(root.glob("*/tests/test_*.py"))
    assert len(tests) == len(COMPONENTS)
    proc = env.pytest("-q", *map(str, tests), cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"{len(tests)} passed" in proc.stdout


def test_generated_components_are_listed_ok_and_import(scaffolded: tuple[PluginEnv, Path]) -> None:
    env, _ = scaffolded
    proc = env.myutils("plugins", "check", "--json")
    # the exit code also reflects the built-ins of the tree under test; only our rows matter here
    assert proc.returncode in (0, 1), proc.stderr
    rows = {(r["name"], r["kind"]): r for r in json.loads(proc.stdout)}
    for name, kind in COMPONENTS.values():
        if kind is not None:
            row = rows[(name, kind)]
            assert row["status"] == "ok" and row["distribution"] == f"myutils-ext-{name.replace('_', '-')}"
    hello = env.myutils("scaf-cli", str(Path(__file__)))
    assert hello.returncode == 0 and hello.stdout.strip().endswith(" lines")


def test_generated_code_is_lint_clean(scaffolded: tuple[PluginEnv, Path]) -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -r requirements-dev.txt)")
    _, root = scaffolded
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--line-length", "120",
                           "--select", "E,F,W,I,UP,B", str(root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
