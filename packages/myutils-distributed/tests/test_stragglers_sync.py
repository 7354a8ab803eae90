"""``analyze_stragglers`` on runs whose ranks meet in a collective each step: working told from waiting,
one spike told from a straggler, two ranks that merely differ, periodic stalls, sections on one rank.

The runs are generated here with known times: each step, every rank runs ``data``, ``forward``,
``backward`` and ``optimizer``; ``backward`` ends in an all-reduce, so every rank leaves it when the
last one has done its own backward work (as DDP's gradient all-reduce does). Expected values are
computed from the planted times, not read back through the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.profile_csv import HEADER_LINE, format_metadata, format_profile_line
from my_utils.distributed.stragglers import analyze_stragglers, render_text

BASE_NS = 1_764_000_000_000_000_000
SECTIONS = (("data", 1.0), ("forward", 5.0), ("backward", 8.0), ("optimizer", 1.0))
#: Extra ms planted in (rank, step, section); the default is none.
Extra = Callable[[int, int, str], float]


def _jitter(rank: int, step: int, node: int) -> float:
    """A fixed ±2 % pattern, different per rank, step and section (never a tie between ranks)."""
    return 1 + 0.02 * ((((rank * 7 + step * 3 + node * 5) % 5) - 2) / 2) + 0.001 * rank


def sync_run(folder: Path, ranks: int, steps: int, extra: Extra = lambda r, s, n: 0.0,
             only: tuple[str, int] | None = None,
             sections: tuple[tuple[str, float], ...] = SECTIONS) -> dict[int, dict[int, dict[str, float]]]:
    """Write the run; return the planted work ms per (rank, step, section), waits left out.

    ``only=(section, rank)`` adds a section that runs on that rank alone (an evaluation, say).
    """
    folder.mkdir(parents=True, exist_ok=True)
    work: dict[int, dict[int, dict[str, float]]] = {r: {} for r in range(ranks)}
    lines: dict[int, list[str]] = {r: [HEADER_LINE] for r in range(ranks)}
    t0 = BASE_NS
    for step in range(steps):
        clock = dict.fromkeys(range(ranks), t0)
        for node, (name, base) in enumerate(sections):
            starts = dict(clock)
            for r in range(ranks):
                ms = base * _jitter(r, step, node) + extra(r, step, name)
                work[r].setdefault(step, {})[name] = ms
                clock[r] = starts[r] + round(ms * 1e6)
            if name == "backward":  # the all-reduce: everyone leaves 0.1 ms after the last arrives
                out = max(clock.values()) + 100_000
                clock = dict.fromkeys(range(ranks), out)
            for r in range(ranks):
                meta = format_metadata({"node_id": node, "parent_id": -1, "depth": 0})
                lines[r].append(format_profile_line(starts[r], f"h_rank{r}", step, name, "START", 0.0, meta))
                lines[r].append(format_profile_line(clock[r], f"h_rank{r}", step, name, "END",
                                                    (clock[r] - starts[r]) / 1e6, meta))
        if only is not None:
            name, r = only
            meta = format_metadata({"node_id": 9, "parent_id": -1, "depth": 0})
            lines[r].append(format_profile_line(clock[r], f"h_rank{r}", step, name, "START", 0.0, meta))
            clock[r] += 2_000_000
            lines[r].append(format_profile_line(clock[r], f"h_rank{r}", step, name, "END", 2.0, meta))
        t0 = max(clock.values()) + 200_000
    for r in range(ranks):
        (folder / f"profile_rank_{r}.csv").write_text("".join(lines[r]), encoding="utf-8")
    return work


def _section(report: object, name: str) -> object:
    return next(s for s in report.sections if s.section == name)  # type: ignore[attr-defined]


def test_the_rank_slow_in_forward_is_named_and_the_other_ranks_wait_is_not_blamed(tmp_path: Path) -> None:
    """Before: rank 0's backward (where it waits in the all-reduce for rank 1) was a second straggler."""
    work = sync_run(tmp_path, 2, 30, extra=lambda r, s, n: 30.0 if (r, n) == (1, "forward") else 0.0)
    report = analyze_stragglers(tmp_path)
    assert report.stragglers == [(1, "forward")]
    backward = _section(report, "backward")
    assert backward.collective and backward.straggler is None and backward.outliers == []
    # rank 0 waited rank 1's extra forward time (plus the jitter of the sections before) in backward
    waits = [work[1][s]["data"] + work[1][s]["forward"] - work[0][s]["data"] - work[0][s]["forward"]
             for s in range(30)]
    assert [(w.rank, round(w.ms, 3)) for w in backward.waiting] == [(0, round(sum(waits) / 30, 3))]
    forward = _section(report, "forward")
    assert forward.late_steps == 30 and forward.slowest_excess_ms == pytest.approx(30.0, abs=0.3)
    text = render_text(report)
    assert "persistent stragglers: rank 1 in forward" in text
    assert "waiting: rank 0 waits" in text and "in backward" in text


