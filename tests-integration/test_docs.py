"""The documentation site builds strictly and says only what is true.

- ``mkdocs build --strict`` succeeds; every guide page carries its distribution's README, and the
  command page lists every command of both CLIs (generated from the code, checked in, never stale).
- The env-var table lists every variable the code reads (found by ``docs/_hooks/reference_gen``)
  and nothing the code does not read; the scanner itself is checked on each form of read.
- Each output-file row names a module that really writes that name.
- ``docs/MIGRATION_CHECKLIST.md`` is byte-identical to the copy shipped in myutils-profiling (and
  the wheel ships it at the seed's path), and each of its claims is checked against the code.
- Every ``python`` example in the docs pages runs in a fresh interpreter (READMEs have their own
  ``packages/*/tests/test_readme.py``; ``docs/plugins.md`` has ``test_plugin_docs.py``).
"""

from __future__ import annotations

import ast
import html
import inspect
import json
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
sys.path.insert(0, str(DOCS / "_hooks"))  # the generator is the docs build's own module, not a package

import reference_gen  # noqa: E402

MEMBERS = ("core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy")
CHECKLIST = DOCS / "MIGRATION_CHECKLIST.md"
PACKAGED = REPO / "packages/myutils-profiling/src/my_utils/profiling/docs/MIGRATION_CHECKLIST.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
# pages whose examples other test modules run (plugins.md) or that only include READMEs (guide/)
EXAMPLES_ELSEWHERE = {"plugins.md"}


def _run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)


# --- the build ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` (what ``nox -s docs`` runs) writes it."""
    pytest.importorskip("mkdocs", reason="mkdocs is in requirements-test.txt; install it to build the docs")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize("member", MEMBERS)
def test_guide_page_is_the_readme(site: Path, member: str) -> None:
    readme = (REPO / f"packages/myutils-{member}/README.md").read_text(encoding="utf-8")
    page = (site / "guide" / member / "index.html").read_text(encoding="utf-8")
    # headings outside code blocks; a "# comment" inside a fence is code, not a section
    prose = re.sub(r"^```.*?^```", "", readme, flags=re.S | re.M)
    headings = re.findall(r"^#{1,4} (.+)$", prose, re.M)
    assert headings
    plain = html.unescape(re.sub(r"<[^>]+>", "", page))
    for heading in headings:  # every section of the README made it into the page, in full
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "").strip()
        assert text in plain, (member, heading)


@pytest.mark.slow
def test_command_page_lists_every_command_and_option(site: Path) -> None:
    page = html.unescape(re.sub(r"<[^>]+>", "", (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")))
    page = " ".join(page.split())
    commands = reference_gen.cli_commands()
    for required in ("myutils plugins list", "myutils-profile analyze", "myutils-profile trace",
                     "myutils memory summarize", "myutils stragglers"):
        assert required in commands
    for path, command in commands.items():
        assert path in page
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in page, (path, opt)
            # the help text reads as written, placeholders such as <r> included
            # (and "\[" as the terminal shows it: rich markup escapes a bracketed word, Markdown renders it as "[")
            help_text = " ".join((getattr(param, "help", None) or "").split()).replace("`", "").replace("\\[", "[")
            assert help_text in page, (path, help_text)


def test_checked_in_command_reference_is_current(tmp_path: Path) -> None:
    """``docs/reference/cli.md`` is checked in (it reads on GitHub without a build) and must match the code."""
    assert reference_gen.stale_cli_reference() is None  # else: python docs/_hooks/reference_gen.py --write
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "### `myutils-profile analyze`" in page and "`PATHS` (argument)" in page
    # a stale copy is caught: drop one option line from a copy of the page
    stale = tmp_path / "cli.md"
    lines = page.splitlines(keepends=True)
    stale.write_text("".join(x for x in lines if not x.startswith("- `--headline")), encoding="utf-8")
    reason = reference_gen.stale_cli_reference(stale)
    assert reason is not None and "reference_gen.py --write" in reason


def test_build_refuses_an_env_table_missing_a_variable() -> None:
    """The hook stops the build (not only the test) when the table lacks a variable the code reads."""
    pytest.importorskip("mkdocs", reason="mkdocs is in requirements-test.txt")
    from mkdocs.exceptions import PluginError

    sys.path.insert(0, str(DOCS / "_hooks"))
    import mkdocs_hooks

    page: Any = type("Page", (), {"file": type("File", (), {"src_uri": "reference/environment.md"})()})()
    table = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    assert mkdocs_hooks.on_page_markdown(table, page, None, None) == table
    with pytest.raises(PluginError, match="MYUTILS_DISABLE_PLUGINS"):
        mkdocs_hooks.on_page_markdown(table.replace("`MYUTILS_DISABLE_PLUGINS`", "`X_Y_Z`"), page, None, None)


def test_hooks_row_names_real_integrations() -> None:
    """The README and the docs index name the trainer callbacks: they must exist and load lazily."""
    import my_utils.hooks.integrations as integrations

    assert {"IntegrationConfig", "MyUtilsLightningCallback", "MyUtilsTrainerCallback"} <= set(integrations.__all__)
    for text in ((REPO / "README.md").read_text(encoding="utf-8"), (DOCS / "README.md").read_text(encoding="utf-8")):
        row = next(line for line in text.splitlines() if "myutils-hooks" in line and line.startswith("|"))
        assert "Lightning" in row and "Hugging Face" in row


# --- environment variables ---------------------------------------------------------------------

def _env_table() -> set[str]:
    text = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]{2,})`", row.split("|")[1])}


def test_env_table_lists_exactly_what_the_code_reads() -> None:
    in_code = set(reference_gen.env_vars_in_code())
    listed = _env_table()
    assert not in_code - listed, f"read by the code, missing from docs/reference/environment.md: {in_code - listed}"
    assert not listed - in_code, f"listed in docs/reference/environment.md, read nowhere: {listed - in_code}"


def test_env_scanner_sees_every_form_of_read() -> None:
    source = '''
import os
A_ENV = "VIA_CONSTANT"
class C:
    ENV_VAR = "VIA_CLASS_ATTR"
    def f(self):
        return os.environ.get(self.ENV_VAR), os.environ.get(A_ENV)
os.environ.get("VIA_GET"); os.environ["VIA_SUBSCRIPT"]; os.getenv("VIA_GETENV")
env_int("VIA_HELPER")
(os.environ if x is None else x).get("VIA_MAPPING")
os.environ["NOT_A_READ"] = "1"
'''
    found = reference_gen._env_reads_in_python(ast.parse(source))
    assert found == {"VIA_CONSTANT", "VIA_CLASS_ATTR", "VIA_GET", "VIA_SUBSCRIPT", "VIA_GETENV", "VIA_HELPER",
                     "VIA_MAPPING"}


# --- output files ------------------------------------------------------------------------------

def _output_rows() -> list[tuple[list[str], str]]:
    text = (DOCS / "reference" / "outputs.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`my_utils."):
            rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1].strip("`")))
    return rows


