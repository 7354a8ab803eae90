"""The trend pages and the notebook figures: one figure, drawn on the page and returned in Python; names stay text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from history_support import make_report, page_figures

from my_utils.profiling.history import RunContext, RunStore, overview_figures, trend_figures, trends
from my_utils.profiling.history.pages import render_page

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    s = RunStore(tmp_path / "h.sqlite")
    for i in range(30):
        r = make_report(EVIL, {"step_time.median": 50.0 if i < 20 else 60.0 + i * 0.01, "mfu": 40.0 - (i >= 20)},
                        tag=i)
        s.add(r, RunContext(EVIL, 1.7e9 + i, git_commit=EVIL + str(i), gpu_model="G", gpu_count=1))
    yield s
    s.close()


def test_python_figures_are_thepage_figures(store: RunStore) -> None:
    found = trends(store, "step_time.median")
    html = render_page("t", "here", found)
    (page,) = page_figures(html)
    (fig,) = trend_figures("step_time.median", store)
    data = fig.to_plotly_json()["data"]
    assert [list(t["y"]) for t in data] == [t["y"] for t in page["data"]]
    assert page["data"][0]["y"] == list(found[0].series.values)
    assert found[0].changes[0].run_id == 21 and found[0].changes[0].commit == EVIL + "20"


def test_names_from_the_store_stay_text(store: RunStore) -> None:
    html = render_page("t", "here", trends(store, "step_time.median"), overview=True)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the tables show it as text
    (fig,) = trend_figures("step_time.median", store)
    assert "<script>" not in fig.layout.title.text  # plotly reads a subset of HTML in titles


def test_overview_lists_the_regressions_first(store: RunStore) -> None:
    figs = overview_figures(store)
    titles = [f.layout.title.text for f in figs]
    # step time rose (worse) and MFU fell (worse): both regressions, the larger move first
    assert [t.split(" — ")[0] for t in titles] == ["step_time.median", "mfu"]


def test_the_changes_table_shows_the_change_as_stored(store: RunStore) -> None:
    (trend,) = trends(store, "step_time.median")
    change = trend.changes[0]
    html = render_page("t", "here", [trend])
    row = re.search(r'<tr class="worse">(.*?)</tr>', html, flags=re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), flags=re.S)
    # the first run after the change, its level before and after (medians of runs 0-19 and 20-29), the move
    assert cells[1] == "21" and cells[5] == "50 ms" and cells[6] == "60.25 ms" and cells[7] == "+20.5%"
    # a p-value whose normal tail underflowed is "< 1e-12", never "0"
    expected = "&lt; 1e-12" if change.point.p_value < 1e-12 else f"{change.point.p_value:.2g}"
    assert cells[8] == expected and cells[8] != "0"


def test_a_p_value_below_the_float_tail_is_not_zero() -> None:
    from my_utils.profiling.history.figures import p_text

    assert [p_text(p) for p in (0.0, 3e-13, 2.5e-5, 0.5)] == ["< 1e-12", "< 1e-12", "2.5e-05", "0.5"]
