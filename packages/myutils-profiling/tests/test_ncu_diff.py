"""``ncu diff``: a kernel made 30 % slower in a copy of a real export is named, judged worse, and fails the gate.

A change is judged only from repeated launches: the kernel slowed here runs twice in the
real export; one slowed that runs once is listed as ``unmeasured`` and fails no gate.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.analysis.diff_ncu import better_direction, diff_ncu
from my_utils.profiling.cli import app

REAL = "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
ONCE = "ampere_sgemm_32x32_sliced1x4_tn"  # one launch in the real export
# two launches of equal duration in the real export
SLOWED = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::batch_norm_calc"
DURATION = "gpu__time_duration.sum"


def _copy_with(real_fixtures: Any, dst: Path, kernel: str | None, factor: float) -> Path:
    """The real export with ``kernel``'s duration scaled (program output before the header kept as is)."""
    lines = (real_fixtures / REAL).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    k, m, v = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
    for r in rows[1:]:
        if kernel is not None and r[k].strip().startswith(kernel) and r[m] == DURATION:
            r[v] = f"{float(r[v].replace(',', '')) * factor:,.0f}"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    dst.write_text("\n".join(lines[:start]) + "\n" + buf.getvalue(), encoding="utf-8")
    return dst


def test_a_kernel_made_30_percent_slower(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _copy_with(real_fixtures, tmp_path / "slow.csv", SLOWED, 1.3)
    d = diff_ncu([real_fixtures / REAL], [slowed])
    (row,) = d.significant
    assert (row.metric, row.verdict, row.better) == (DURATION, "regressed", "lower") and row.kernel.startswith(SLOWED)
    assert row.delta_pct == pytest.approx(30.0, abs=0.05) and (row.base_n, row.target_n) == (2, 2)
    assert all(r.verdict in ("unchanged", "unmeasured") for r in d.rows if r is not row)
    # the kernel time: the slowed kernel's two launches account for the whole change, all of it per launch
    raw = _durations_ms(real_fixtures / REAL)
    (top, *others) = d.kernels
    assert top.kernel.startswith(SLOWED) and all(k.delta_ms == pytest.approx(0, abs=1e-9) for k in others)
    assert top.delta_ms == pytest.approx(0.3 * raw[top.kernel], rel=1e-3)
    assert top.per_launch_ms == pytest.approx(top.delta_ms) and top.count_ms == pytest.approx(0, abs=1e-12)
    assert d.total_ms[0] == pytest.approx(sum(raw.values()), rel=1e-9)
    assert "vectorized_elementwise_kernel<…>" in d.headline and "changed per launch" in d.headline
    faster = diff_ncu([slowed], [real_fixtures / REAL])
    assert faster.significant[0].verdict == "improved" and not faster.regressions(10)


def test_gate(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _copy_with(real_fixtures, tmp_path / "slow.csv", SLOWED, 1.3)
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / REAL), "--target", str(slowed),
                                   "--fail-on-regression", "20", "--output", str(out)])
    assert res.exit_code == 1 and SLOWED[:60] in res.output and "regression over 20%" in res.output
    data = json.loads(out.read_text())
    assert data["significant"] == 1 and data["headline"] in res.output  # the gate's message carries the headline
    same = _copy_with(real_fixtures, tmp_path / "same.csv", None, 1.0)
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / REAL), "--target", str(same),
                                   "--fail-on-regression", "20"])
    assert res.exit_code == 0 and "0 significant change(s)" in res.output


def test_kernels_on_one_side_only(real_fixtures: Any) -> None:
    d = diff_ncu([real_fixtures / REAL], [real_fixtures / "ncu/ai4mat__gcn_paddle_ncu_metrics_show.csv.txt"])
    removed = {r.kernel for r in d.rows if r.verdict == "removed"}
    added = {r.kernel for r in d.rows if r.verdict == "added"}
    assert ONCE in removed and added and not removed & added
    one_side = [r for r in d.rows if r.verdict in ("added", "removed")]
    assert all(r.significant == (max(r.base_n, r.target_n) >= 2) for r in one_side)  # one launch is not judged
    assert {r.significant for r in one_side} == {True, False}