def test_output_rows_exist() -> None:
    assert len(_output_rows()) >= 10


@pytest.mark.parametrize(("names", "module"), _output_rows(), ids=lambda v: v if isinstance(v, str) else v[0])
def test_output_file_is_written_by_the_named_module(names: list[str], module: str) -> None:
    dist = module.split(".")[1]
    path = REPO / f"packages/myutils-{dist}/src" / (module.replace(".", "/") + ".py")
    source = path.read_text(encoding="utf-8")
    for name in names:
        if name.startswith("."):  # an extension variant of the previous name
            continue
        for piece in re.split(r"<[a-z]+>", name):
            assert piece in source, f"{module} never mentions {piece!r} (from {name!r})"


# --- the migration checklist -------------------------------------------------------------------

def test_checklist_shipped_copy_is_identical() -> None:
    assert CHECKLIST.read_bytes() == PACKAGED.read_bytes(), f"cp {CHECKLIST} {PACKAGED}"


def test_checklist_is_importable_at_the_seed_path() -> None:
    from importlib.resources import files

    text = (files("my_utils.profiling") / "docs" / "MIGRATION_CHECKLIST.md").read_text(encoding="utf-8")
    assert text == CHECKLIST.read_text(encoding="utf-8")


@pytest.mark.slow
def test_profiling_wheel_ships_the_checklist(tmp_path: Path) -> None:
    from hatchling.builders.wheel import WheelBuilder

    wheel = next(iter(WheelBuilder(str(REPO / "packages/myutils-profiling")).build(directory=str(tmp_path),
                                                                                   versions=["standard"])))
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("my_utils/profiling/docs/MIGRATION_CHECKLIST.md") == CHECKLIST.read_bytes()