def test_one_spike_is_an_outlier_of_its_step_not_a_straggler(tmp_path: Path) -> None:
    """Before: the mean of per-step ratios lifted one 30x step over 1.2, and with two ranks one of them is
    always "slowest in at least 50% of steps": the spike's rank was a persistent straggler."""
    sync_run(tmp_path, 2, 36, extra=lambda r, s, n: 200.0 if (r, s, n) == (1, 20, "forward") else 0.0)
    report = analyze_stragglers(tmp_path)
    assert report.stragglers == []
    assert [(name, o.rank, o.step) for name, o in report.outliers] == [("forward", 1, 20)]
    (_name, spike), = report.outliers
    assert spike.excess_ms == pytest.approx(200.0, abs=1.0)
    assert _section(report, "backward").outliers == []  # rank 0 waited for it there: no outlier of rank 0
    assert "step 20 rank 1 forward" in render_text(report)


def test_two_ranks_that_merely_differ_name_nobody(tmp_path: Path) -> None:
    """Rank 1 is 8 % slower in forward on every step: slowest always, but not by the minimum slowdown."""
    sync_run(tmp_path, 2, 30, extra=lambda r, s, n: 0.4 if (r, n) == (1, "forward") else 0.0)
    report = analyze_stragglers(tmp_path)
    forward = _section(report, "forward")
    assert forward.slowest_rank == 1 and forward.slowest_steps == 30
    assert report.stragglers == [] and forward.late_steps == 0


@pytest.mark.parametrize("fraction", [0.5, 0.8])
def test_a_straggler_needs_the_persistent_fraction_of_late_steps(tmp_path: Path, fraction: float) -> None:
    """Late (1.5x) on 27 of 36 steps (more than chance: sign test p = 0.002): a straggler at a fraction of
    0.5, not at 0.8; at exactly the fraction (0.75) too."""
    sync_run(tmp_path, 2, 36, extra=lambda r, s, n: 2.5 if (r, n) == (1, "forward") and s % 4 else 0.0)
    report = analyze_stragglers(tmp_path, persistent_fraction=fraction)
    forward = _section(report, "forward")
    assert forward.late_steps == 27 and forward.sign_test_p < 0.01
    assert report.stragglers == ([(1, "forward")] if fraction <= 27 / 36 else [])
    at = analyze_stragglers(tmp_path, persistent_fraction=27 / 36)
    assert at.stragglers == [(1, "forward")]


def test_a_periodic_stall_gives_its_period(tmp_path: Path) -> None:
    stalled = list(range(3, 36, 6))
    sync_run(tmp_path, 2, 36, extra=lambda r, s, n: 80.0 if (r, n) == (0, "data") and s in stalled else 0.0)
    report = analyze_stragglers(tmp_path)
    data = _section(report, "data")
    assert data.period == 6 and sorted(o.step for o in data.outliers) == stalled
    assert {o.rank for o in data.outliers} == {0} and report.stragglers == []
    assert "periodic: rank 0 in data every 6 steps (steps 3, 9, 15, 21, 27, 33)" in render_text(report)


