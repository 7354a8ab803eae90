"""``ncu diff`` on launches built to sit on each side of its tests (issue 36, ``.ci/mutants/ncu.toml``).

A change is significant only when it is beyond the noise *and* at least ``min_pct`` % of the base;
the gate fails at exactly its percent; a kernel's change splits into a per-launch part (at the
base's launch count) and a launch-count part; a rate unit makes a metric better higher whatever
its name counts; two GPUs are said to differ. Launches are made here as the readers make them
(durations in ms), and each expected figure is worked out by hand in the test.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from my_utils.profiling.analysis.diff_ncu import better_direction, diff_launches, diff_ncu
from my_utils.profiling.ncu.launches import NcuLaunch, read_launches

DURATION = "gpu__time_duration.sum"


def side(kernel: str, durations: list[float], gpu: str | None = None) -> list[NcuLaunch]:
    attrs = {"device__attribute_display_name": gpu} if gpu else {}
    return [NcuLaunch("r.csv", str(i), kernel, {DURATION: (d, "ms")}, dict(attrs)) for i, d in enumerate(durations)]


def verdict(base: list[float], target: list[float]) -> str:
    (row,) = [r for r in diff_launches(side("k", base), side("k", target)).rows if r.metric == DURATION]
    return row.verdict


def test_a_change_must_pass_both_the_noise_and_the_percent_test() -> None:
    """2 % slower with no spread is under min_pct (5 %); 10 % slower inside a ±50 % spread is noise (3 standard
    errors of the difference: 3 × hypot(50/√3, 50/√3) ≈ 122 ms); 10 % slower with no spread is a regression."""
    assert verdict([100.0] * 3, [102.0] * 3) == "unchanged"
    assert verdict([50.0, 150.0] * 2, [60.0, 160.0] * 2) == "unchanged"
    assert verdict([100.0] * 3, [110.0] * 3) == "regressed"


def test_the_gate_fails_at_exactly_its_percent() -> None:
    """100 → 110 ms is +10.0 %: ``regressions(10)`` holds it, ``regressions(10.1)`` does not."""
    d = diff_launches(side("k", [100.0, 100.0]), side("k", [110.0, 110.0]))
    assert [r.delta_pct for r in d.regressions(10.0)] == [pytest.approx(10.0)]
    assert d.regressions(10.1) == []


def test_the_change_splits_into_per_launch_and_launch_count_parts() -> None:
    """2 launches of 1 ms → 4 launches of 2 ms: +6 ms, of which the base's 2 launches taking 1 ms longer are +2 ms
    and the 2 added launches at 2 ms are +4 ms."""
    (k,) = diff_launches(side("k", [1.0, 1.0]), side("k", [2.0] * 4)).kernels
    assert (k.delta_ms, k.per_launch_ms, k.count_ms) == (pytest.approx(6.0), pytest.approx(2.0), pytest.approx(4.0))


def test_a_rate_unit_makes_a_byte_count_better_higher() -> None:
    """The module's rule: a /second unit is a rate whatever the name counts (a metric asked for without its
    ``.per_second`` rollup still comes in bytes per second)."""
    assert better_direction("dram__bytes_read.sum", "Gbyte/second") == "higher"
    assert better_direction("dram__bytes_read.sum", "byte") == "lower"


def test_two_gpus_are_said_to_differ() -> None:
    d = diff_launches(side("k", [1.0, 1.0], "NVIDIA A100-SXM4-80GB"), side("k", [1.0, 1.0], "NVIDIA H100 80GB HBM3"))
    assert any(w.startswith("different GPU: 'NVIDIA A100-SXM4-80GB' vs 'NVIDIA H100 80GB HBM3'") for w in d.warnings)
    same = diff_launches(side("k", [1.0, 1.0], "NVIDIA A100-SXM4-80GB"), side("k", [1.0, 1.0], "NVIDIA A100-SXM4-80GB"))
    assert not any(w.startswith("different GPU") for w in same.warnings)


def _raw_page(path: Path, gpu: str) -> None:
    """``--page raw`` with the GPU's name as a metric column (a text value) and a duration per launch."""
    cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", "device__attribute_display_name", DURATION]
    units = [""] * 12 + ["msecond"]
    rows = [[str(i), "1", "a.out", "h", "k", "1", "7", "(1,1,1)", "(1,1,1)", "0", "8.0", gpu, "1.0"] for i in range(2)]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([cols, units, *rows])
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_the_gpu_named_by_a_raw_export_reaches_the_diff(tmp_path: Path) -> None:
    """The raw page's ``device__attribute_display_name`` is text, not a metric: it was dropped with the other
    non-numbers, so two exports naming different GPUs were compared as "GPU unknown on both sides"."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _raw_page(a, "NVIDIA A100-SXM4-80GB")
    _raw_page(b, "NVIDIA H100 80GB HBM3")
    assert read_launches(a)[0].attrs["device__attribute_display_name"] == "NVIDIA A100-SXM4-80GB"
    warnings = diff_ncu([a], [b]).warnings
    assert any(w.startswith("different GPU: 'NVIDIA A100-SXM4-80GB' vs 'NVIDIA H100 80GB HBM3'") for w in warnings)
    assert not any(w.startswith("GPU unknown") for w in warnings)
