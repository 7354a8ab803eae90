"""HTA's ``CombinedOperatorFilter`` against its own test values (``tests/test_trace_filter.py::testCombinedOperatorFilter``,
HTA f4d0062), on the trace HTA tests it with, and its criteria recomputed from the raw events.

HTA counts rows of its trace DataFrame; ours are the rows of the same tables (``ProfilerStep`` events once).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.profiling.kineto.filters import TraceFilter
from my_utils.profiling.kineto.operator_filter import CombinedOperatorFilter
from my_utils.profiling.kineto.rank_data import RankData
from my_utils.profiling.kineto.run import read_rank


def rows(d: RankData) -> int:
    return len(d.gpu_ts) + len(d.rt_ts) + len(d.op_ts) + len(d.ann_ts) + len(d.hsync_ts) + len(d.step_events)


@pytest.fixture(scope="module")
def trace(real_fixtures: Any) -> Path:
    return Path(real_fixtures / "kineto" / "hta/trace_filter__sampled_rank-0.json.gz")


@pytest.fixture(scope="module")
def rank0(trace: Path) -> RankData:
    return read_rank(trace).data


@pytest.mark.parametrize(("root", "preceding", "following", "gpu", "events", "kernels"), [
    ("## forward ##", "All2All_Pooled_Wait", "forward", False, 2, 0),
    ("## forward ##", "All2All_Pooled_Wait", "forward", True, 3, 1),
    ("## forward ##", "All2All_Pooled_Wait", "## sdd_preprocess_tensors ##", True, 411, 104),
])
def test_htas_expected_rows(rank0: RankData, root: str, preceding: str, following: str, gpu: bool, events: int,
                            kernels: int) -> None:
    """HTA's three cases: 2 events and no kernel, 3 and 1, 411 and 104."""
    kept = CombinedOperatorFilter(root, preceding, following, gpu).apply(rank0)
    assert rows(kept) == events
    assert len(kept.gpu_ts) == kernels


def test_the_slice_is_what_the_criteria_say(trace: Path, rank0: RankData) -> None:
    """Recomputed from the raw events: the CPU events of the first iteration under the first '## forward ##', starting
    at or after the end of its last 'All2All_Pooled_Wait'; '## sdd_preprocess_tensors ##' starts after that forward
    ends, so it is not in the slice and HTA leaves the third criterion out."""
    with gzip.open(trace, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    step = min((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    cpu = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
           and step["ts"] <= e["ts"] < step["ts"] + step["dur"]]
    root = min((e for e in cpu if e["name"] == "## forward ##"), key=lambda e: e["ts"])
    under = [e for e in cpu if e["ts"] >= root["ts"] and e["ts"] + e["dur"] <= root["ts"] + root["dur"]]
    wait = max((e for e in under if e["name"] == "All2All_Pooled_Wait"), key=lambda e: e["ts"])
    after = [e for e in under if e["ts"] >= wait["ts"] + wait["dur"]]
    assert not [e for e in after if e["name"] == "## sdd_preprocess_tensors ##"]
    assert min(e["ts"] for e in cpu if e["name"] == "## sdd_preprocess_tensors ##") > root["ts"] + root["dur"]
    want = after
    kept = CombinedOperatorFilter("## forward ##", "All2All_Pooled_Wait", "## sdd_preprocess_tensors ##").apply(rank0)
    assert rows(kept) == len(want) == 411 - 104
    corr = {e["args"]["correlation"] for e in want if e["cat"] in ("cuda_runtime", "cuda_driver")}
    launched = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                and e.get("args", {}).get("correlation") in corr]
    with_gpu = CombinedOperatorFilter("## forward ##", "All2All_Pooled_Wait", "## sdd_preprocess_tensors ##",
                                      include_gpu_kernels=True).apply(rank0)
    assert len(with_gpu.gpu_ts) == len(launched) == 104


def test_a_missing_name_leaves_its_criterion_out(rank0: RankData) -> None:
    """Unlike the single 'under' filter (nothing kept), a name HTA does not find drops only its own criterion."""
    just_root = CombinedOperatorFilter("## forward ##", "no such op", "no such op either").apply(rank0)
    under = TraceFilter(first_iteration=True, under="## forward ##", include_gpu_kernels=False).apply(rank0)
    assert rows(just_root) == rows(under) > 0
    assert rows(TraceFilter(under="no such op").apply(rank0)) == 0


def test_stack_depths_keep_one_level(rank0: RankData) -> None:
    """``depths`` (HTA's ``stack_depths``) keeps CPU events at those depths of the call stack only."""
    from my_utils.profiling.kineto.call_stacks import build_stacks

    f = CombinedOperatorFilter("## forward ##", "All2All_Pooled_Wait", "## sdd_preprocess_tensors ##")
    every = f.apply(rank0)
    s = build_stacks(rank0)
    depth = dict(zip(s.index.tolist(), s.depth.tolist(), strict=True))
    kept = list(every.op_index.tolist()) + list(every.ann_index.tolist()) + list(every.rt_index.tolist())
    shallowest = min(depth[i] for i in kept)
    top = CombinedOperatorFilter(f.root, f.preceding, f.following, depths=(shallowest,)).apply(rank0)
    assert rows(top) == sum(1 for i in kept if depth[i] == shallowest) > 0
    assert rows(top) < rows(every)


def test_filter_text_and_description(rank0: RankData) -> None:
    """``--filter "combined=ROOT|PRECEDING|FOLLOWING; combined_gpu"`` is the same filter, said in words."""
    parsed = TraceFilter.parse("combined=## forward ##|All2All_Pooled_Wait|forward; combined_gpu")
    assert parsed.combined == CombinedOperatorFilter("## forward ##", "All2All_Pooled_Wait", "forward", True)
    assert rows(parsed.apply(rank0)) == 3
    assert "after the last 'All2All_Pooled_Wait'" in parsed.describe()
    with pytest.raises(UsageError, match="combined_gpu needs combined"):
        TraceFilter.parse("combined_gpu")
    with pytest.raises(UsageError, match="expected an operator or annotation name"):
        CombinedOperatorFilter("", "a", "b")
