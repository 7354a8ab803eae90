"""``nsys diff``: one kernel made 30 % slower (in a copy of a real export, by SQL) is named and fails the gate."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.analysis.diff_nsys import diff_exports, nvtx_scope
from my_utils.profiling.cli import app

BEFORE = "nsys/nsysai__mfu_2gpu_before.sqlite"
AFTER = "nsys/nsysai__mfu_2gpu_after.sqlite"
SLOWED = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"  # 235 launches over both GPUs


def _slowed_copy(real_fixtures: Any, tmp_path: Path, kernel: str, factor: float) -> Path:
    """A copy of the real export where every launch of ``kernel`` lasts ``factor`` times longer."""
    dst = tmp_path / "slowed.sqlite"
    shutil.copyfile(real_fixtures / BEFORE, dst)
    conn = sqlite3.connect(dst)
    try:
        (sid,), = conn.execute("SELECT id FROM StringIds WHERE value = ?", (kernel,)).fetchall()
        n = conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST((end - start) * ? AS INTEGER) "
                         "WHERE shortName = ?", (factor, sid)).rowcount
        conn.commit()
    finally:
        conn.close()
    assert n == 235
    return dst


def _unchanged_copy(real_fixtures: Any, tmp_path: Path) -> Path:
    dst = tmp_path / "same.sqlite"
    shutil.copyfile(real_fixtures / BEFORE, dst)
    return dst


def test_a_kernel_made_30_percent_slower_is_named(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _slowed_copy(real_fixtures, tmp_path, SLOWED, 1.3)
    result = diff_exports([real_fixtures / BEFORE], [slowed])
    kernels = [c for c in result.significant if c.name.startswith("kernel:")]
    assert len(kernels) == 1 and SLOWED in kernels[0].name
    assert kernels[0].delta_pct == pytest.approx(30.0, abs=0.1)
    others = [c for c in result.changes if c.name.startswith(("kernel:", "nvtx:")) and SLOWED not in c.name]
    assert others and all(c.delta == 0 and not c.significant for c in others)
    assert any(c.name == "kernel:" + kernels[0].name.removeprefix("kernel:") for c in result.regressions(10))


def test_the_gate_fails_on_the_slowed_kernel_and_passes_on_an_unchanged_copy(real_fixtures: Any,
                                                                               tmp_path: Path) -> None:
    slowed = _slowed_copy(real_fixtures, tmp_path, SLOWED, 1.3)
    out = tmp_path / "diff.json"
    md = tmp_path / "diff.md"
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(slowed),
                                   "--fail-on-regression", "20", "--output", str(out), "--markdown", str(md)])
    assert res.exit_code == 1, res.output
    assert "regression over 20%" in res.output and SLOWED in res.output
    data = json.loads(out.read_text())
    assert any(SLOWED in c["name"] and c["significant"] for c in data["changes"])
    assert "FAILED" in md.read_text()
    same = _unchanged_copy(real_fixtures, tmp_path)
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(same), "--fail-on-regression", "20"])
    assert res.exit_code == 0, res.output
    assert "0 significant change(s)" in res.output


def test_a_5_percent_change_stays_under_a_10_percent_gate(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _slowed_copy(real_fixtures, tmp_path, SLOWED, 1.07)
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(slowed), "--fail-on-regression", "10"])
    assert res.exit_code == 0, res.output


def test_before_and_after_of_a_real_fix(real_fixtures: Any) -> None:
    result = diff_exports([real_fixtures / BEFORE], [real_fixtures / AFTER])
    by = {c.name: c for c in result.changes}
    # without NVTX iterations the GPU time per kind is the GPU-level table (one capture a side), not a name
    assert not [n for n in by if n.startswith("category:")]
    rows = {r.key: r for r in result.gpu_rows}
    assert {"busy", "idle", "compute", "communication", "overlap"} <= set(rows)
    assert result.accounting is not None and not result.accounting.measured
    # per-call numbers are stripped: the same operator matches across the two runs
    assert not [n for n in by if "op_id =" in n]
    assert by["nvtx:ncclGroupEnd"].status in ("changed", "unchanged")


def test_nvtx_scope_strips_pytorch_per_call_numbers() -> None:
    assert nvtx_scope("aten::copy_, op_id = 991065") == "aten::copy_"
    assert nvtx_scope("AllToAll4D, seq = 46427, op_id = 994645") == "AllToAll4D"
    assert nvtx_scope("FSDP::pre_forward (blocks.15._checkpoint_wrapped_module), op_id = 9") == \
        "FSDP::pre_forward (blocks.15._checkpoint_wrapped_module)"
    assert nvtx_scope("ProfilerStep#12") == "ProfilerStep#12" and nvtx_scope(None) == ""


def test_per_iteration_categories_and_iteration_time(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _slowed_copy(real_fixtures, tmp_path, SLOWED, 1.3)
    result = diff_exports([real_fixtures / BEFORE], [slowed], iteration_range="FSDP::pre_forward*")
    assert result.step_time is not None and result.step_time.delta == 0  # CPU ranges did not move
    comp = next(c for c in result.changes if c.name == "category:computation")
    conn = sqlite3.connect((real_fixtures / BEFORE).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    (ranges,), = conn.execute("SELECT COUNT(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                              "WHERE COALESCE(n.text, s.value) GLOB 'FSDP::pre_forward*'").fetchall()
    conn.close()
    assert comp.base is not None and comp.base.steps == ranges == 34  # one sample per iteration, both GPUs
    assert comp.base.unit == "ms" and comp.delta >= 0


def test_bad_inputs_exit_2_with_one_line(real_fixtures: Any, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["nsys", "diff", str(tmp_path / "nope.sqlite"), str(real_fixtures / BEFORE)])
    assert res.exit_code == 2 and "no file matches" in res.output
    broken = tmp_path / "broken.sqlite"
    shutil.copyfile(real_fixtures / BEFORE, broken)
    conn = sqlite3.connect(broken)
    conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN copyKind")
    conn.commit()
    conn.close()
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(broken), "--output", str(out)])
    assert res.exit_code == 2
    assert "table CUPTI_ACTIVITY_KIND_MEMCPY" in res.output and "'copyKind'" in res.output and str(broken) in res.output
    assert "Traceback" not in res.output and not out.exists()


def _renamed_ranges(real_fixtures: Any, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the real export where every NVTX range whose text starts with ``old`` starts with ``new`` instead."""
    dst = tmp_path / "renamed.sqlite"
    shutil.copyfile(real_fixtures / BEFORE, dst)
    conn = sqlite3.connect(dst)
    try:
        n = conn.execute("UPDATE NVTX_EVENTS SET text = ? || substr(text, ?) WHERE text LIKE ? || '%'",
                         (new, len(old) + 1, old)).rowcount
        n += conn.execute("UPDATE StringIds SET value = ? || substr(value, ?) WHERE value LIKE ? || '%' AND id IN "
                          "(SELECT textId FROM NVTX_EVENTS)", (new, len(old) + 1, old)).rowcount
        conn.commit()
    finally:
        conn.close()
    assert n > 0
    return dst


