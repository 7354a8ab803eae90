"""Clock sync, padding and stragglers on real gloo ranks (separate processes, 127.0.0.1 only).

Two launches for the whole module (a rank interpreter imports torch: seconds on a busy
2-core machine): 2 ranks for everything timed, 4 ranks for alignment against a reference,
padding and a real MyTimer run with one slow rank. Clock assertions use the bound that holds
by construction (|estimate - truth| <= uncertainty), so they cannot flake on a loaded machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.distributed.testing import run_gloo

WORKERS = Path(__file__).resolve().parent / "gloo_workers.py"
sys.path.insert(0, str(WORKERS.parent))
import gloo_workers  # noqa: E402

sys.path.remove(str(WORKERS.parent))

EPS = 2e-6  # float rounding of ns -> s, and the clock read between t1 and t4


@pytest.fixture(scope="module")
def pair() -> list[dict[str, Any]]:
    return run_gloo(f"{WORKERS}:clock_pair", 2, kwargs={"gap_s": 1.0}, timeout=90)


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("four")
    runs = {"slow": [str(base / "slow"), 2], "even": [str(base / "even"), None]}
    results = run_gloo(f"{WORKERS}:four_ranks", 4, kwargs={"runs": runs, "steps": 10}, timeout=120)
    return {"results": results, "runs": {k: Path(v[0]) for k, v in runs.items()}}


def _within(estimate: dict[str, Any], truth_s: float) -> None:
    error = estimate["offset_s"] - truth_s
    assert abs(error) <= estimate["uncertainty_s"] + EPS, (error, estimate)
    assert estimate["uncertainty_s"] <= estimate["best_rtt_s"] / 2 + EPS


def test_seed_example_over_gloo(pair: list[dict[str, Any]]) -> None:
    server, client = pair
    assert server["seed_offset"] == 0.0
    # one host, one clock: the client's offset is 0 within the bound of a sync like it
    assert abs(client["seed_offset"]) <= client["same_clock"]["best_rtt_s"] * 50 + 1e-3
    _within(client["same_clock"], 0.0)


def test_injected_skew_recovered_within_uncertainty(pair: list[dict[str, Any]]) -> None:
    skew = pair[1]["skew"]
    _within(skew, -gloo_workers.INJECTED_SKEW_NS / 1e9)
    assert skew["samples"] == 60 and skew["kept"] == 1
    assert pair[0]["skew"]["offset_s"] == 0.0 and pair[0]["skew"]["uncertainty_s"] == 0.0


def test_two_syncs_apart_give_the_drift_rate(pair: list[dict[str, Any]]) -> None:
    from my_utils.distributed.clock_estimate import ClockEstimate, estimate_drift

    first, second = (ClockEstimate(**{k: e[k] for k in ("offset_s", "uncertainty_s", "measured_at_s")},
                                   best_rtt_s=e["best_rtt_s"], samples=e["samples"], kept=e["kept"])
                     for e in pair[1]["drift"])
    drift = estimate_drift(first, second)
    # rank 1's clock gains DRIFT s per s; measured against rank 1's own (drifting) seconds
    truth = -gloo_workers.DRIFT / (1 + gloo_workers.DRIFT)
    assert drift.interval_s > 0.9
    assert abs(drift.rate - truth) <= drift.uncertainty + 2 * EPS / drift.interval_s, (drift, truth)
    assert abs(drift.ppm - truth * 1e6) < 1000  # 2000 ppm injected: seen as such, not as noise


def test_silent_peer_times_out_naming_it(pair: list[dict[str, Any]]) -> None:
    message = pair[0]["silent_peer"]
    assert message.startswith("ClockSynchronizer on rank 0: no request from rank 1 within 1 s"), message
    assert "is rank 1 calling ClockSynchronizer.sync(is_server=False, peer_rank=0)?" in message
    assert 0.9 <= pair[0]["silent_peer_s"] < 10


def test_every_rank_listens_on_loopback_only(pair: list[dict[str, Any]]) -> None:
    listeners = [addr for rank in pair for addr in rank["listeners"]]
    assert listeners and all(addr.startswith("127.0.0.1:") for addr in listeners), listeners


def test_four_ranks_align_to_the_reference(four: dict[str, Any]) -> None:
    skews = gloo_workers.FOUR_RANK_SKEWS_NS
    for rank, result in enumerate(four["results"]):
        estimate = result["skewed"]
        if rank == 0:
            assert estimate["offset_s"] == 0.0 and estimate["uncertainty_s"] == 0.0
        else:  # the bound holds by construction even with 4 ranks on 2 cores (no timing assumed)
            _within(estimate, (skews[0] - skews[rank]) / 1e9)


@pytest.mark.parametrize("world", [2, 4])
def test_padding_gathers_unequal_tensors(pair: list[dict[str, Any]], four: dict[str, Any], world: int) -> None:
    cases = [r["padding"] for r in (pair if world == 2 else four["results"])]
    for per_rank in zip(*cases, strict=True):
        if "error" not in per_rank[0]:
            assert all(c == per_rank[0] for c in per_rank), "every rank gathers the same thing"
    by_name = {c["name"]: c for c in cases[0]}
    for name, case in by_name.items():
        if name.startswith("first dim"):
            dtype = name.removeprefix("first dim ")
            assert case["shapes"] == [[r + 1] for r in range(world)] and set(case["dtypes"]) == {dtype}
            expected = [[(10 * r + i) % 2 if dtype == "torch.bool" else 10 * r + i for i in range(r + 1)]
                        for r in range(world)]
            assert case["values"] == expected, name
    assert by_name["2-d, rows differ"]["shapes"] == [[r, 3] for r in range(world)]
    assert by_name["2-d, rows differ"]["values"] == [[float(r)] * 3 * r for r in range(world)]
    assert by_name["empty on rank 0"]["shapes"] == [[2 * r] for r in range(world)]
    assert by_name["all empty"]["shapes"] == [[0, 4]] * world
    errors = {rank_cases[-1]["error"] for rank_cases in cases}
    assert len(errors) == 1, errors  # the same message on every rank
    assert by_name["dtype mismatch"]["error"] == (
        "UsageError: all_gather_variable: the dtypes differ across ranks (torch.float32 on ranks [0]; "
        f"torch.int64 on ranks {list(range(1, world))}; group order); convert every rank's tensor to one dtype first")


def test_a_bad_tensor_on_one_rank_fails_every_rank_at_once() -> None:
    # the ranks' process group times out after 60 s: a rank left waiting would show as a long case
    results = run_gloo(f"{WORKERS}:bad_tensor_on_one_rank", 3, timeout=60)
    expected = {
        "9 dimensions on rank 1": "rank 1 has 9 dimensions (at most 8: reshape first)",
        "sparse on rank 2": "rank 2 has a sparse or other non-strided tensor (call .to_dense() first)",
        "dtypes differ": "the dtypes differ across ranks (torch.float32 on ranks [0, 1]; torch.int64 on ranks [2]",
        "9 dimensions on ranks 0 and 2": "rank 0 has 9 dimensions (at most 8: reshape first); rank 2 has 9",
    }
    for index, (name, text) in enumerate(expected.items()):
        per_rank = [r[index] for r in results]
        assert all(case["name"] == name for case in per_rank)
        assert len({case["error"] for case in per_rank}) == 1, per_rank  # word for word on every rank
        assert per_rank[0]["error"].startswith("UsageError: all_gather_variable: ") and text in per_rank[0]["error"]
        assert all(case["s"] < 20 for case in per_rank), per_rank
    assert all(r[-1]["values"] == [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]] for r in results)


def _stragglers(log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "my_utils.core", "stragglers", str(log_dir), *args],
                          capture_output=True, text=True, timeout=60)


def test_stragglers_names_the_slow_rank_and_section(four: dict[str, Any]) -> None:
    proc = _stragglers(four["runs"]["slow"], "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ranks"] == [0, 1, 2, 3] and report["steps"] == 10
    flagged = {(s["rank"], s["section"]) for s in report["stragglers"]}
    assert (2, "forward") in flagged
    assert {rank for rank, _ in flagged} == {2}
    assert not flagged & {(2, "data"), (2, "backward")}
    forward = next(s for s in report["sections"] if s["section"] == "forward")
    assert forward["max"]["rank"] == 2 and forward["slowdown"] > 2
    assert forward["slowest_steps"] >= 9
    # every rank recorded its CLOCK_SYNC row (applied), rank 0 being the reference
    assert sorted(c["rank"] for c in report["clocks"]) == [0, 1, 2, 3]
    assert all(c["applied"] and c["reference_rank"] == 0 for c in report["clocks"])
    text = _stragglers(four["runs"]["slow"]).stdout
    assert "persistent stragglers: rank 2 in forward" in text


def test_stragglers_names_none_in_an_even_run(four: dict[str, Any]) -> None:
    proc = _stragglers(four["runs"]["even"], "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["steps"] == 10 and report["stragglers"] == [], report["sections"]
    assert "no persistent straggler" in _stragglers(four["runs"]["even"]).stdout
