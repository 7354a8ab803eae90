"""The operation-matched diff (``kineto.ops.op_diff``) on the real A100 → V100 pair, and in the trace diff's output.

The kernel-name figure it is compared with is recomputed from the raw traces (gzip + json): the
share of the base's GPU time in kernels whose name the target also has.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.ops.op_diff import LEVELS, OpProfile, op_diff
from my_utils.profiling.kineto.ops.op_profile import OpsPass
from my_utils.profiling.kineto.read.provider import read_trace

HTA = "kineto/hta"
CONTROL, TEST = f"{HTA}/trace_diff__control.json.gz", f"{HTA}/trace_diff__test.json.gz"


@lru_cache(maxsize=2)
def _profile(path: str) -> OpProfile:
    return read_trace(path, None, (OpsPass,), events=False).results[0]


def _kernel_time(path: Path) -> dict[str, float]:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    out: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            out[e["name"]] += e["dur"]
    return out


def test_operations_pair_most_of_the_base_where_kernel_names_pair_less(real_fixtures: Any) -> None:
    base, target = real_fixtures / CONTROL, real_fixtures / TEST
    result = op_diff([_profile(str(base))], [_profile(str(target))])
    a, b = _kernel_time(base), _kernel_time(target)
    by_name = 100 * sum(us for name, us in a.items() if name in b) / sum(a.values())
    assert result.name_paired_pct == pytest.approx(by_name)
    assert result.paired_pct >= 90 > by_name
    assert result.paired_pct == pytest.approx(sum(result.by_level.values()))
    assert list(result.by_level) == list(LEVELS)
    operator_levels = sum(result.by_level[level] for level in LEVELS[:4])
    assert operator_levels > by_name  # by operators alone, before any scope-level pairing
    assert any("different GPUs" in n for n in result.notes) and any("CUDA graphs" in n for n in result.notes)
    # the V100 side replays its compiled over-arch from a CUDA graph: paired with the A100's eager operators there
    scoped = [p for p in result.rows if p.level == "annotated scope"]
    assert any(p.stack.endswith("## forward:over_arch ##") and p.base_us and p.target_us for p in scoped)
    # the modelled operators have a percent of the roof where the GPU is in the hardware table (the V100 only)
    assert any(p.target_roofline_pct for p in result.rows) and not any(p.base_roofline_pct for p in result.rows)


def test_one_gpu_model_pairs_everything_at_the_closest_level(real_fixtures: Any) -> None:
    p = _profile(str(real_fixtures / TEST))
    result = op_diff([p], [p])
    assert result.paired_pct == pytest.approx(100) == result.by_level[LEVELS[0]]
    assert result.name_paired_pct == pytest.approx(100)
    assert all(r.delta_us == 0 for r in result.rows)
    assert any("one GPU model" in n for n in result.notes)


def test_the_trace_diff_has_an_operations_section(real_fixtures: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from my_utils.profiling.cli import app

    out, md, html = tmp_path / "diff.json", tmp_path / "diff.md", tmp_path / "diff.html"
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(real_fixtures / CONTROL), "--target-trace",
                                   str(real_fixtures / TEST), "--output", str(out), "--markdown", str(md),
                                   "--html", str(html), "--operations"])
    assert res.exit_code == 0, res.output
    ops = json.loads(out.read_text())["operations"]
    assert ops["paired_pct"] >= 90 > ops["name_paired_pct"] and ops["rows"]
    assert not any("--operations" in n for n in json.loads(out.read_text())["notes"])  # asked for: no pointer to it
    assert set(ops["rows"][0]) >= {"operator", "level", "base_us_per_step", "target_us_per_step",
                                   "base_roofline_pct", "target_roofline_pct"}
    text = md.read_text()
    assert "Operations matched across the runs" in text and "matching kernel names would pair" in text
    assert "Operations matched across the runs" in html.read_text()


def test_the_typed_read_gives_the_profile_the_dict_read_gives(real_fixtures: Any, monkeypatch: Any) -> None:
    """The diff keeps msgspec's typed decoding with the shapes (``needs_shapes``); the dict path is the reference."""
    pytest.importorskip("msgspec")
    path = str(real_fixtures / TEST)
    typed = read_trace(path, None, (OpsPass,), events=False).results[0]
    monkeypatch.setenv("MYUTILS_TYPED_TRACE", "0")
    plain = read_trace(path, None, (OpsPass,), events=False).results[0]
    assert typed.ops == plain.ops and typed.kernels == plain.kernels and typed.total_us == plain.total_us
    assert any(k[1] for k in typed.ops)  # shapes made it through the typed decoding


def test_the_operation_pass_is_opt_in(real_fixtures: Any, tmp_path: Path) -> None:
    """Without --operations the traces are read without the operation pass (the diff's speed, issue 34)."""
    from typer.testing import CliRunner

    from my_utils.profiling.cli import app

    base = target = real_fixtures / f"{HTA}/critical_path__cuda_event_sync.json.gz"  # small: the flag is the point
    for flag, out in ((["--operations"], tmp_path / "on.json"), ([], tmp_path / "off.json")):
        res = CliRunner().invoke(app, ["diff", "--base-trace", str(base), "--target-trace", str(target), "--output",
                                       str(out), *flag])
        assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "on.json").read_text())["operations"]["rows"]
    assert json.loads((tmp_path / "off.json").read_text())["operations"] is None
