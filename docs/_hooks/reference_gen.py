"""Reference pages generated from the code: the command tree of both CLIs, env vars the code reads.

Used by the MkDocs hook (``docs/_hooks/mkdocs_hooks.py``) at build time and by
``tests-integration/test_docs.py``, so the page and the check see the same facts.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "packages"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
#: The checked-in command reference sits between these lines of ``docs/reference/cli.md``.
CLI_BEGIN = "<!-- generated: cli (begin; regenerate with: python docs/_hooks/reference_gen.py --write) -->"
CLI_END = "<!-- generated: cli (end) -->"
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{2,}$")
# a shell read with a default: ${NAME:-...} or ${NAME-...}
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]{2,}):?-")
# Names in shell comments that illustrate the syntax, not variables the templates read.
SHELL_EXAMPLES = {"VAR"}


def _command_rows(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, command
    # typer may vendor its own click: recognise a group by what it does, not by its class
    if hasattr(command, "list_commands"):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _command_rows(sub, f"{path} {name}")


def _option_text(param: Any) -> str:
    # typer's parameter classes are not always click's subclasses: ask the kind by name
    help_text = _escape(" ".join((getattr(param, "help", None) or "").split()))
    if param.param_type_name == "argument":
        kind = f"(argument{', required' if param.required else ''})"
        return f"`{(param.name or '').upper()}` {kind}" + (f": {help_text}" if help_text else "")
    names = " / ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    default = getattr(param, "default", None)
    if default not in (None, False, (), []) and not getattr(param, "is_flag", False):
        help_text += f" (default: `{default}`)"
    return f"{names}: {help_text}" if help_text else names


def _escape(text: str) -> str:
    """Help texts name placeholders like ``profile_rank_<r>.csv``: Markdown would take ``<r>`` for HTML."""
    return html.escape(text, quote=False)


def cli_commands() -> dict[str, Any]:
    """Every command path of ``myutils`` and ``myutils-profile`` as installed, mapped to its click command."""
    import typer.main

    from my_utils.core.cli import build_app

    out: dict[str, Any] = {}
    out.update(_command_rows(typer.main.get_command(build_app()), "myutils"))
    try:
        from my_utils.profiling.cli import app as profile_app
    except ImportError:  # myutils-profiling not installed: its CLI is not part of this build
        return out
    out.update(_command_rows(typer.main.get_command(profile_app), "myutils-profile"))
    return out


def cli_reference_markdown() -> str:
    """Markdown for every command: its help text and each option with its own help."""
    lines: list[str] = []
    for path, command in cli_commands().items():
        lines += [f"### `{path}`", ""]
        text = (command.help or command.short_help or "").strip()
        if text:
            lines += [_escape(text.replace("\b\n", "")), ""]
        params = [p for p in command.params if not (isinstance(p, click.Option) and p.name == "help")]
        lines += [f"- {_option_text(p)}" for p in params if not getattr(p, "hidden", False)]
        lines.append("")
    return "\n".join(lines)


def _string_constants(tree: ast.AST) -> dict[str, str]:
    """NAME -> value for every ``NAME = "literal"`` (module or class level) in a module."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                for target in targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = node.value.value
    return found


def _env_reads_in_python(tree: ast.AST) -> set[str]:
    """Names read through ``os.environ.get``/``[...]``, ``os.getenv`` or an ``env*`` helper."""
    constants = _string_constants(tree)
    names: set[str] = set()

    def resolve(arg: ast.expr) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        if isinstance(arg, ast.Name):
            return constants.get(arg.id)
        if isinstance(arg, ast.Attribute):  # cls.ENV_VAR / self.DIR_ENV
            return constants.get(arg.attr)
        return None

    def is_environ(node: ast.expr) -> bool:
        # os.environ, a passed-in ``environ`` mapping, or ``(os.environ if e is None else e)``
        return "environ" in ast.unparse(node)

    for node in ast.walk(tree):
        arg: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            environ_get = isinstance(func, ast.Attribute) and func.attr == "get" and is_environ(func.value)
            getenv = isinstance(func, ast.Attribute) and func.attr == "getenv"
            helper = isinstance(func, ast.Name) and "env" in func.id.lower()  # env_int("RANK"), _env_flag(...)
            if environ_get or getenv or helper:
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            arg = node.slice
        if arg is not None:
            name = resolve(arg)
            if name is not None and ENV_NAME.match(name):
                names.add(name)
    return names


def env_vars_in_code() -> dict[str, set[str]]:
    """Every environment variable the shipped code reads -> the files (repo-relative) that read it.

    Python modules under ``packages/*/src`` (test helpers under ``testing/`` excluded: they set
    variables for child processes) and the shell templates and presets shipped with profiling.
    """
    found: dict[str, set[str]] = {}
    for path in sorted(SOURCES.glob("*/src/**/*.py")):
        if "testing" in path.parts or "__pycache__" in path.parts:
            continue
        for name in _env_reads_in_python(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    templates = [*SOURCES.glob("*/src/**/templates/*.sh"), *SOURCES.glob("*/src/**/templates/*.env")]
    for path in sorted(templates):
        for name in set(SHELL_READ.findall(path.read_text(encoding="utf-8"))) - SHELL_EXAMPLES:
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def cli_section(page: str) -> tuple[str, str, str] | None:
    """``(before, generated part, after)`` of the command reference page, None when it has no markers."""
    if CLI_BEGIN not in page or CLI_END not in page:
        return None
    before, rest = page.split(CLI_BEGIN, 1)
    generated, after = rest.split(CLI_END, 1)
    return before, generated, after


def stale_cli_reference(path: Path = CLI_PAGE) -> str | None:
    """Why the checked-in command reference differs from the code's commands, or None when it is current."""
    parts = cli_section(path.read_text(encoding="utf-8"))
    if parts is None:
        return f"{path}: the generated section ({CLI_BEGIN} ... {CLI_END}) is missing"
    if parts[1].strip() != cli_reference_markdown().strip():
        return (f"{path} is stale: the commands or options changed; regenerate it with "
                "`python docs/_hooks/reference_gen.py --write` and commit it")
    return None


def write_cli_reference(path: Path = CLI_PAGE) -> None:
    """Regenerate the command reference between its markers (the rest of the page is kept)."""
    page = path.read_text(encoding="utf-8")
    parts = cli_section(page)
    if parts is None:
        raise SystemExit(f"{path}: no {CLI_BEGIN} ... {CLI_END} markers to write between")
    before, _old, after = parts
    path.write_text(f"{before}{CLI_BEGIN}\n\n{cli_reference_markdown().strip()}\n\n{CLI_END}{after}", encoding="utf-8")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        write_cli_reference()
    elif sys.argv[1:] in ([], ["--check"]):
        reason = stale_cli_reference()
        if reason:
            raise SystemExit(reason)
    else:
        raise SystemExit("usage: python docs/_hooks/reference_gen.py [--write | --check]")
