"""``myutils plugins run`` without typer (``cli.run_fast``): click's parse, and typer's whole behaviour, kept.

The parser is compared with click's own parse of the real command (built as ``cli.app.run``
builds it); the command is run as the real ``myutils`` console script, once from a current
start record (fast) and once with ``MYUTILS_NO_CACHE=1`` (typer), and everything it leaves is
compared. A ``sitecustomize`` in the test's folder (active only when ``RUNFAST_MODULES`` names a
file) writes the modules a run imported, so the fast path is seen to import no typer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.cli.app import build_app, light_help_options, light_parameters
from my_utils.core.cli.run_fast import RunArgs, can_write_as_click, parse_run_argv
from my_utils.core.cli.start_cache import SETTINGS_PREFIX
from my_utils.core.entry_point_cache import CACHE_DIR_ENV, NO_CACHE_ENV
from my_utils.core.testing.plugin_env import write_distribution

# ---------------------------------------------------------------------------------------------
# the parse, against click's


@pytest.fixture(scope="module")
def command() -> Any:
    """The root command exactly as ``cli.app.run`` builds it for a ``plugins run`` line."""
    root = typer.main.get_command(build_app(False))
    light_help_options(root)
    light_parameters(root)
    return root


def _click_parse(command: Any, argv: Sequence[str]) -> RunArgs | None:
    """What click hands the ``plugins run`` callback for ``argv``, or None when it does not run it.

    The contexts are made as ``TyperGroup.invoke`` makes them, without invoking anything.
    """
    exceptions = (typer._click.exceptions.ClickException, typer.Exit)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # --help and --version print
            return _click_contexts(command, argv)
    except exceptions:
        return None


def _click_contexts(command: Any, argv: Sequence[str]) -> RunArgs | None:
    root_ctx = command.make_context("myutils", list(argv))
    if not root_ctx._protected_args:
        return None  # "Missing command."
    name, group, rest = command.resolve_command(root_ctx, [*root_ctx._protected_args, *root_ctx.args])
    if name != "plugins":
        return None
    group_ctx = group.make_context(name, rest, parent=root_ctx)
    if not group_ctx._protected_args:
        return None
    name, run, rest = group.resolve_command(group_ctx, [*group_ctx._protected_args, *group_ctx.args])
    if name != "run":
        return None
    params = run.make_context(name, rest, parent=group_ctx).params
    return RunArgs(params["name"], params["input_path"], params["output_dir"], params["option"], params["quiet"],
                   root_ctx.params["traceback"])


def _same_as_click(command: Any, argv: list[str]) -> RunArgs | None:
    ours = parse_run_argv(argv)
    if ours is not None:
        assert ours == _click_parse(command, argv), argv
    return ours


BASE = ["plugins", "run"]

#: lines the fast parser takes: each must equal click's parse
ACCEPTED = [
    [*BASE, "p", "--input", "a.json", "--output-dir", "o"],
    [*BASE, "--input", "a.json", "p", "--output-dir", "o"],
    [*BASE, "--input", "a.json", "--output-dir", "o", "p"],
    [*BASE, "--input=a.json", "--output-dir=o", "p"],
    ["--traceback", *BASE, "p", "--input", "a", "--output-dir", "o"],
    ["--traceback", "--traceback", *BASE, "p", "--input", "a", "--output-dir", "o"],
    [*BASE, "p", "--input", "a", "--input", "b", "--output-dir", "o", "--output-dir=o2"],  # the last wins
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-o", "k=1", "-ok=2", "--option", "k=3", "--option=k=4"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-o=k=1"],  # the value is '=k=1', as click reads it
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-q"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "--quiet", "-q", "-qq"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-qo", "k=1"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-qok=1"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-oq"],  # -o takes 'q'
    [*BASE, "p", "--input", "-x", "--output-dir", "-q"],  # a value is the next word, whatever it looks like
    [*BASE, "p", "--input", "--version", "--output-dir", "o", "-o", "--quiet"],
    [*BASE, "-", "--input", "a", "--output-dir", "o"],
    [*BASE, "p", "--input", "", "--output-dir", "o/"],  # paths typer coerces through pydantic: Path('.'), Path('o')
    [*BASE, "p", "--input", "a//b/./c", "--output-dir", "./o/."],
    [*BASE, "p", "--input=", "--output-dir", "~/o"],
    [*BASE, "", "--input", "é/ü.json", "--output-dir", "o"],
]

#: lines the fast parser leaves to typer (most click rejects; the rest it is not certain of)
DECLINED = [
    [*BASE, "p", "--input", "a"],  # missing --output-dir
    [*BASE, "--input", "a", "--output-dir", "o"],  # missing NAME
    [*BASE, "p", "q", "--input", "a", "--output-dir", "o"],  # extra argument
    [*BASE, "p", "--input", "a", "--output-dir", "o", "--help"],
    [*BASE, "p", "--input", "--help", "--output-dir", "o"],  # click would read the path '--help': left to it
    [*BASE, "p", "--input", "a", "--output-dir", "o", "--", "x"],
    [*BASE, "p", "--inp", "a", "--output-dir", "o"],  # no abbreviations
    [*BASE, "p", "--input", "a", "--output-dir", "o", "--quiet=1"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-q=1"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-x"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-qx"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-o"],  # no value
    [*BASE, "p", "--input", "a", "--output-dir"],
    [*BASE, "p", "--input", "a", "--output-dir", "o", "-h"],
    ["--version", *BASE, "p", "--input", "a", "--output-dir", "o"],
    ["--traceback=1", *BASE, "p", "--input", "a", "--output-dir", "o"],
    ["--", *BASE, "p", "--input", "a", "--output-dir", "o"],
    ["plugins", "--help"],
    ["plugins", "list"],
    ["plugins", "Run", "p", "--input", "a", "--output-dir", "o"],
    ["run", "p", "--input", "a", "--output-dir", "o"],
    [*BASE, "p", "--input", "a\udcff", "--output-dir", "o"],  # bytes that are not UTF-8
    [],
]


@pytest.mark.parametrize("argv", ACCEPTED, ids=lambda a: " ".join(a))
def test_accepted_lines_are_parsed_as_click_parses_them(command: Any, argv: list[str]) -> None:
    assert _same_as_click(command, argv) is not None


@pytest.mark.parametrize("argv", DECLINED, ids=lambda a: " ".join(a) or "nothing")
def test_other_lines_are_left_to_typer(command: Any, argv: list[str]) -> None:
    assert parse_run_argv(argv) is None


def test_declined_lines_are_usage_errors_but_for_three_left_to_typer_by_choice(command: Any) -> None:
    click_runs = [argv for argv in DECLINED if _click_parse(command, argv) is not None]
    assert click_runs == [  # typer runs these as always; the fast parser need not know them
        [*BASE, "p", "--input", "--help", "--output-dir", "o"],
        ["--", *BASE, "p", "--input", "a", "--output-dir", "o"],
        [*BASE, "p", "--input", "a\udcff", "--output-dir", "o"],
    ]


def test_a_path_that_cannot_be_read_is_left_to_typer(command: Any, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: every file is readable (os.access), the refusal cannot happen")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    secret.chmod(0)
    argv = [*BASE, "p", "--input", str(secret), "--output-dir", str(tmp_path)]
    assert _click_parse(command, argv) is None and parse_run_argv(argv) is None


_NAMES = [["prov"], ["-"], [""], ["torch_profiler"]]
_INPUTS = [["--input", "in.json"], ["--input=in2.json"], ["--input", "-q"], ["--input="], ["--input", "a//b/"]]
_OUTPUTS = [["--output-dir", "out"], ["--output-dir=out/"], ["--output-dir", "--option"], ["--output-dir", "."]]
_EXTRAS = [["-o", "k=1"], ["-ok=2"], ["-o=k"], ["--option", "a=b"], ["--option=x=[1]"], ["-q"], ["--quiet"], ["-qq"],
           ["-qo", "z=3"], ["-qoz=4"], ["-oq"], ["-o", "-q"], *_INPUTS, *_OUTPUTS]
_NOISE = ["plugins", "run", "--traceback", "prov", "x", "-", "", "--input", "--output-dir", "--option", "-o", "-q",
          "--quiet=1", "-q=1", "--", "--help", "-h", "--inp", "--input=", "-x", "a//b", "k=v", "--version", "-qx",
          "-ox", "=", "list", "--output", "---input", "-oo"]


@st.composite
def _good_lines(draw: st.DrawFn) -> list[str]:
    """``[--traceback...] plugins run`` and a NAME, an --input, an --output-dir and extras, in any order."""
    root = draw(st.lists(st.just("--traceback"), max_size=2))
    units = [draw(st.sampled_from(_NAMES)), draw(st.sampled_from(_INPUTS)), draw(st.sampled_from(_OUTPUTS)),
             *draw(st.lists(st.sampled_from(_EXTRAS), max_size=5))]
    return [*root, *BASE, *(word for unit in draw(st.permutations(units)) for word in unit)]


@st.composite
def _noisy_lines(draw: st.DrawFn) -> list[str]:
    """A good line with a few words put in, taken out or replaced anywhere (most are then usage errors)."""
    words = draw(_good_lines())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(words)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        word = draw(st.one_of(st.sampled_from(_NOISE), st.text(alphabet="-=qo/.ab", max_size=5)))
        if action == "insert":
            words.insert(at, word)
        elif at < len(words):
            if action == "delete":
                del words[at]
            else:
                words[at] = word
    return words


@settings(derandomize=True, database=None, max_examples=300, deadline=None)
@given(argv=_good_lines())
def test_generated_orders_of_a_good_line_parse_as_click(command: Any, argv: list[str]) -> None:
    ours = _same_as_click(command, argv)
    assert ours is not None and _click_parse(command, argv) is not None, argv


@settings(derandomize=True, database=None, max_examples=500, deadline=None)
@given(argv=_noisy_lines())
def test_generated_noisy_lines_parse_as_click_or_are_declined(command: Any, argv: list[str]) -> None:
    ours = parse_run_argv(argv)
    theirs = _click_parse(command, argv)
    if ours is not None:
        assert ours == theirs, argv
    elif theirs is not None:  # click runs it, the fast parser does not: only where the docstring says it will not
        assert "--help" in argv or "--" in argv, argv


def test_streams_click_would_rewrap_are_refused() -> None:
    for encoding, ours in [("ascii", False), ("US-ASCII", False), ("utf-8", True), ("latin-1", True)]:
        assert can_write_as_click(io.TextIOWrapper(io.BytesIO(), encoding=encoding)) is ours
    assert not can_write_as_click(io.StringIO())


# ---------------------------------------------------------------------------------------------
# the real console script: the same results from the fast path and from typer

PROVIDERS = '''
import sys

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


class Raises:
    name = "runfast_raises"

    @classmethod
    def from_input(cls, path, **options):
        return cls()

    def collect(self, step=None):
        print("about to fail")  # plugin output: stderr under both runners
        raise ZeroDivisionError("division by zero in collect")


class Exits:
    name = "runfast_exits"

    @classmethod
    def from_input(cls, path, **options):
        sys.exit(3)


@hookimpl
def myutils_metrics_providers():
    return [
        PluginDescription("runfast_raises", PluginKind.METRICS_PROVIDER, "my_utils_ext_runfast.plugin:Raises",
                          "raises in collect"),
        PluginDescription("runfast_exits", PluginKind.METRICS_PROVIDER, "my_utils_ext_runfast.plugin:Exits",
                          "calls sys.exit"),
    ]
'''

SITECUSTOMIZE = '''
import os
import sys

_target = os.environ.get("RUNFAST_MODULES")
if _target:
    import atexit

    def _dump() -> None:
        with open(_target, "w") as fh:
            fh.write("\\n".join(sorted(sys.modules)))

    atexit.register(_dump)
'''

TINY = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
                        for i in range(7)]}


class Site:
    """A folder on ``PYTHONPATH`` with a plugin distribution, the modules-dump ``sitecustomize``, and a cache."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.site = root / "site"
        write_distribution(self.site, "myutils-ext-runfast", "0.3",
                           {"my_utils_ext_runfast/__init__.py": "", "my_utils_ext_runfast/plugin.py": PROVIDERS},
                           {"ext_runfast": "my_utils_ext_runfast.plugin"})
        (self.site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.cache = root / "cache"
        self.work = root / "work"
        self.work.mkdir()
        (self.work / "tiny.json").write_text(json.dumps(TINY))
        self.script = Path(sys.executable).parent / "myutils"

    def run(self, *args: str, fast: bool, env: Mapping[str, str] | None = None, stdout: int | None = None
            ) -> tuple[int, str, str, set[str]]:
        """``myutils ARGS`` in the work folder: exit code, stdout, stderr, modules imported.

        ``stdout``: a file descriptor to write to instead of a captured pipe.
        """
        environ = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIX)}
        environ["PYTHONPATH"] = os.pathsep.join([str(self.site), *filter(None, [os.environ.get("PYTHONPATH")])])
        environ[CACHE_DIR_ENV] = str(self.cache)
        if not fast:
            environ[NO_CACHE_ENV] = "1"
        modules_file = self.root / "modules.txt"
        environ["RUNFAST_MODULES"] = str(modules_file)
        environ.update(env or {})
        modules_file.unlink(missing_ok=True)
        proc = subprocess.run([str(self.script), *args], stdout=subprocess.PIPE if stdout is None else stdout,
                              stderr=subprocess.PIPE, text=True, env=environ, cwd=self.work, timeout=120)
        modules = set(modules_file.read_text().split()) if modules_file.exists() else set()
        return proc.returncode, proc.stdout or "", proc.stderr, modules


