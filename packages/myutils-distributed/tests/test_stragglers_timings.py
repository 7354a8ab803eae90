"""``stragglers`` on per-rank step and collective times (core's rank-timings seam), without myutils-profiling.

Timings are built here as the readers would hand them; the expected verdicts follow from how each
case was planted (a slow rank, a late host) or not (ranks that differ by noise only).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.errors import InputError, UsageError
from my_utils.core.rank_timings import (
    ENTRY_POINT_GROUP,
    KINETO_TRACE,
    NSYS_EXPORT,
    CollectiveArrival,
    RankTimings,
    StepSpan,
    read_rank_timings,
    timing_file_kind,
)
from my_utils.distributed.stragglers.inputs import classify_inputs
from my_utils.distributed.stragglers.run import stragglers_of
from my_utils.distributed.stragglers.timings import analyze_rank_timings
from my_utils.distributed.stragglers.timings_render import render_timings

runner = CliRunner()


def _rank(rank: int, compute_ms: list[float], *, host: str | None = None, comm_ms: float = 5.0,
          arrival_jitter: list[float] | None = None, sync: bool = True, t0_us: float = 1.7e15) -> RankTimings:
    """One rank's steps: it computes ``compute_ms[i]`` then enters an all-reduce (when ``sync``, every rank leaves
    it together, so step ends line up: the step boundaries of rank 0 are shared, see :func:`_run`)."""
    steps, colls = [], []
    start = t0_us
    for i, c in enumerate(compute_ms):
        arrival = start + (c + (arrival_jitter[i] if arrival_jitter else 0.0)) * 1e3
        end = arrival + comm_ms * 1e3
        steps.append(StepSpan(i, start, end))
        colls.append(CollectiveArrival("AllReduce", i, arrival, end, i))
        start = end
    return RankTimings(rank, f"rank{rank}.json", KINETO_TRACE, "distributedInfo", host, "test clock", tuple(steps),
                       tuple(colls) if sync else ())


def _synced(computes: dict[int, list[float]], hosts: dict[int, str] | None = None, comm_ms: float = 5.0
            ) -> list[RankTimings]:
    """Ranks joined by one all-reduce per step: each arrives after its compute, all leave when the last came."""
    n = len(next(iter(computes.values())))
    start = 1.7e15
    out: dict[int, tuple[list[StepSpan], list[CollectiveArrival]]] = {r: ([], []) for r in computes}
    for i in range(n):
        arrivals = {r: start + c[i] * 1e3 for r, c in computes.items()}
        end = max(arrivals.values()) + comm_ms * 1e3
        for r in computes:
            out[r][0].append(StepSpan(i, start, end))
            out[r][1].append(CollectiveArrival("AllReduce", i, arrivals[r], end, i))
        start = end
    return [RankTimings(r, f"rank{r}.json", KINETO_TRACE, "distributedInfo", (hosts or {}).get(r), "test clock",
                        tuple(s), tuple(c)) for r, (s, c) in out.items()]


def test_a_slow_rank_is_named_by_its_arrivals_and_persistent() -> None:
    # rank 1 computes 30 ms longer every step; its step ends with everyone's, so only arrivals show it
    rng = random.Random(1)
    computes = {0: [100 + rng.uniform(-1, 1) for _ in range(12)], 1: [130 + rng.uniform(-1, 1) for _ in range(12)]}
    report = analyze_rank_timings(_synced(computes), ["run"])
    c = report.collectives
    assert c is not None and c.occurrences == 12 and c.late_rank == 1 and c.late_count == 12
    assert c.persistent and c.sign_test_p == pytest.approx(0.5 ** 12)
    by_rank = {r.rank: r for r in c.per_rank}
    expected = sorted(computes[1][i] - computes[0][i] for i in range(12))
    assert by_rank[1].late_ms == pytest.approx((expected[5] + expected[6]) / 2, abs=1e-3)  # µs on a 1.7e15 clock
    assert by_rank[0].wait_ms == pytest.approx(by_rank[1].late_ms, abs=1e-3)
    assert report.steps is not None and report.steps.straggler is None  # steps end together: waiting, not work
    text = render_timings(report)
    assert "late rank: 1," in text and "persistent" in text


def test_a_rank_slow_in_its_own_steps_is_the_step_straggler() -> None:
    rng = random.Random(2)
    ranks = [_rank(0, [100 + rng.uniform(-2, 2) for _ in range(10)], sync=False),
             _rank(1, [150 + rng.uniform(-2, 2) for _ in range(10)], sync=False)]
    report = analyze_rank_timings(ranks, ["run"])
    s = report.steps
    assert s is not None and s.straggler == 1 and s.late_steps == 10 and s.steps == 10
    assert s.slowdown == pytest.approx(155 / 105, rel=0.05)
    assert report.collectives is None and report.collectives_note.startswith("not measured")
    assert "straggler: rank 1" in render_timings(report)


def test_ranks_differing_by_noise_name_nobody() -> None:
    rng = random.Random(3)
    computes = {r: [100 + rng.gauss(0, 0.5) for _ in range(12)] for r in (0, 1)}
    report = analyze_rank_timings(_synced(computes), ["run"])
    c = report.collectives
    assert c is not None and c.late_rank is None and c.late_host is None and not c.persistent
    lasts = sorted(r.last for r in c.per_rank)
    assert sum(lasts) == 12 and lasts[0] >= 1  # each last on some steps (10 of 12 here by chance: p = 0.019)
    assert report.steps is not None and report.steps.straggler is None
    assert "no persistent late rank or host" in render_timings(report)


def test_a_late_host_is_named_not_its_ranks() -> None:
    # ranks 2 and 3 (host b) arrive ~10 ms after ranks 0 and 1 (host a), 0.2 ms apart inside a host
    rng = random.Random(4)
    base = [100 + rng.uniform(-3, 3) for _ in range(8)]
    computes = {0: [b + rng.uniform(0, 0.2) for b in base], 1: [b + rng.uniform(0, 0.2) for b in base],
                2: [b + 10 + rng.uniform(0, 0.2) for b in base], 3: [b + 10 + rng.uniform(0, 0.2) for b in base]}
    report = analyze_rank_timings(_synced(computes, {0: "a", 1: "a", 2: "b", 3: "b"}), ["run"])
    c = report.collectives
    assert c is not None and c.late_host == "b" and c.late_rank is None and c.persistent
    hosts = {h.host: h for h in c.per_host}
    assert hosts["b"].late == 8 and hosts["b"].ranks == (2, 3)
    assert 9.6 <= hosts["b"].separation_ms <= 10.0 and hosts["b"].spread_ms <= 0.2
    assert 9.8 <= hosts["b"].lag_ms <= 10.2
    text = render_timings(report)
    assert "late host: b (ranks 2, 3)" in text and "The host is late, not one of its ranks." in text


def test_a_spread_inside_hosts_as_large_as_the_gap_names_no_host() -> None:
    # host b is later on average, but its ranks spread as wide as the gap: the host does not explain it
    computes = {0: [100.0] * 8, 1: [108.0] * 8, 2: [104.0] * 8, 3: [112.0] * 8}
    report = analyze_rank_timings(_synced(computes, {0: "a", 1: "a", 2: "b", 3: "b"}), ["run"])
    c = report.collectives
    assert c is not None and c.late_host is None
    assert c.late_rank == 3 and c.persistent  # the last rank, always: named as a rank, its host shown
    assert "late rank: 3 on host b" in render_timings(report)


def test_one_collective_is_one_observation_and_no_steps_is_not_measured() -> None:
    ranks = [RankTimings(r, f"r{r}.sqlite", NSYS_EXPORT, "environment PMI_RANK", "h1" if r < 2 else "h2", "UTC",
                         (), (CollectiveArrival("AllReduce", 0, 1e15 + (20_000 if r < 2 else 0) + r * 100,
                                                1e15 + 40_000),), notes=("no NVTX iteration range",))
             for r in range(4)]
    report = analyze_rank_timings(ranks, ["x"])
    assert report.steps is None and report.steps_note.startswith("not measured")
    c = report.collectives
    assert c is not None and c.occurrences == 1 and c.late_host == "h1" and not c.persistent
    assert "one observation" in report.collectives_note
    assert report.notes == ["ranks 0, 1, 2, 3: no NVTX iteration range"]
    text = render_timings(report)
    assert "steps: not measured" in text and "last on 1 of 1." in text and ", persistent" not in text


def _kineto_file(path: Path) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": []}))
    return path


def test_without_a_reader_the_command_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry-point lookup finds no reader (myutils-profiling absent): one line, exit 2, nothing else."""
    import my_utils.core.entry_point_cache as cache

    real = cache.cached_entry_points
    monkeypatch.setattr(cache, "cached_entry_points",
                        lambda group, *a, **k: [] if group == ENTRY_POINT_GROUP else real(group, *a, **k))
    _kineto_file(tmp_path / "rank0.json")
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "1 Kineto trace(s) given" in result.stderr and "pip install myutils-profiling" in result.stderr


