"""Every measured figure in the READMEs and docs names the command that produces it, and quotes a range.

A paragraph (outside code blocks) that states a measurement — a ratio such as ``1.04x`` or
``4.0–5.4×``, "faster", a share of a core, a peak in MB — must name a bench script or a test
file (the command a reader reruns) and give a range (``a–b``), never one sample (issue 23:
"6.1× faster" was one sample; independent runs gave 4.0–5.4×).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *REPO.glob("packages/*/README.md"), *(REPO / "docs").rglob("*.md")])
SKIP = {"docs/reference/cli.md"}  # generated from the code's --help texts
# "faster" with a number near it ("5× faster", "faster by 30 %"): "launching faster cannot save it" states no figure
FIGURE = re.compile(r"\d(?:\.\d+)?\s?(?:x|×)(?!\w)|\d[^.;]{0,40}\bfaster\b|\bfaster\b[^.;]{0,40}\d"
                    r"|% of one core|\bpeak\b[^.]*\d+(?:\.\d+)? ?MB")
COMMAND = re.compile(r"bench/\w+\.py|tests?-integration/\w+\.py|test_\w+\.py")
RANGE = re.compile(r"\d(?:\.\d+)?\s?(?:x|×|%| ?MB| ?s)?\s?[–-]\s?\d")


def _paragraphs() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        name = page.relative_to(REPO).as_posix()
        if name in SKIP:
            continue
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for para in re.split(r"\n\s*\n|\n- ", text):
            if FIGURE.search(para):
                found.append((name, " ".join(para.split())))
    return found


def test_figures_are_found() -> None:
    """The scanner sees the figures it is meant to police (the diff against HTA, the monitor's cost)."""
    texts = " ".join(p for _, p in _paragraphs())
    assert "TraceDiff" in texts and "% of one core" in texts


@pytest.mark.parametrize(("page", "paragraph"), _paragraphs(), ids=lambda v: str(v)[:40])
def test_figure_names_its_command_and_a_range(page: str, paragraph: str) -> None:
    assert COMMAND.search(paragraph), f"{page}: a figure without the command that produces it: {paragraph[:200]}"
    assert RANGE.search(paragraph), f"{page}: a figure without a range (one sample?): {paragraph[:200]}"