@pytest.fixture()
def site(tmp_path: Path) -> Site:
    if not (Path(sys.executable).parent / "myutils").is_file():
        pytest.skip(f"no myutils console script beside {sys.executable} (my_utils not installed in this interpreter)")
    made = Site(tmp_path)
    code, _, err, modules = made.run("plugins", "list", fast=True)  # records the clean start
    assert code == 0, err
    assert "typer" in modules and list(made.cache.glob("cli-start-*.json"))
    return made


def _outcome(site: Site, args: Sequence[str], fast: bool) -> tuple[tuple[int, str, str, bytes | None], set[str]]:
    out = site.work / "out"
    shutil.rmtree(out, ignore_errors=True)
    code, stdout, stderr, modules = site.run(*args, fast=fast)
    events = out / "metrics_events.jsonl"
    left = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    assert left in ([], ["metrics_events.jsonl"]), left  # nothing half-written beside it
    return (code, stdout, stderr, events.read_bytes() if events.exists() else None), modules


_HEAVY = ("typer", "click", "importlib.metadata", "pydantic")


@pytest.mark.parametrize(("args", "code"), [
    (["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "-q"], 0),
    (["plugins", "run", "--input=tiny.json", "torch_profiler", "--output-dir=out"], 0),
    (["plugins", "run", "torch_profiler", "--input", "absent.json", "--output-dir", "out", "-q"], 2),
    (["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "-o", "no_equals"], 2),
    (["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "-oscale=2"], 2),
    (["plugins", "run", "no_such_provider", "--input", "tiny.json", "--output-dir", "out"], 2),
    (["plugins", "run", "runfast_raises", "--input", "tiny.json", "--output-dir", "out", "-q"], 1),
    (["plugins", "run", "runfast_exits", "--input", "tiny.json", "--output-dir", "out", "-q"], 1),
    (["--traceback", "plugins", "run", "no_such_provider", "--input", "tiny.json", "--output-dir", "out"], 2),
], ids=["good", "good-reordered", "missing-input", "bad-option", "unknown-option-of-provider", "unknown-provider",
        "provider-raises", "provider-exits", "traceback"])
def test_the_fast_path_ends_as_typer_does(site: Site, args: list[str], code: int) -> None:
    assert parse_run_argv(args) is not None
    fast, fast_modules = _outcome(site, args, fast=True)
    slow, slow_modules = _outcome(site, args, fast=False)
    assert fast == slow
    assert fast[0] == code, fast
    if code == 0:
        assert fast[1] == "wrote 8 metric events to out/metrics_events.jsonl\n" and fast[3]
        assert "logging" not in fast_modules  # a clean start imports it only to give a plugin's warning
    else:
        assert fast[1] == "" and fast[3] is None and fast[2].count("error: ") == 1
    assert "typer" in slow_modules
    assert not {m for m in fast_modules if m.split(".")[0] in _HEAVY or m in _HEAVY}, fast_modules & set(_HEAVY)
    assert "my_utils.core.cli.run_fast" in fast_modules


@pytest.mark.parametrize("args", [
    ["plugins", "run", "torch_profiler", "--input", "tiny.json"],
    ["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "--inp", "x"],
    ["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "--help"],
])
def test_lines_it_declines_get_typers_answer(site: Site, args: list[str]) -> None:
    fast, fast_modules = _outcome(site, args, fast=True)
    slow, _ = _outcome(site, args, fast=False)
    assert fast == slow and "typer" in fast_modules
    assert fast[0] == (0 if "--help" in args else 2) and ("Usage:" in fast[2] or "Usage:" in fast[1])


def test_without_a_current_record_or_with_odd_streams_typer_runs_it(site: Site) -> None:
    args = ["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "-q"]
    code, _, _, modules = site.run(*args, fast=True, env={"PYTHONIOENCODING": "ascii"})  # click would re-wrap
    assert code == 0 and "typer" in modules
    code, _, _, modules = site.run(*args, fast=True)
    assert code == 0 and "typer" not in modules  # the record is still current
    for record in site.cache.glob("cli-start-*.json"):
        record.unlink()
    code, _, _, modules = site.run(*args, fast=True)
    assert code == 0 and "typer" in modules
    # that run built every plugin's commands and recorded its clean start: the next one is fast
    assert len(list(site.cache.glob("cli-start-*.json"))) == 1
    code, _, _, modules = site.run(*args, fast=True)
    assert code == 0 and "typer" not in modules


def test_a_closed_stdout_ends_as_under_typer(site: Site) -> None:
    args = ["plugins", "run", "torch_profiler", "--input", "tiny.json", "--output-dir", "out", "-q"]
    ends = []
    for fast in (True, False):
        read, write = os.pipe()
        os.close(read)  # the reader is gone: the final line meets a broken pipe
        try:
            code, _, stderr, modules = site.run(*args, fast=fast, stdout=write)
        finally:
            os.close(write)
        ends.append((code, stderr))
        assert ("typer" in modules) is not fast
    assert ends[0] == ends[1] and ends[0][0] == 2 and ends[0][1].startswith("error: "), ends


def test_guards_without_typer_report_once_and_end_in_command_exit() -> None:
    from my_utils.core.cli.guard import CommandExit, plugin_guard, run_without_typer
    from my_utils.core.errors import InputError

    lines: list[str] = []
    run_without_typer(lines.append)
    try:
        with pytest.raises(CommandExit) as ended, plugin_guard(), plugin_guard("metrics provider 'x'"):
            raise InputError("data.csv", "line 4", "expected a number")
        with pytest.raises(CommandExit) as broke, plugin_guard(), plugin_guard("metrics provider 'x'"):
            raise LookupError("a bug")
    finally:
        run_without_typer(None)
    assert ended.value.exit_code == 2 and broke.value.exit_code == 1
    assert len(lines) == 2 and lines[0].startswith("error: data.csv") and "metrics provider 'x' failed" in lines[1]
    with pytest.raises(typer.Exit), plugin_guard():  # typer's ending again
        raise InputError("data.csv", None, "expected a number")
