"""The Dask path: executor='dask' starts a local cluster, DASK_SCHEDULER_ADDRESS joins a real one, results travel packed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from my_utils.core import dask_local
from my_utils.core.errors import UsageError
from my_utils.profiling.formats.parallel import DASK_ENV, _packed, _unpack, run_many
from my_utils.profiling.kineto.read.provider import TorchProfilerMetricsProvider, parse_trace_file

RANKS = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")


def _key(events: Sequence[Any]) -> list[tuple[Any, ...]]:
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


def test_no_calls_start_no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    def no_workers(*args: Any) -> None:
        raise AssertionError("a cluster was started for no calls")

    monkeypatch.setattr(dask_local, "_start_all", no_workers)
    assert run_many(len, [], "dask") == []


def test_an_unknown_executor_string_is_refused() -> None:
    pytest.importorskip("distributed")
    with pytest.raises(UsageError, match="'threads' is not understood"):
        run_many(len, [([1],), ([2],)], "threads")


# -- the local cluster's workers, asked from inside a task --------------------------------------------------


@pytest.fixture
def by_value() -> Iterator[None]:
    """This module's functions travel by value: a worker could not import a test module by name."""
    cloudpickle = pytest.importorskip("cloudpickle")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _worker_facts(n: int) -> dict[str, Any]:
    import gc

    import dask
    from distributed import get_worker

    worker = get_worker()
    return {"n": n, "pid": os.getpid(), "nanny": worker.nanny,
            "profile": dask.config.get("distributed.worker.profile.enabled"),
            "gil_monitor": dask.config.get("distributed.admin.system-monitor.gil.enabled"),
            "trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"), "frozen": gc.get_freeze_count(),
            "host": worker.address, "scratch": worker.local_directory,
            "probe": os.environ.get("MYUTILS_DASK_PROBE"), "config_probe": dask.config.get("myutils.probe", None)}


def _results_held(n: int) -> int:
    import time

    from distributed import get_worker

    time.sleep(0.2)  # the client fetches the previous result meanwhile
    return len(get_worker().data)


def _fails_on(n: int) -> int:
    if n == 2:
        raise KeyError(f"rank {n} has no trace")
    return n


def _dies(n: int) -> int:
    os._exit(3)


@pytest.mark.slow
def test_local_cluster_workers_are_plain_quiet_processes(by_value: None, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.chdir(tmp_path)
    # set now, after an earlier test may have started the fork server: the workers still see it
    monkeypatch.setenv("MYUTILS_DASK_PROBE", str(tmp_path))
    monkeypatch.setenv("DASK_MYUTILS__PROBE", str(tmp_path))
    environ = dict(os.environ)
    facts = run_many(_worker_facts, [(n,) for n in range(6)], "dask", max_workers=2)
    assert [f["n"] for f in facts] == list(range(6))  # results in call order
    assert len({f["pid"] for f in facts} | {os.getpid()}) >= 2  # worker processes, not this one
    for f in facts:
        # no nanny; no malloc trimming (83,000 page faults a parse); the event loop stays quiet
        assert f["nanny"] is None and f["trim"] is None and f["profile"] is False and f["gil_monitor"] is False
        assert f["host"].startswith("tcp://127.0.0.1:")  # loopback only
        assert f["probe"] == str(tmp_path) == f["config_probe"]  # the caller's environment of now
        assert f["frozen"] > 10_000  # distributed's own objects are out of the collector's way
        # the scratch space lay outside the cwd and went with the call
        assert not Path(f["scratch"]).is_relative_to(tmp_path) and not Path(f["scratch"]).exists()
    # nothing is left in the cwd, and nothing written into this process's environment
    assert list(tmp_path.iterdir()) == []
    assert dict(os.environ) == environ


@pytest.mark.slow
def test_a_worker_drops_each_result_once_fetched(by_value: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    held = run_many(_results_held, [(n,) for n in range(8)], "dask", max_workers=1)
    # kept until the end, the 8th task would see 7 earlier results (walked by every gc run)
    assert max(held) <= 2, held


@pytest.mark.slow
def test_a_failing_task_keeps_its_type_and_message(by_value: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    with pytest.raises(KeyError, match="rank 2 has no trace"):
        run_many(_fails_on, [(n,) for n in range(4)], "dask", max_workers=2)


@pytest.mark.slow
def test_workers_that_all_die_are_reported_not_waited_for(by_value: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.delenv(DASK_ENV, raising=False)
    with pytest.raises(UsageError, match=r"local Dask workers exited \(exit codes \[3\]\)"):
        run_many(_dies, [(n,) for n in range(3)], "dask", max_workers=2)


def _identity(n: int) -> int:
    return n


@pytest.mark.slow
def test_small_results_go_to_dask_in_larger_batches_on_a_quiet_scheduler(
        by_value: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``small_results``: 200 calls on 2 workers are 8 tasks of 25 calls, not 25 of 8 (the cap for results that
    hold events); the local scheduler (in this process) runs its monitors at the quiet intervals."""
    pytest.importorskip("distributed")
    import dask

    from my_utils.profiling.formats import dask_run, parallel

    monkeypatch.delenv(DASK_ENV, raising=False)
    sizes: list[int] = []
    submit = dask_run.DaskSession.submit

    def counting(self: Any, func: Any, calls: Any, keep_going: bool) -> Any:
        sizes.append(len(calls))
        return submit(self, func, calls, keep_going)

    monkeypatch.setattr(dask_run.DaskSession, "submit", counting)
    with parallel.runner("dask", 2, 200, None) as run:
        scheduler = run.dask.client.cluster.scheduler
        assert scheduler.periodic_callbacks["monitor"].callback_time == 5000  # ms, not the default 500
        assert dask.config.get("distributed.admin.tick.interval") == "1s"
        assert list(run.stream(_identity, [(n,) for n in range(200)], small_results=True)) == list(range(200))
        assert sizes == [25] * 8
        sizes.clear()
        assert list(run.stream(_identity, [(n,) for n in range(200)])) == list(range(200))
        assert sizes == [8] * 25


@pytest.mark.slow
def test_a_local_cluster_leaves_distributed_logging_at_error_after_its_import() -> None:
    # importing distributed sets its logger to Dask's configured INFO, over a level set before the import;
    # LocalCluster(silence_logs=) quiets its handlers only while it lives, so a failed run's shutdown
    # printed "Batched Comm Closed" and a traceback on stderr in about 1 run of 10
    pytest.importorskip("distributed")
    import subprocess

    code = ("import logging, sys\n"
            "from my_utils.profiling.formats.parallel import run_many\n"
            "assert 'distributed' not in sys.modules\n"
            "assert run_many(abs, [(-1,), (-2,)], 'dask', 2) == [1, 2]\n"
            "print(logging.getLogger('distributed.batched').getEffectiveLevel())\n")
    env = {k: v for k, v in os.environ.items() if k != DASK_ENV}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.split() == ["40"]