def test_checklist_imports_work_in_a_fresh_interpreter(tmp_path: Path) -> None:
    text = CHECKLIST.read_text(encoding="utf-8")
    statements = re.findall(r"`((?:from|import) [^`]+)`", " ".join(text.split()))
    modules = re.findall(r"`(my_utils\.[A-Za-z_]+)`", text)
    assert len(statements) >= 6 and len(modules) >= 4
    code = "\n".join(s.replace(", ...", "") for s in statements)
    code += "\nimport importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "import my_utils.utils, my_utils.core.utils\nassert my_utils.utils is my_utils.core.utils\n"
    proc = _run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_checklist_claims_hold() -> None:
    from my_utils.core.events import MetricEvent
    from my_utils.profiling.collector import MetricsCollector
    from my_utils.profiling.model.report import AnalysisReport

    text = " ".join(CHECKLIST.read_text(encoding="utf-8").split())
    # the quick-start test it cites exists
    test_ref = re.search(r"`(packages/[^`:]+)::(\w+)`", text)
    assert test_ref is not None
    assert f"def {test_ref.group(2)}(" in (REPO / test_ref.group(1)).read_text(encoding="utf-8")
    # schema fields it names exist
    event_fields = set(inspect.signature(MetricEvent).parameters)
    assert {"schema_version", "run_id"} <= event_fields
    report_fields = set(inspect.signature(AnalysisReport).parameters)
    assert {"schema_version", "workload", "scores", "findings", "summary", "tables", "overhead", "inputs",
            "hardware"} <= report_fields
    assert "workload" in inspect.signature(MetricsCollector.analyze).parameters
    assert "ignore_provider_errors" in inspect.signature(MetricsCollector.from_config).parameters
    # the default rules it names are registered analysis-rule plugins
    from my_utils.core.plugin_types import PluginKind
    from my_utils.core.plugins import get_registry

    rules = set(get_registry().descriptions(PluginKind.ANALYSIS_RULE))
    assert {"bottleneck", "memory_growth", "anomalies", "variability", "rank_imbalance", "suggestions"} <= rules
    for workload in re.findall(r'analyze\(workload="(\w+)"\)', text):
        MetricsCollector().analyze(workload=workload)
    # the seed's commands keep the options it lists
    commands = reference_gen.cli_commands()
    for program, sub, opts in re.findall(r"`(myutils-profile) (\w+) ((?:--[\w-]+(?: \.\.\.)? ?)+)`", text):
        have = {o for p in commands[f"{program} {sub}"].params for o in p.opts}
        assert set(re.findall(r"--[\w-]+", opts)) <= have, (sub, opts)


def test_checklist_no_distribution_requires_torch_and_scores_have_overall() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # requirements-test.txt brings tomli there
        import tomli as tomllib

    from my_utils.core.events import MetricEvent
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer

    for member in MEMBERS:
        project = tomllib.loads((REPO / f"packages/myutils-{member}/pyproject.toml").read_text())["project"]
        assert not [d for d in project["dependencies"] if re.match(r"torch\b", d)], member
        assert "torch" in project["optional-dependencies"], f"myutils-{member} has no [torch] extra"
    events = [MetricEvent(name="iter", value=0.1 + 0.001 * (i % 3), kind="duration", unit="s", source="mytimer",
                          rank=0, step=i) for i in range(20)]
    scores = MetricsAnalyzer(events).analyze().scores
    assert "overall" in scores and len(scores) > 1  # overall plus one per measured dimension ("timer" is no kind
    # the rules read, so that run measured nothing and, since schema 1.2, has no score rather than 100)


def test_checklist_report_keeps_unknown_fields_and_refuses_newer_major() -> None:
    from my_utils.profiling.model.report import AnalysisReport

    report = AnalysisReport(schema_version="1.0", workload="pretrain", scores={"overall": 1.0}, findings=[],
                            summary={})
    data = json.loads(json.dumps(report.to_dict() if hasattr(report, "to_dict") else {}))
    data["field_from_the_future"] = {"x": 1}
    kept = AnalysisReport.from_dict(data)
    assert json.loads(json.dumps(kept.to_dict()))["field_from_the_future"] == {"x": 1}
    data["schema_version"] = "999.0"
    with pytest.raises(Exception, match="schema_version"):
        AnalysisReport.from_dict(data)


# --- examples ----------------------------------------------------------------------------------

def _doc_examples() -> list[tuple[str, int, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        relative = page.relative_to(DOCS).as_posix()
        if relative in EXAMPLES_ELSEWHERE:
            continue
        for index, code in enumerate(PYTHON_BLOCK.findall(page.read_text(encoding="utf-8"))):
            found.append((relative, index, code))
    return found


def test_docs_have_examples() -> None:
    assert _doc_examples()


@pytest.mark.parametrize(("page", "index", "code"), _doc_examples(), ids=lambda v: str(v)[:30])
def test_docs_example_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    proc = _run_python(code, tmp_path)
    assert proc.returncode == 0, f"docs/{page} example {index}: {proc.stderr}"


def _root_readme_runnable_commands() -> list[str]:
    """Lines of the README's "Command line" block that need no placeholder (NAME, PATH, ...)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        command = re.sub(r"\[[^\]]*\]", "", line.split("#")[0]).strip()
        if command and not any(w.isupper() for w in shlex.split(command)) and "--help" not in command:
            commands.append(command)
    return commands


@pytest.mark.parametrize("command", _root_readme_runnable_commands())
def test_root_readme_command_runs(command: str) -> None:
    """The README's commands without placeholders run as written (their --help forms: test_repository_contract)."""
    program, *args = shlex.split(command)
    assert program == "myutils"
    proc = subprocess.run([sys.executable, "-m", "my_utils.core", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
