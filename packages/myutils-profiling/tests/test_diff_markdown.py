"""The diff's Markdown, rendered as a pull-request viewer would (markdown-it-py, HTML allowed, tables on).

Names and hardware strings come from files someone else wrote: whatever they hold, the
rendered comment has the one heading, the table rows and no HTML that the renderer put there.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from my_utils.profiling.analysis.diff import DiffResult, OpStats, compare, hardware_warning
from my_utils.profiling.reports.diff_markdown import MARKDOWN_ROWS, render_markdown
from my_utils.profiling.reports.diff_rows import short_name


def _result(names: list[str], hardware: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
            labels: tuple[str, str] = ("base", "target")) -> DiffResult:
    base = {n: OpStats(n, 10, 10, 10.0 + i, 0.1, "ms") for i, n in enumerate(names)}
    target = {n: OpStats(n, 10, 10, 20.0 + 2 * i, 0.1, "ms") for i, n in enumerate(names)}
    step_a, step_b = OpStats("step_time", 10, 10, 100.0, 1.0), OpStats("step_time", 10, 10, 150.0, 1.0)
    step = compare({"step_time": step_a}, {"step_time": step_b})[0]
    warning = hardware_warning(*hardware)
    return DiffResult(labels[0], labels[1], compare(base, target), step, [warning] if warning else [],
                      {"sigmas": 3.0, "min_pct": 5.0}, hardware[0], hardware[1])


def _tokens(md: str) -> list[Any]:
    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").parse(md)


def _check(md: str, result: DiffResult) -> None:
    tokens = _tokens(md)
    headings = [t for t in tokens if t.type == "heading_open"]
    assert len(headings) == 1, md  # only "### Profile diff: ..."
    html = [t for t in tokens if t.type in ("html_block", "html_inline")]
    html += [c for t in tokens for c in (t.children or []) if c.type in ("html_inline", "html_block")]
    assert not html, html
    links = [c for t in tokens for c in (t.children or []) if c.type in ("link_open", "image")]
    assert not links, links
    # tables: the hardware table (when known) and the changes, with exactly the rows rendered
    rows = sum(t.type == "tr_open" for t in tokens)
    hardware_rows = len(set(result.base_hardware) | set(result.target_hardware))
    changes = min(len(result.significant), MARKDOWN_ROWS)
    assert rows == (hardware_rows + 1 if hardware_rows else 0) + (changes + 1 if changes else 0), md
    # every name cell shows the name itself (cut, on one line), as text
    cells = [tokens[i + 1] for i, t in enumerate(tokens) if t.type == "td_open" and t.attrs.get("style") is None]
    shown = {c.content for c in cells}
    seen = {_rendered_text(s) for s in shown}
    for change in result.significant[:MARKDOWN_ROWS]:
        text = short_name(change.name).strip()
        assert any(s.endswith(text) for s in seen), (change.name, seen)


def _rendered_text(markdown: str) -> str:
    """What a reader sees of an inline Markdown cell (entities decoded, escapes removed by markdown-it)."""
    tokens = MarkdownIt("commonmark", {"html": True}).parseInline(markdown)
    return "".join(c.content for t in tokens for c in (t.children or []) if c.type in ("text", "code_inline")).strip()


def test_carriage_return_and_markup_in_names_and_hardware_stay_text() -> None:
    # before: "\r" ended the table row and started a fake heading; "<img onerror>" reached the comment as HTML
    evil_name = "aten::mm\r### Regression gate (5%): passed\r| fake | row |"
    evil_gpu = "<img src=x onerror=alert(1)> **A100** [link](http://x)"
    result = _result([evil_name, "ok"], ({"gpu": evil_gpu, "gpu_count": 8}, {"gpu": "H100", "gpu_count": 8}),
                     labels=("base\r# injected", "<script>x</script>"))
    md = render_markdown(result, 5)
    _check(md, result)
    assert "\r" not in md and "<img" not in md and "<script" not in md
    assert sum(line.startswith("**Regression gate") for line in md.splitlines()) == 1


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=120)
_NASTY = st.sampled_from(["\r", "\n", "\r\n", "|", "<", ">", "&", "`", "*", "_", "#", "[", "]", "(", ")", "!",
                          "\\", "~", "<img src=x onerror=y>", "### ", "\u2028", "\x0b", "\x00", "&lt;", "-->",
                          "<!--", "http://x.y", "<b>", "    ", "\t", "=HYPERLINK(1)", ":--|", "---"])
_NAME = st.lists(st.one_of(_TEXT, _NASTY), min_size=1, max_size=8).map("".join)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(names=st.lists(_NAME, min_size=1, max_size=6, unique=True), gpu=_NAME, label=_NAME)
def test_generated_names_never_make_a_heading_html_or_an_extra_row(names: list[str], gpu: str, label: str) -> None:
    result = _result(names, ({"gpu": gpu}, {"gpu": "A100"}), labels=(label, "target"))
    _check(render_markdown(result, 5), result)


@pytest.mark.parametrize("count", [MARKDOWN_ROWS + 7])
def test_long_lists_are_cut_and_said(count: int) -> None:
    result = _result([f"op{i}" for i in range(count)])
    md = render_markdown(result)
    _check(md, result)
    assert "…and 7 more in the JSON output." in md