def test_outliers_need_the_minimum_excess(tmp_path: Path) -> None:
    """A 12 ms hiccup in one step is the scheduler's, below the default 20 ms; 10 ms lets it through."""
    sync_run(tmp_path, 2, 20, extra=lambda r, s, n: 12.0 if (r, s, n) == (1, 5, "data") else 0.0)
    assert analyze_stragglers(tmp_path).outliers == []
    assert [o.step for _n, o in analyze_stragglers(tmp_path, min_excess_ms=10).outliers] == [5]


def test_a_section_on_one_rank_counts_its_steps(tmp_path: Path) -> None:
    """Before: a section run by one rank for 30 steps showed "steps 0"."""
    sync_run(tmp_path, 2, 30, only=("eval", 0))
    report = analyze_stragglers(tmp_path)
    evaluation = _section(report, "eval")
    assert (evaluation.steps, evaluation.seen_steps, evaluation.ranks) == (0, 30, 1)
    assert evaluation.max.ms == pytest.approx(2.0, rel=1e-3) and evaluation.straggler is None
    row = next(line for line in render_text(report).splitlines() if line.startswith("eval"))
    assert row.split()[1:4] == ["0", "of", "30"]


def test_json_carries_the_new_fields(tmp_path: Path) -> None:
    sync_run(tmp_path, 2, 12, extra=lambda r, s, n: 150.0 if (r, s, n) == (0, 4, "optimizer") else 0.0)
    result = CliRunner().invoke(build_app(), ["stragglers", str(tmp_path), "--json", "--min-excess-ms", "50"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 2 and doc["min_excess_ms"] == 50
    assert [(o["section"], o["rank"], o["step"]) for o in doc["outliers"]] == [("optimizer", 0, 4)]
    backward = next(s for s in doc["sections"] if s["section"] == "backward")
    assert set(backward) >= {"collective", "waiting", "late_steps", "seen_steps", "period", "end_spread_ratio"}


def test_late_on_just_over_half_the_steps_is_chance_with_two_ranks(tmp_path: Path) -> None:
    """Rank 1 is 1.3x rank 0 on 19 of 36 steps and slightly faster on the rest: its median ratio is 1.3 and
    it is late on more than half the steps, but 19 of 36 is what chance gives (sign test p = 0.43): no
    straggler. On 27 of 36 (p = 0.002) it is one."""
    late = set(range(0, 36, 2)) | {1}
    sync_run(tmp_path, 2, 36, extra=lambda r, s, n: (1.5 if s in late else -0.15) if (r, n) == (1, "forward") else 0.0)
    forward = _section(analyze_stragglers(tmp_path), "forward")
    assert forward.late_steps == 19 and forward.slowdown > 1.2
    assert forward.sign_test_p == pytest.approx(0.4340, abs=1e-3) and forward.straggler is None
    more = set(range(27))
    sync_run(tmp_path, 2, 36, extra=lambda r, s, n: (1.5 if s in more else -0.15) if (r, n) == (1, "forward") else 0.0)
    forward = _section(analyze_stragglers(tmp_path), "forward")
    assert forward.late_steps == 27 and forward.sign_test_p < 0.01 and forward.straggler == 1


def test_a_straggler_must_cost_a_share_of_the_step(tmp_path: Path) -> None:
    """A 0.05 ms section twice as slow on rank 1 every step (0.3 % of a 15 ms step) is no straggler; 0.5 ms is."""
    tiny = (*SECTIONS, ("log", 0.05))
    sync_run(tmp_path, 2, 30, extra=lambda r, s, n: 0.05 if (r, n) == (1, "log") else 0.0, sections=tiny)
    log = _section(analyze_stragglers(tmp_path), "log")
    assert log.late_steps == 30 and log.sign_test_p < 0.01 and log.straggler is None
    sync_run(tmp_path, 2, 30, extra=lambda r, s, n: 0.5 if (r, n) == (1, "log") else 0.0, sections=tiny)
    assert _section(analyze_stragglers(tmp_path), "log").straggler == 1
