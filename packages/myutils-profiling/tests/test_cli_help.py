"""``myutils-profile``'s help goes through rich markup: a ``[word]`` in a help string is a style tag to rich and
vanishes from the page unless it is escaped (``\\[word]``)."""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.testing import CliRunner

from my_utils.profiling.cli import app

# what rich reads as a tag: '[' then a letter, '#', '/' or '@' (rich.markup's RE_TAGS), not escaped
_TAG = re.compile(r"(?<!\\)\[[a-z#/@][^\[\]]*\]")


def _helps(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    out = [(" ".join(path) or "myutils-profile", command.help or "")]
    out += [(f"{' '.join(path)} {p.name}", getattr(p, "help", None) or "") for p in command.params]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        out += _helps(sub, (*path, name))
    return out


def test_no_help_string_holds_an_unescaped_markup_tag() -> None:
    helps = _helps(typer.main.get_command(app))
    assert len(helps) > 100  # every command and option was walked
    assert [(where, _TAG.findall(text)) for where, text in helps if _TAG.search(text)] == []


def test_the_bracketed_words_show_in_the_rendered_help() -> None:
    """Before the escapes, ``under=NAME[#POS]`` rendered as ``under=NAME``."""
    runner = CliRunner()
    analyze = runner.invoke(app, ["analyze", "--help"], env={"COLUMNS": "400"})
    assert analyze.exit_code == 0
    assert "under=NAME[#POS]" in analyze.output
    assert "hta_default" in analyze.output and "combined=ROOT|PRECEDING|FOLLOWING" in analyze.output
    ops = runner.invoke(app, ["ops", "--help"], env={"COLUMNS": "400"})
    assert ops.exit_code == 0 and "myutils-profiling[excel]" in ops.output
