"""The Dask path: executor='dask' starts a local cluster, DASK_SCHEDULER_ADDRESS joins a real one, results travel packed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.profiling.providers.kineto import TorchProfilerMetricsProvider, parse_trace_file
from my_utils.profiling.providers.parallel import DASK_ENV, _packed, _unpack, run_many

RANKS = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")


def _key(events: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((e.rank, e.name, e.step, e.value, e.ts, tuple(sorted(e.attrs.items()))) for e in events)


def _ranks(real_fixtures: Any, tmp_path: Path) -> Path:
    for r, rel in enumerate(RANKS):
        (tmp_path / f"rank_{r}.json.gz").symlink_to(real_fixtures / rel)
    return tmp_path


def test_packed_results_round_trip_exactly(real_fixtures: Any) -> None:
    events = parse_trace_file(real_fixtures / RANKS[0])
    tag, rows = _packed(parse_trace_file, real_fixtures / RANKS[0])
    assert tag == "__events__" and all(type(r) is tuple for r in rows)
    assert _unpack((tag, rows)) == events
    assert _unpack(_packed(len, [1, 2])) == 2  # anything else travels as it is


@pytest.mark.slow
def test_executor_dask_starts_a_local_cluster(real_fixtures: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    folder = _ranks(real_fixtures, tmp_path)
    on_dask = TorchProfilerMetricsProvider.from_input(folder, executor="dask").collect()
    serial = TorchProfilerMetricsProvider.from_input(folder, executor="serial").collect()
    assert _key(on_dask) == _key(serial) and {e.rank for e in on_dask} == {0, 1}


@pytest.mark.slow
def test_scheduler_address_from_the_environment_joins_that_cluster(real_fixtures: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    files = [(str(real_fixtures / rel), None) for rel in RANKS]
    with distributed.LocalCluster(host="127.0.0.1", n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", local_directory=str(tmp_path)) as cluster:
        monkeypatch.setenv(DASK_ENV, cluster.scheduler_address)
        before = cluster.scheduler.transition_counter
        results = run_many(parse_trace_file, files, "dask")
        # the tasks ran on that scheduler (each moved through its states), not on a cluster of our own
        assert cluster.scheduler.transition_counter - before >= 3 * len(files)
    assert [_key(r) for r in results] == [_key(parse_trace_file(*f)) for f in files]


@pytest.mark.parametrize("value", ["localhost:8786", "http://x:1"])
def test_a_malformed_address_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setenv(DASK_ENV, value)
    with pytest.raises(UsageError, match=rf"\${DASK_ENV}={value!r} is not understood"):
        run_many(len, [([1],), ([2],)], "dask")


def test_an_unknown_executor_string_is_refused() -> None:
    pytest.importorskip("distributed")
    with pytest.raises(UsageError, match="'threads' is not understood"):
        run_many(len, [([1],), ([2],)], "threads")
