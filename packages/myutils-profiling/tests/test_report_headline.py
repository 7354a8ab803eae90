"""The headline block: drawn from the analysis' facts, above everything, each figure with its basis and evidence.

The report is built here with the fact set the analysis writes (``model.report``): the
renderer must show it as given (value, unit, whole, source, ranks, steps), link each top
finding to the table row its evidence names, and show a dimension without data as "not
measured", never as a number. HTML and Markdown show the same headline.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from my_utils.profiling.model.report import (
    Advice,
    AnalysisReport,
    EvidenceRow,
    Fact,
    Finding,
    Headline,
    Impact,
    NotMeasured,
    Verdict,
)
from my_utils.profiling.reports.render import render_text

EVIL = "<img src=x onerror=alert(1)>"


def _report(headline: bool = True) -> AnalysisReport:
    temporal = [{"rank": 1, "span_us": 1732965.0, "idle_us": 732352.0, "idle_pct": 42.26}]
    launch = [{"rank": 1, "launches": 22290, "short_kernels": 11913}]
    overlap = [{"rank": 1, "communication_us": 357343.0, "overlap_us": 0.0, "overlap_pct": 0.0}]
    ops = [{"name": f"op{i}", "source": "torch_profiler", "unit": "ms", "total": 100.0 - i, "share": 0.01,
            "share_of": "torch.profiler step time"} for i in range(60)]
    gpu = EvidenceRow("kineto_context", {"rank": 1}, {"gpu": "Tesla V100-SXM2-32GB"})
    idle_row = EvidenceRow("kineto_temporal", {"rank": 1}, {"idle_us": 732352.0, "span_us": 1732965.0})
    context = (Fact("context.gpu", "GPU", "Tesla V100-SXM2-32GB", source="kineto", evidence=(gpu,)),
               Fact("context.world_size", "world size", 2, "count", "kineto"),
               Fact("context.ranks", "ranks", "rank 1", source="kineto"))
    figures = (
        Fact("step_time.median", "median", 345.77, "ms", "torch_profiler", ranks=(1,), steps=5),
        Fact("step_time.p90", "p90", 357.59, "ms", "torch_profiler", ranks=(1,), steps=5),
        Fact("step_time.worst", "worst step", 365.256, "ms", "torch_profiler", ranks=(1,), steps=5, detail="step 3"),
        Fact("gpu.busy", "busy", 57.74, "%", "kineto", "GPU span", 1732.965, "ms", (1,), "device-level union"),
        Fact("gpu.idle", "idle", 42.26, "%", "kineto", "GPU span", 1732.965, "ms", (1,), "device-level union",
             evidence=(idle_row,)),
        Fact("comm.share", "communication", 35.71, "%", "kineto", "GPU kernel time", 1000.6, "ms", (1,)),
        Fact("comm.overlap", "overlapped", 0.0, "%", "kineto", "communication time", 357.343, "ms", (1,),
             evidence=(EvidenceRow("kineto_overlap", {"rank": 1}, {"overlap_us": 0.0}),)),
        Fact("host.sync", "host sync", NotMeasured("no cuda_sync events in the trace"), "ms"),
    )
    findings = [
        Finding("idle:host_wait:rank1", "idle", "critical", "GPU idle 42% of the span, mostly waiting on the host",
                "732 ms of 1,733 ms", {"rank": 1}, "", facts=("gpu.idle",),
                impact=Impact(146.5, 0.42, "idle time per step", 5, 0.625, "torch_profiler"),
                advice=(Advice("CUDA graphs or torch.compile(mode='reduce-overhead')",
                               (EvidenceRow("kineto_launch", {"rank": 1}, {"short_kernels": 11913}),)),)),
        Finding("overlap:rank1", "communication", "warning", "0 ms of 357 ms NCCL overlaps compute", "d",
                {"rank": 1}, "", facts=("comm.overlap",), impact=Impact(71.5, 0.2, "", 5)),
        Finding(f"bottleneck:{EVIL}", "bottleneck", "warning", f"{EVIL} is slow", "d", {}, "",
                advice=(Advice("look", (EvidenceRow("operations", {"name": "op55"}, {"total": 45.0}),)),),
                impact=Impact(229.3, 0.663, "at most all of its time per step", 5, 0.625, "torch_profiler",
                              upper_bound=True)),
        Finding("variability:x", "variability", "info", "x varies", "d"),
    ]
    head = Headline("df_index_resolver.json.gz", context, figures,
                    Verdict("host", ("The GPU waits on the host 42% of the span.", "NCCL never overlaps compute.")),
                    ("idle:host_wait:rank1", "overlap:rank1", f"bottleneck:{EVIL}"))
    return AnalysisReport(
        "1.2", "pretrain", {"overall": 57.0, "performance": 57.0}, findings, {"time_unit": "ms"},
        tables={"kineto_temporal": temporal, "kineto_launch": launch, "kineto_overlap": overlap, "operations": ops,
                "kineto_context": [{"rank": 1, "gpu": "Tesla V100-SXM2-32GB", "world_size": 2}]},
        facts=list(context + figures) if headline else [],
        headline=head.to_dict() if headline else {},
        dimensions={"performance": {"score": 57.0},
                    "memory": {"score": None, "not_measured": "no memory gauge in the run"}})


class _Page(HTMLParser):
    """Ids, links and the text of each section of a page, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.section: list[str] = []
        self.text: dict[str, str] = {}
        self._href: str | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("td", "th", "li", "dd", "dt", "p", "div"):
            where = self.section[-1] if self.section else "top"
            self.text[where] = self.text.get(where, "") + " "
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "section":
            self.section.append(str(a.get("id") or (self.section[-1] if self.section else "top")))
        if tag == "a":
            self._href = a.get("href")
            self.links.append((str(a.get("href")), ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1
        if tag == "a":
            self._href = None
        if tag == "section" and self.section:
            self.section.pop()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        where = self.section[-1] if self.section else "top"
        self.text[where] = self.text.get(where, "") + data
        if self._href is not None and data.strip():
            self.links[-1] = (self.links[-1][0], self.links[-1][1] + data)


def _page(report: AnalysisReport) -> tuple[str, _Page]:
    html = render_text(report, "html")
    page = _Page()
    page.feed(html)
    return html, page


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_headline_comes_first_with_every_figure_and_its_basis() -> None:
    html, page = _page(_report())
    assert page.ids.index("headline") < page.ids.index("summary") < page.ids.index("findings")
    head = _squash(page.text["headline"]) + _squash(page.text.get("top", ""))
    top = _squash(page.text.get("top", ""))
    assert "df_index_resolver.json.gz" in top and "Tesla V100-SXM2-32GB × world size 2" in top
    for text in ("345.8 ms", "p90: 357.6 ms", "worst step: 365.3 ms", "step 3", "42.3%", "busy: 57.7%",
                 "35.7%", "overlapped: 0%", "of communication time = 357.3 ms", "idle · of GPU span = 1,733 ms",
                 "torch.profiler · rank 1 · 5 steps", "The GPU waits on the host 42% of the span.",
                 "NCCL never overlaps compute."):
        assert text in head, text
    # scores sit below the headline's figures, and a dimension without data is not a number
    assert "memory not measured" in head and "performance 57" in head
    assert head.index("Step time") < head.index("Scores:")
    assert 'data-score="memory"' in html and 'title="no memory gauge in the run"' in html


def test_top_three_findings_in_the_headline_link_to_their_evidence_rows() -> None:
    html, page = _page(_report())
    head = _squash(page.text["headline"])
    titles = ["GPU idle 42% of the span, mostly waiting on the host", "0 ms of 357 ms NCCL overlaps compute",
              f"{EVIL} is slow"]
    assert [head.index(t) for t in titles] == sorted(head.index(t) for t in titles)  # in the analysis' order
    assert "x varies" not in head  # the fourth finding is not on the first screen
    assert EVIL not in html and "&lt;img src=x onerror=alert(1)&gt; is slow" in html
    evidence = [h for h, text in page.links if text == "evidence"]
    assert len(evidence) == 3
    # each link lands on the table row the evidence names (pinned even when past the table's cut)
    assert evidence == ["#row-kineto_temporal-0", "#row-kineto_overlap-0", "#row-operations-55"]
    for href in evidence:
        assert href[1:] in page.ids
    assert "idle: 42.3% (less than a half: 11,913 short kernels)" not in head  # nothing invented
    assert "could save up to 146.5 ms per step" in head and "rests on 5 steps" in head
    # a region's whole time bounds a saving; it is never shown as one (before: "could save up to 229.3 ms")
    assert "takes 229.3 ms per step (a fix saves part of it)" in head and "could save up to 229.3" not in head


def test_every_fact_names_its_source_and_whole_and_not_measured_is_said() -> None:
    _, page = _page(_report())
    tables = _squash(" ".join(v for k, v in page.text.items() if k.startswith("table")))
    assert "host sync not measured no cuda_sync events in the trace" in tables
    assert "idle 42.3% of GPU span = 1,733 ms · torch.profiler (Kineto) · device-level union" in tables
    assert "35.7% of device time" not in tables  # shares are given with the whole the analysis named
    assert "1.0% of torch.profiler step time" in tables  # the operations' share column names its whole


def test_markdown_has_the_same_headline() -> None:
    md = render_text(_report(), "markdown")
    head = md.split("## Run")[0]
    for text in ("Tesla V100-SXM2-32GB × world size 2", "**345.8 ms** median", "p90 357.6 ms",
                 "worst step 365.3 ms (step 3)", "**42.3%** idle; busy 57.7%", "overlapped 0% (of communication time", "**Verdict (host):**",
                 "1\\. GPU idle 42% of the span" if "1\\." in head else "1. GPU idle 42% of the span",
                 "evidence: kineto temporal \\[rank=1\\]", "memory not measured (no memory gauge in the run)"):
        assert text in head, text
    assert "&lt;img src=x onerror=alert(1)&gt; is slow" in head and EVIL not in md


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_a_report_without_a_headline_says_so_and_invents_nothing(fmt: str) -> None:
    text = render_text(_report(headline=False), fmt)
    if fmt == "html":
        page = _Page()
        page.feed(text)
        text = " ".join(page.text.values())
    assert "has no headline" in text
    assert "345.8" not in text and "Verdict" not in text  # nothing worked out by the renderer
