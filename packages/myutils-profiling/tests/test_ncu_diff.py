"""``ncu diff``: a kernel made 30 % slower in a copy of a real export is named, judged worse, and fails the gate."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.ncu.diff import better_direction, diff_ncu

REAL = "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
SLOWED = "ampere_sgemm_32x32_sliced1x4_tn"
DURATION = "gpu__time_duration.sum"


def _copy_with(real_fixtures: Any, dst: Path, kernel: str | None, factor: float) -> Path:
    """The real export with ``kernel``'s duration scaled (program output before the header kept as is)."""
    lines = (real_fixtures / REAL).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    k, m, v = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
    for r in rows[1:]:
        if r[k].strip() == kernel and r[m] == DURATION:
            r[v] = f"{float(r[v].replace(',', '')) * factor:,.0f}"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    dst.write_text("\n".join(lines[:start]) + "\n" + buf.getvalue(), encoding="utf-8")
    return dst


def test_a_kernel_made_30_percent_slower(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _copy_with(real_fixtures, tmp_path / "slow.csv", SLOWED, 1.3)
    d = diff_ncu([real_fixtures / REAL], [slowed])
    (row,) = d.significant
    assert (row.kernel, row.metric, row.verdict, row.better) == (SLOWED, DURATION, "regressed", "lower")
    assert row.delta_pct == pytest.approx(30.0, abs=0.05)
    assert all(r.verdict == "unchanged" for r in d.rows if r is not row)
    faster = diff_ncu([slowed], [real_fixtures / REAL])
    assert faster.significant[0].verdict == "improved" and not faster.regressions(10)


def test_gate(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _copy_with(real_fixtures, tmp_path / "slow.csv", SLOWED, 1.3)
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / REAL), "--target", str(slowed),
                                   "--fail-on-regression", "20", "--output", str(out)])
    assert res.exit_code == 1 and SLOWED in res.output and "regression over 20%" in res.output
    assert json.loads(out.read_text())["significant"] == 1
    same = _copy_with(real_fixtures, tmp_path / "same.csv", None, 1.0)
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / REAL), "--target", str(same),
                                   "--fail-on-regression", "20"])
    assert res.exit_code == 0 and "0 significant change(s)" in res.output


def test_kernels_on_one_side_only(real_fixtures: Any) -> None:
    d = diff_ncu([real_fixtures / REAL], [real_fixtures / "ncu/ai4mat__gcn_paddle_ncu_metrics_show.csv.txt"])
    removed = {r.kernel for r in d.rows if r.verdict == "removed"}
    added = {r.kernel for r in d.rows if r.verdict == "added"}
    assert SLOWED in removed and added and not removed & added


@pytest.mark.parametrize(("metric", "unit", "want"), [
    ("gpu__time_duration.sum", "ms", "lower"), ("Duration", "usecond", "lower"), ("dram__bytes.sum", "byte", "lower"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "higher"), ("Achieved Occupancy", "%", "higher"),
    ("launch__block_size", "", None), ("launch__grid_size", "", None)])
def test_better_direction(metric: str, unit: str, want: str | None) -> None:
    assert better_direction(metric, unit) == want
