"""docs/plugins.md runs as written: its example packages are installed and tested, its
commands print what it shows, and every hook is documented and exercised (a meta-test)."""

from __future__ import annotations

import ast
import itertools
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

import pytest

from my_utils.core import hookspecs
from my_utils.core.testing.plugin_env import PluginEnv

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "plugins.md"
TEST_PACKAGES = REPO / "tests-integration" / "plugins"
FILE_BLOCK = re.compile(r"```\w+\n# file: (\S+)\n(.*?)```", re.S)
CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.S)
HOOKS = sorted(name for name in vars(hookspecs) if name.startswith("myutils_"))
KIND_SECTIONS = ("Metrics providers", "Capture backends", "Analysis rules", "Event sinks", "Commands")


def _guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _write_examples(root: Path) -> dict[str, str]:
    files = {path: body for path, body in FILE_BLOCK.findall(_guide())}
    for relative, body in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    return files


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[PluginEnv, Path]:
    root = tmp_path_factory.mktemp("docs-examples")
    _write_examples(root)
    env = PluginEnv.create(tmp_path_factory.mktemp("docs-env"))
    env.install(*sorted(p.parent for p in root.glob("*/pyproject.toml")))
    return env, root


def test_every_example_package_is_complete_and_its_tests_pass(docs_env: tuple[PluginEnv, Path]) -> None:
    env, root = docs_env
    packages = sorted(p.parent.name for p in root.glob("*/pyproject.toml"))
    assert packages == ["myutils-ext-csvsink", "myutils-ext-foolog", "myutils-ext-hello",
                        "myutils-ext-slowsteps", "myutils-ext-stamp"]
    tests = sorted(root.glob("*/tests/test_*.py"))
    assert sorted({t.parent.parent.name for t in tests}) == packages  # every example is tested
    proc = env.pytest("-q", *map(str, tests), cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    count = sum(t.read_text().count("\ndef test_") for t in tests)
    assert f"{count} passed" in proc.stdout


def test_the_commands_shown_print_what_the_guide_says(docs_env: tuple[PluginEnv, Path]) -> None:
    env, root = docs_env
    commands = 0
    for block in CONSOLE_BLOCK.findall(_guide()):
        lines = block.strip().splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("$ ")] + [len(lines)]
        for begin, end in itertools.pairwise(starts):
            argv = shlex.split(lines[begin][2:])
            assert argv[0] == "myutils"
            proc = env.myutils(*argv[1:], cwd=root)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.splitlines() == lines[begin + 1:end]
            commands += 1
    assert commands >= 2


def test_every_example_component_is_listed_and_imports(docs_env: tuple[PluginEnv, Path]) -> None:
    import json

    env, _ = docs_env
    proc = env.myutils("plugins", "check", "--json")
    # the exit code also reflects the built-ins of the tree under test; only our rows matter here
    assert proc.returncode in (0, 1), proc.stderr
    rows = {(r["name"], r["kind"]): r for r in json.loads(proc.stdout)}
    for key, dist in {("foo_log", "metrics_provider"): "myutils-ext-foolog",
                      ("stamp", "capture_backend"): "myutils-ext-stamp",
                      ("slow_steps", "analysis_rule"): "myutils-ext-slowsteps",
                      ("csv", "event_sink"): "myutils-ext-csvsink"}.items():
        assert rows[key]["status"] == "ok" and rows[key]["distribution"] == dist
    shown = env.myutils("plugins", "show", "foo_log")
    assert "    unit (str, default 'ms'): unit of every value" in shown.stdout


def test_every_hook_is_documented_and_exercised_by_a_test_package(tmp_path: Path) -> None:
    guide = _guide()
    examples = _write_examples(tmp_path)
    implemented_in_docs = _implemented_hooks(body for path, body in examples.items() if path.endswith(".py"))
    implemented_in_tests = _implemented_hooks(p.read_text() for p in TEST_PACKAGES.rglob("*.py"))
    assert HOOKS == ["myutils_analysis_rules", "myutils_capture_backends", "myutils_cli",
                     "myutils_event_sinks", "myutils_metrics_providers"]
    for hook in HOOKS:
        assert f"`{hook}" in guide, f"{hook} is not documented in docs/plugins.md"
        assert hook in implemented_in_docs, f"no example package in docs/plugins.md implements {hook}"
    # the failure cases live in tests-integration/plugins: at least providers and commands
    assert {"myutils_metrics_providers", "myutils_cli"} <= implemented_in_tests


def test_every_kind_has_contract_example_errors_and_testing() -> None:
    guide = _guide()
    sections = re.split(r"^## ", guide, flags=re.M)
    for title in KIND_SECTIONS:
        (section,) = [s for s in sections if s.startswith(title)]
        for part in ("# file: ", "**How errors surface**"):
            assert part in section, f"section {title!r} lacks {part!r}"
        assert "**Contract**" in section or title == "Commands"
    for name in ("MetricEvent", "InputError", "UnsupportedInputError", "CaptureBackend", "WindowInfo",
                 "WindowClosing", "OptionSpec", "PluginEnv", "check_capture_backend", "MYUTILS_DISABLE_PLUGINS"):
        assert name in guide


def _implemented_hooks(sources: Iterable[str]) -> set[str]:
    found = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.name in HOOKS:
                found.add(node.name)
    return found


def test_sections_cited_by_the_hook_docstrings_exist() -> None:
    source = Path(hookspecs.__file__).read_text(encoding="utf-8")
    cited = re.findall(r'docs/plugins\.md, "([^"]+)"', source)
    headings = set(re.findall(r"^## (.+)$", _guide(), flags=re.M))
    assert len(cited) == len(HOOKS)
    assert [c for c in cited if c not in headings] == []