class _EntryPoint:
    def __init__(self, name: str, obj: Any) -> None:
        self.name, self.value, self.dist, self._obj = name, f"tests:{name}", None, obj

    def load(self) -> Any:
        if isinstance(self._obj, BaseException):
            raise self._obj
        return self._obj


def test_a_broken_reader_is_named_and_the_others_still_run(tmp_path: Path) -> None:
    path = _kineto_file(tmp_path / "t.json")
    good = RankTimings(0, str(path), KINETO_TRACE)
    read = read_rank_timings([path], [_EntryPoint("broken", ImportError("no module named x")),
                                      _EntryPoint("raises", lambda paths: 1 / 0),
                                      _EntryPoint("good", lambda paths: [good])])
    assert read.timings == [good] and read.readers == 2
    assert [(f.name, f.reason) for f in read.failures] == [
        ("broken", "ImportError: no module named x"), ("raises", "ZeroDivisionError: division by zero")]


def test_a_reader_switched_off_is_never_imported_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _kineto_file(tmp_path / "t.json")
    good = _synced({0: [10.0]})[0]
    monkeypatch.setenv("MYUTILS_DISABLE_PLUGINS", "off")
    read = read_rank_timings([path], [_EntryPoint("off", ImportError("imported although switched off")),
                                      _EntryPoint("good", lambda paths: [good])])
    assert read.timings == [good] and read.readers == 1 and read.failures == []
    assert read.disabled == ["reader 'off' (no distribution): disabled by MYUTILS_DISABLE_PLUGINS (entry 'off')"]
    # the installed reader (myutils-profiling's) switched off: the command says so, not "pip install"
    monkeypatch.setenv("MYUTILS_DISABLE_PLUGINS", "myutils-profiling:profiling")
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert "every installed reader of them is switched off" in result.stderr
    assert "'myutils-profiling:profiling'" in result.stderr and "pip install" not in result.stderr


