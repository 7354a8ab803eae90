"""``docs/notebooks/``: every notebook runs, top to bottom, on the shared traces, so it cannot rot.

The walkthrough of Holistic Trace Analysis' demo also keeps its promise: each cell tagged with an
HTA call (``metadata.hta``: the call and how many lines HTA's demo spends on it) is no longer than
that. The notebooks are checked in without outputs; the traces come through the fixture registry
(skipping, or failing under ``MYUTILS_REQUIRE_REAL_FIXTURES=1``, when they cannot be had).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "docs" / "notebooks" / "trace_analysis_walkthrough.ipynb"
TRACES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")


def _code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_notebooks_are_checked_in_without_outputs() -> None:
    notebooks = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
    assert WALKTHROUGH in notebooks
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: strip the outputs"


def test_each_hta_step_takes_no_more_lines_than_hta() -> None:
    nb = nbformat.read(WALKTHROUGH, as_version=4)
    tagged = [c for c in nb.cells if c.cell_type == "code" and "hta" in c.metadata]
    calls = {c.metadata["hta"]["call"] for c in tagged}
    # the HTA demo's calls, in its order (examples/trace_analysis_demo.ipynb at the registry's HTA commit)
    assert {"TraceAnalysis(trace_dir=...)", "get_temporal_breakdown", "get_gpu_kernel_breakdown",
            "get_gpu_kernels_with_user_annotations", "get_comm_comp_overlap", "get_idle_time_breakdown",
            "generate_trace_with_counters", "get_queue_length_summary", "get_queue_length_time_series",
            "get_time_spent_blocked_on_full_queue", "get_cuda_kernel_launch_stats",
            "get_frequent_cuda_kernel_sequences"} <= calls
    for cell in tagged:
        assert _code_lines(cell.source) <= cell.metadata["hta"]["lines"], cell.metadata["hta"]["call"]


@pytest.mark.slow
def test_the_walkthrough_runs_on_the_shared_traces(real_fixtures: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in TRACES:
        shutil.copyfile(real_fixtures / name, traces / Path(name).name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("MYUTILS_NOTEBOOK_TRACES", str(traces))
    nb = nbformat.read(WALKTHROUGH, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # what the cells showed is what the traces hold: the temporal table names both ranks, the overlay was written
    temporal = next(c for c in nb.cells if c.metadata.get("hta", {}).get("call") == "get_temporal_breakdown")
    shown = temporal.outputs[0]["data"]["text/plain"]
    assert "idle_pct" in shown
    with gzip.open(traces / Path(TRACES[1]).name, "rt", encoding="utf-8") as fh:
        events = len(json.load(fh)["traceEvents"])
    with gzip.open(work / "rank1_overlay.json.gz", "rt", encoding="utf-8") as fh:
        overlay = json.load(fh)["traceEvents"]
    assert len(overlay) > events  # the trace's events, plus the path's arrows and the counter tracks
    summary = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("print(run.summary())"))
    assert summary.outputs[0]["text"].startswith("verdict: ")