def test_an_iteration_range_on_one_side_only_warns(real_fixtures: Any, tmp_path: Path) -> None:
    """Issue 36: only "missing on both sides" was tested; a range on one side only must say so."""
    renamed = _renamed_ranges(real_fixtures, tmp_path, "FSDP::pre_forward", "FSDP::pre_fwd")
    for base, target, missing in ((real_fixtures / BEFORE, renamed, "target"), (renamed, real_fixtures / BEFORE, "base")):
        result = diff_exports([base], [target], iteration_range="FSDP::pre_forward*")
        warning = next(w for w in result.warnings if "on one side only" in w)
        assert f"missing on the {missing}" in warning and "FSDP::pre_forward*" in warning
        assert result.step_time is None  # the iteration time is not compared
        assert result.gpu is not None and {s.window for s in result.gpu} == {"iteration", "capture"}
        assert result.accounting is not None and result.accounting.window == "capture"
    both = diff_exports([real_fixtures / BEFORE], [renamed], iteration_range="no such range*")
    assert any("on either side" in w for w in both.warnings)
    same = diff_exports([real_fixtures / BEFORE], [real_fixtures / BEFORE], iteration_range="FSDP::pre_forward*")
    assert not [w for w in same.warnings if "one side" in w or "either side" in w]


def test_per_iteration_gpu_windows_add_up(real_fixtures: Any, tmp_path: Path) -> None:
    slowed = _slowed_copy(real_fixtures, tmp_path, SLOWED, 1.3)
    result = diff_exports([real_fixtures / BEFORE], [slowed], iteration_range="FSDP::pre_forward*")
    acc = result.accounting
    assert acc is not None and acc.window == "iteration" and acc.measured
    assert result.gpu is not None and result.gpu[0].windows == 34  # one window per (iteration, device)
    for lane in result.gpu[0].lanes:
        assert all(abs(sum(w[1:]) - w[0]) < 1e-9 for w in lane.windows)
    # the remainder is the CPU iteration time against the GPU windows: stated, and the parts plus it add up
    assert sum(c.delta for c in acc.causes) + acc.remainder == pytest.approx(acc.delta, abs=1e-9)
    assert "Iteration time" in result.headline


def test_one_call_per_side_is_never_significant_and_fails_no_gate(real_fixtures: Any) -> None:
    """Two ranks of one job: the all-reduce runs once on each; its +125% is listed as not judged, never a regression."""
    ring = real_fixtures / "nsys/dsl_ring_6ranks"
    a, b = ring / "ault43.cscs.ch_485050.sqlite", ring / "ault44.cscs.ch_739538.sqlite"
    result = diff_exports([a], [b])
    (kernel,) = [c for c in result.changes if c.name.startswith("kernel:")]
    assert kernel.samples == (1, 1) and kernel.status == "unmeasured" and not kernel.significant
    assert kernel.delta_pct is not None and kernel.delta_pct > 100
    assert all(c.measured for c in result.significant)
    res = CliRunner().invoke(app, ["nsys", "diff", str(a), str(b), "--fail-on-regression", "10"])
    assert res.exit_code == 0, res.output
    assert "not judged" in res.output


def test_html_page_leads_with_the_headline(real_fixtures: Any, tmp_path: Path) -> None:
    page = tmp_path / "d.html"
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(real_fixtures / AFTER),
                                   "--html", str(page), "--output", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    text = page.read_text()
    data = json.loads((tmp_path / "d.json").read_text())
    assert text.index('id="headline-text"') < text.index('id="gpu"') < text.index('id="changes"')
    assert "<title>nsys diff:" in text and "GPU level, before → after" in text
    assert res.stdout.splitlines()[0] == data["headline"]