def test_bad_input_from_a_reader_is_the_users_error(tmp_path: Path) -> None:
    path = _kineto_file(tmp_path / "t.json")

    def refuse(paths: list[Path]) -> None:
        raise InputError(paths[0], "line 1", "a trace")

    with pytest.raises(InputError, match="line 1"):
        read_rank_timings([path], [_EntryPoint("refuse", refuse)])


def test_file_kinds_are_told_by_content(tmp_path: Path) -> None:
    import gzip

    (tmp_path / "a.txt").write_bytes(b"SQLite format 3\x00rest")
    with gzip.open(tmp_path / "b.bin", "wt") as fh:
        fh.write('{"traceEvents": []}')
    (tmp_path / "c.json").write_text('{"not": "a trace"}')
    assert timing_file_kind(tmp_path / "a.txt") == NSYS_EXPORT
    assert timing_file_kind(tmp_path / "b.bin") == KINETO_TRACE
    assert timing_file_kind(tmp_path / "c.json") is None
    # a folder holds what it holds: the non-trace file is passed over, a named one is refused
    found = classify_inputs([tmp_path])
    assert [p.name for p in found.files] == ["a.txt", "b.bin"] and found.csv_dir is None
    with pytest.raises(InputError, match=r"c\.json.*this file is none of them"):
        classify_inputs([tmp_path / "c.json"])
    with pytest.raises(UsageError, match="no file matches"):
        classify_inputs([str(tmp_path / "*.nothing")])


def test_executor_is_refused_for_profiler_files(tmp_path: Path) -> None:
    _kineto_file(tmp_path / "t.json")
    with pytest.raises(UsageError, match="only MyTimer CSV runs are parsed in a pool"):
        stragglers_of([tmp_path], executor="process")