def test_a_change_resting_on_one_launch_is_never_significant(real_fixtures: Any, tmp_path: Path) -> None:
    """Issue 34: one launch a side has no spread; a 30 % slower single launch is listed, not judged, fails no gate."""
    slowed = _copy_with(real_fixtures, tmp_path / "once.csv", ONCE, 1.3)
    d = diff_ncu([real_fixtures / REAL], [slowed])
    row = next(r for r in d.rows if r.kernel == ONCE and r.metric == DURATION)
    assert row.delta_pct == pytest.approx(30.0, abs=0.05)
    assert (row.significant, row.verdict, row.base_n) == (False, "unmeasured", 1)
    assert not d.significant and not d.regressions(10)
    assert d.kernels[0].kernel == ONCE and "per launch not judged" in d.headline
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / REAL), "--target", str(slowed),
                                   "--fail-on-regression", "10"])
    assert res.exit_code == 0, res.output


def _durations_ms(path: Path) -> dict[str, float]:
    """Each kernel's summed ``gpu__time_duration.sum`` in ms, read with the csv module (independent of the reader)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    k, m, v, u = (head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "Metric Unit"))
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}
    out: dict[str, float] = {}
    for r in rows[1:]:
        if r[m] == DURATION:
            out[r[k].strip()] = out.get(r[k].strip(), 0.0) + float(r[v].replace(",", "")) * scale[r[u]]
    return out


@pytest.mark.parametrize(("metric", "unit", "want"), [
    ("gpu__time_duration.sum", "ms", "lower"), ("Duration", "usecond", "lower"), ("dram__bytes.sum", "byte", "lower"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "higher"), ("Achieved Occupancy", "%", "higher"),
    ("launch__block_size", "", None), ("launch__grid_size", "", None),
    # rates are better higher whatever they count (issue 36: a bandwidth gain was a regression), one per family
    ("dram__bytes_read.sum.per_second", "Gbyte/second", "higher"), ("dram__bytes_write.sum.per_second", "", "higher"),
    ("lts__t_bytes.sum.per_second", "byte/second", "higher"), ("l1tex__t_bytes.sum.per_second", "", "higher"),
    ("sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "higher"), ("gpc__cycles_elapsed.max.per_second", "", "higher"),
    ("sm__inst_executed.sum.per_second", "inst/second", "higher"),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_second", "", "higher"),
    ("Memory Throughput", "Gbyte/second", "higher"), ("SM Frequency", "cycle/nsecond", "higher"),
    # the same families as amounts stay lower-is-better
    ("dram__bytes_read.sum", "byte", "lower"), ("sm__cycles_elapsed.avg", "cycle", "lower"),
    ("sm__inst_executed.sum", "inst", "lower")])
def test_better_direction(metric: str, unit: str, want: str | None) -> None:
    assert better_direction(metric, unit) == want


def test_a_bandwidth_gain_does_not_fail_the_gate(real_fixtures: Any, tmp_path: Path) -> None:
    """Issue 36: DRAM read bandwidth up 30 % on a kernel that runs twice is an improvement, never a regression."""
    lines = (real_fixtures / REAL).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    m, u, v, k = (head.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value", "Kernel Name"))

    def with_bandwidth(factor: float, dst: Path) -> Path:
        extra = []
        for r in rows[1:]:
            if r[m] == DURATION:
                copy = list(r)
                copy[m], copy[u] = "dram__bytes_read.sum.per_second", "Gbyte/second"
                copy[v] = f"{100.0 * (factor if r[k].strip().startswith(SLOWED) else 1.0):.3f}"
                extra.append(copy)
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([head, *rows[1:], *extra])
        dst.write_text("\n".join(lines[:start]) + "\n" + buf.getvalue(), encoding="utf-8")
        return dst

    base, faster = with_bandwidth(1.0, tmp_path / "a.csv"), with_bandwidth(1.3, tmp_path / "b.csv")
    d = diff_ncu([base], [faster])
    (row,) = d.significant
    assert (row.metric, row.better, row.verdict) == ("dram__bytes_read.sum.per_second", "higher", "improved")
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(base), "--target", str(faster),
                                   "--fail-on-regression", "10"])
    assert res.exit_code == 0, res.output
