"""The registered Kineto analyses feed the facts, the findings and the one-trace verdict of the headline."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis.fact_rules import fact_findings
from my_utils.profiling.analysis.facts import build_facts
from my_utils.profiling.analysis.headline import verdict
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.model.report import Fact, Finding

NCCL = "hta/nccl_parser_config__nccl_data.json.gz"


def _facts(tables: dict[str, Any]) -> dict[str, Any]:
    return {f.id: f for f in build_facts({}, tables, {})}


def test_host_bound_verdict_quotes_the_critical_path_and_the_waited_operator(real_fixtures: Any) -> None:
    """simple_add: host-bound; the line names the operator the GPU waited on longest and the path's CPU share."""
    tables = analyze_traces(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz",
                            executor="serial").to_rows()
    every = _facts(tables)
    # simple_add is a one-off program: first CUDA calls (cudaDeviceGetStreamPriorityRange alone 24.6 s) fill 97% of
    # its 41.6 s capture, so with its setup facts it reads as setup-dominated; the host-bound line is checked
    # below on the same facts without them
    assert verdict(every, []).bound == "setup"
    facts = {k: f for k, f in every.items() if not k.startswith("setup.")}
    cpu = facts["critical_path.cpu"]
    assert cpu.unit == "%" and 0 < cpu.number <= 100 and cpu.evidence[0].table == "kineto_critical_path"
    assert facts["idle.host_op"].label == "GPU waited on [param|cuda]"
    assert facts["mfu"].measured is False and "record_shapes" in facts["mfu"].value.reason  # type: ignore[union-attr]
    # the path is quoted only when it covers its window (critical_path.coverage, produced by the Kineto
    # analyses; built here from the table's own row): 41,435 of 41,580 ms here
    (row,) = tables["kineto_critical_path"]
    window_ms = row["window_us"] / 1e3
    cover = Fact("critical_path.coverage", "critical path coverage", 100.0 * row["length_us"] / row["window_us"], "%",
                 "kineto", "the analysed window", window_ms, "ms")
    v = verdict({**facts, cover.id: cover}, [])
    assert v.bound == "host"
    assert "waited longest under [param|cuda]" in v.lines[0] and "of the critical path is CPU work" in v.lines[0]
    assert {"idle.host_op", "critical_path.cpu", "critical_path.coverage"} <= set(v.facts)
    partial = replace(cover, value=69.1)  # a path over 69% of its window is not quoted; its coverage is
    line = verdict({**facts, cover.id: partial}, []).lines[0]
    assert "of the critical path is CPU work" not in line
    assert f"path {0.691 * window_ms:,.1f} ms of a {window_ms:,.1f} ms step" in line
    assert facts["critical_path.coverage"].number == pytest.approx(cover.number)  # the analyses' own coverage
    uncovered = {k: f for k, f in facts.items() if not k.startswith("critical_path.coverage")}
    assert "critical path" not in verdict(uncovered, []).lines[0]  # without its coverage the path is not quoted


def _as_a100(src: Path, dst: Path) -> None:
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    for props in doc["deviceProperties"]:
        props["name"] = "NVIDIA A100-SXM4-80GB"
    with gzip.open(dst, "wt") as fh:
        json.dump(doc, fh)


def test_slow_collectives_become_a_finding_with_their_evidence(real_fixtures: Any, tmp_path: Path) -> None:
    """The NCCL trace's GPU named an A100 SXM4 80GB: its allreduces run far under NVLink's 300 GB/s; the fact
    comm.busbw_link and the finding communication:slow_link carry the rows and the advice."""
    path = tmp_path / "rank0.json.gz"
    _as_a100(real_fixtures / "kineto" / NCCL, path)
    tables = analyze_traces(path, executor="serial").to_rows()
    facts = _facts(tables)
    link = facts["comm.busbw_link"]
    assert 0 < link.number < 25 and link.denominator_value == 300.0
    assert all(e.table == "kineto_collectives" for e in link.evidence)
    found = [Finding.from_dict(f) for f in fact_findings(facts, {}, tables)]
    slow = next(f for f in found if f.id == "communication:slow_link")
    assert slow.facts == ("comm.busbw_link:rank0",) and slow.advice[0].kind == "communication:slow_link"
    assert "NVLink" in slow.suggestion and slow.evidence["excess_ms"] > 0


def test_a_trace_without_gpu_is_cpu_only_and_every_new_fact_is_json(real_fixtures: Any) -> None:
    """rank_non_gpu holds cpu_op and user_annotation events only, no deviceProperties: a CPU-only run (before:
    "not measured", as if the GPU had not been recorded). Without any trace the bound is not measured."""
    tables = analyze_traces(real_fixtures / "kineto" / "hta/rank_non_gpu.json.gz", executor="serial").to_rows()
    facts = _facts(tables)
    assert facts["context.cpu_only"].value == 1
    v = verdict(facts, [])
    assert v.bound == "cpu" and v.lines[0].startswith("CPU-only")
    json.dumps([f.to_dict() for f in facts.values()], allow_nan=False)
    nothing = _facts({})
    assert nothing["context.cpu_only"].measured is False and verdict(nothing, []).bound == "not measured"


@pytest.mark.parametrize("name", ["hta/trace_filter__sampled_rank-0.json.gz", NCCL])
def test_facts_of_each_rank_and_of_the_run(real_fixtures: Any, name: str) -> None:
    facts = _facts(analyze_traces(real_fixtures / "kineto" / name, executor="serial").to_rows())
    for key in ("critical_path.cpu", "critical_path.gpu_compute", "critical_path.overhead", "idle.host_op"):
        assert key in facts and f"{key}:rank0" in facts
        assert facts[key].value == facts[f"{key}:rank0"].value  # one rank: the run is the rank
    parts = ("cpu", "gpu_compute", "communication", "overhead")
    assert sum(facts[f"critical_path.{p}"].number for p in parts) == pytest.approx(100.0)
