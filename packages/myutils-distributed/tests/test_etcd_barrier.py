"""EtcdBarrier: its logic with threads on the in-memory store, then ranks in processes on a real etcd.

The real-etcd tests (marker ``etcd``) start etcd on 127.0.0.1 with a temp data dir and free
ports; faults: a rank killed mid-run, etcd restarted while ranks wait, etcd gone for good.
Every wait is bounded (barrier timeouts, subprocess timeouts).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import UsageError
from my_utils.distributed.etcd_barrier import BarrierTimeout, EtcdBarrier
from my_utils.distributed.kv_store import EtcdStore
from my_utils.distributed.testing import InMemoryKeyValueStore

RANK_SCRIPT = Path(__file__).resolve().parent / "etcd_rank.py"


# -- the logic, on the in-memory store ---------------------------------------------------


def _run_threads(n: int, body: Any) -> list[Any]:
    results: list[Any] = [None] * n

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except BaseException as exc:  # handed to the test thread
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a barrier thread is still waiting"
    return results


def test_ranks_meet_generation_after_generation() -> None:
    space = InMemoryKeyValueStore.Space()
    stores = [InMemoryKeyValueStore(space) for _ in range(3)]
    order: list[tuple[int, int]] = []
    lock = threading.Lock()

    def body(rank: int) -> list[int]:
        barrier = EtcdBarrier("train", rank, 3, store=stores[rank], timeout=10, poll_s=0.05)
        done = []
        for generation in range(4):
            time.sleep(0.01 * rank)  # arrive in a different order each time
            with lock:
                order.append((generation, rank))
            done.append(barrier.wait())
            with lock:  # everybody arrived at this generation before anybody left it
                assert sum(1 for g, _ in order if g == generation) == 3
        barrier.close()
        return done

    assert _run_threads(3, body) == [[0, 1, 2, 3]] * 3
    # generations 0..2 were deleted by one rank each once the next was complete; 3 is the last
    keys = sorted(space.data)
    assert keys == [f"/my_utils/barrier/train/3/{r}" for r in range(3)] + ["/my_utils/barrier/train/3/outcome"]


def test_timeout_lists_the_missing_ranks() -> None:
    space = InMemoryKeyValueStore.Space()
    barriers = [EtcdBarrier("t", r, 4, store=InMemoryKeyValueStore(space), poll_s=0.05) for r in (0, 2)]
    started = time.monotonic()
    results = _run_threads(2, lambda i: barriers[i].wait(timeout=0.5))
    assert 0.4 < time.monotonic() - started < 5
    for exc in results:
        assert isinstance(exc, BarrierTimeout) and isinstance(exc, TimeoutError)
        assert exc.missing == [1, 3] and exc.arrived == [0, 2] and exc.generation == 0
        assert "2/4 ranks arrived within 0.5 s; missing ranks [1, 3]" in str(exc)


def test_a_dead_ranks_expired_key_is_missing() -> None:
    space = InMemoryKeyValueStore.Space()
    dead = InMemoryKeyValueStore(space)
    dead.create("/my_utils/barrier/t/0/1", "1:x")
    dead.expire_lease()  # rank 1 crashed; its lease ran out
    with pytest.raises(BarrierTimeout, match=r"missing ranks \[1\]"):
        EtcdBarrier("t", 0, 2, store=InMemoryKeyValueStore(space), poll_s=0.05).wait(timeout=0.3)


def test_store_outage_resumes_when_it_comes_back() -> None:
    space = InMemoryKeyValueStore.Space()
    stores = [InMemoryKeyValueStore(space) for _ in range(2)]
    first = EtcdBarrier("t", 0, 2, store=stores[0], poll_s=0.05)
    result: list[Any] = []
    waiter = threading.Thread(target=lambda: result.append(first.wait(timeout=10)))
    waiter.start()
    time.sleep(0.2)
    stores[0].set_unavailable(True)  # the server goes away while rank 0 waits ...
    time.sleep(0.3)
    stores[0].set_unavailable(False)  # ... and comes back; rank 1 arrives afterwards
    EtcdBarrier("t", 1, 2, store=stores[1], poll_s=0.05).wait(timeout=10)
    waiter.join(10)
    assert result == [0]


def test_outage_until_the_deadline_says_so() -> None:
    store = InMemoryKeyValueStore(InMemoryKeyValueStore.Space())
    barrier = EtcdBarrier("t", 0, 2, store=store, poll_s=0.05)
    store.set_unavailable(True)
    with pytest.raises(BarrierTimeout, match=r"could not arrive within 0\.3 s because the store is unavailable"):
        barrier.wait(timeout=0.3)


def test_same_rank_twice_is_refused() -> None:
    space = InMemoryKeyValueStore.Space()
    EtcdBarrier("t", 1, 2, store=InMemoryKeyValueStore(space))._arrive("/my_utils/barrier/t/0/", 1e18, 1)
    with pytest.raises(UsageError, match="rank 1 already arrived at generation 0 from another process"):
        EtcdBarrier("t", 1, 2, store=InMemoryKeyValueStore(space)).wait(timeout=1)


def test_a_rank_whose_lease_expired_while_waiting_arrives_again() -> None:
    space = InMemoryKeyValueStore.Space()
    stores = [InMemoryKeyValueStore(space) for _ in range(2)]
    first = EtcdBarrier("t", 0, 2, store=stores[0], poll_s=0.05, ttl=2)
    result: list[Any] = []
    waiter = threading.Thread(target=lambda: result.append(first.wait(timeout=10)))
    waiter.start()
    _until(lambda: "/my_utils/barrier/t/0/0" in space.data)
    stores[0].expire_lease()  # a partition longer than the TTL: etcd dropped rank 0's arrival
    assert "/my_utils/barrier/t/0/0" not in space.data
    assert EtcdBarrier("t", 1, 2, store=stores[1], poll_s=0.05).wait(timeout=5) == 0
    waiter.join(10)
    assert result == [0]


@pytest.mark.parametrize("first_run", ["passed", "failed"])
def test_an_outcome_left_by_an_earlier_run_is_not_followed(first_run: str) -> None:
    space = InMemoryKeyValueStore.Space()
    ranks = 1 if first_run == "failed" else 2  # a failed first run: rank 1 never came
    old = [EtcdBarrier("s", r, 2, store=InMemoryKeyValueStore(space), poll_s=0.02) for r in range(ranks)]
    _run_threads(ranks, lambda r: old[r].wait(timeout=0.3))
    for barrier in old:
        barrier.close(revoke=True)  # the run ended: its arrivals are gone, its outcome stays
    assert list(space.data) == ["/my_utils/barrier/s/0/outcome"]
    new = [EtcdBarrier("s", r, 2, store=InMemoryKeyValueStore(space), poll_s=0.02) for r in range(2)]
    with pytest.raises(BarrierTimeout, match=r"missing ranks \[1\]"):  # not the old verdict: it waits, alone
        new[0].wait(timeout=0.3)
    for barrier in new:
        barrier.close(revoke=True)
    again = [EtcdBarrier("s", r, 2, store=InMemoryKeyValueStore(space), poll_s=0.02) for r in range(2)]
    assert _run_threads(2, lambda r: again[r].wait(timeout=5)) == [0, 0]  # nor the failure it just saw


def _until(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(world=st.integers(2, 4), data=st.data())
def test_every_rank_sees_the_same_outcome(world: int, data: st.DataObject) -> None:
    """Arrivals around each other's deadlines: all ranks pass, or all fail naming the same missing ranks."""
    ticks = st.integers(0, 8)  # 40 ms each: arrivals land before, at and after the others' deadlines
    delays = [data.draw(ticks, label=f"delay of rank {r}") for r in range(world)]
    timeouts = [data.draw(st.integers(1, 8), label=f"timeout of rank {r}") for r in range(world)]
    absent = data.draw(st.sets(st.integers(0, world - 1), max_size=1), label="ranks that never come")
    space = InMemoryKeyValueStore.Space()
    barriers = {r: EtcdBarrier("p", r, world, store=InMemoryKeyValueStore(space), poll_s=0.02)
                for r in range(world) if r not in absent}

    def body(i: int) -> Any:
        rank = sorted(barriers)[i]
        time.sleep(delays[rank] * 0.04)
        return barriers[rank].wait(timeout=timeouts[rank] * 0.04)

    results = _run_threads(len(barriers), body)
    if all(r == 0 for r in results):
        assert not absent
        return
    assert all(isinstance(r, BarrierTimeout) and r.decided for r in results), results
    assert len({(tuple(r.missing), tuple(r.arrived), str(r)) for r in results}) == 1, [str(r) for r in results]
    assert set(absent) <= set(results[0].missing)


@pytest.mark.parametrize(("name", "rank", "world"), [("a/b", 0, 2), ("", 0, 1), ("x", 2, 2), ("x", -1, 2)])
def test_bad_arguments_are_usage_errors(name: str, rank: int, world: int) -> None:
    with pytest.raises(UsageError, match="EtcdBarrier"):
        EtcdBarrier(name, rank, world, store=InMemoryKeyValueStore(InMemoryKeyValueStore.Space()))


# -- a real etcd ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def etcd() -> Iterator[Any]:
    from my_utils.distributed.testing import EtcdServer

    with EtcdServer() as server:
        yield server


def _start_rank(port: int, name: str, rank: int, world: int, rounds: int, **options: Any) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(RANK_SCRIPT), "--port", str(port), "--name", name, "--rank", str(rank),
           "--world", str(world), "--rounds", str(rounds)]
    for key, value in options.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 60) -> list[tuple[int, list[dict[str, Any]]]]:
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"a barrier rank did not exit within {timeout} s: {stderr[-1000:]}")
        out.append((proc.returncode, [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]))
    return out


@pytest.mark.etcd
def test_ranks_meet_on_a_real_etcd(etcd: Any, request: pytest.FixtureRequest) -> None:
    procs = [_start_rank(etcd.port, request.node.name, r, 3, 5) for r in range(3)]
    for code, events in _finish(procs):
        assert code == 0, events
        left = [e for e in events if e["event"] == "left"]
        assert [e["generation"] for e in left] == [0, 1, 2, 3, 4]
        assert all(e["present"] == 3 for e in left), left  # nobody left before all had arrived


@pytest.mark.etcd
def test_a_killed_rank_is_named_by_the_others(etcd: Any, request: pytest.FixtureRequest) -> None:
    procs = [_start_rank(etcd.port, request.node.name, r, 3, 3, timeout=3, **({"die_at": 1} if r == 2 else {}))
             for r in range(3)]
    results = _finish(procs)
    assert results[2][0] == -9  # SIGKILL, before arriving at generation 1
    for code, events in results[:2]:
        assert code == 1
        error = events[-1]
        assert error["event"] == "error" and error["type"] == "BarrierTimeout" and error["missing"] == [2]
        assert "generation 1" in error["message"] and "missing ranks [2]" in error["message"]
        assert f"etcd at 127.0.0.1:{etcd.port}" in error["message"]


@pytest.mark.etcd
def test_barrier_resumes_after_an_etcd_restart(request: pytest.FixtureRequest) -> None:
    from my_utils.distributed.testing import EtcdServer

    with EtcdServer() as server:
        early = [_start_rank(server.port, "restart", r, 3, 2, timeout=30) for r in range(2)]
        _wait_arrived(server.port, "/my_utils/barrier/restart/0/", 2)
        server.restart(down_s=0.5)  # keys and leases are on etcd's disk
        late = _start_rank(server.port, "restart", 2, 3, 2, timeout=30)
        for code, events in _finish([*early, late]):
            assert code == 0, events
            assert [e["generation"] for e in events if e["event"] == "left"] == [0, 1]


@pytest.mark.etcd
def test_etcd_gone_for_good_is_a_clear_error() -> None:
    from my_utils.distributed.testing import EtcdServer

    with EtcdServer() as server:
        waiting = _start_rank(server.port, "gone", 0, 2, 2, timeout=4)
        helper = _start_rank(server.port, "gone", 1, 2, 1)  # meets rank 0 once, then leaves
        _wait_arrived(server.port, "/my_utils/barrier/gone/1/", 1)  # rank 0 waits at generation 1 now
        server.stop()
        _finish([helper])
        [(code, events)] = _finish([waiting])
    assert code == 1
    message = events[-1]["message"]
    assert "generation 1" in message and "1/2 ranks arrived within 4 s; missing ranks [1]" in message
    assert "the store was unavailable at the end" in message and "Connection refused" in message
    assert "HTTPConnectionPool" not in message and len(message) < 400, message


@pytest.mark.etcd
@pytest.mark.slow
def test_a_dead_ranks_key_expires_with_its_lease(etcd: Any) -> None:
    code = ("import os, signal, sys; from my_utils.distributed.kv_store import EtcdStore; "
            f"s = EtcdStore(port={etcd.port}, ttl=2); s.create('/lease-test/k', 'v'); "
            "print('created', flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "created" and proc.returncode == -9
    reader = EtcdStore(port=etcd.port)
    assert list(reader.get_prefix("/lease-test/")) == ["/lease-test/k"]
    deadline = time.monotonic() + 10  # TTL 2 runs ~3.5 s on etcd 3.4 (measured)
    while reader.get_prefix("/lease-test/") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert reader.get_prefix("/lease-test/") == {}
    reader.close()


def _wait_arrived(port: int, prefix: str, count: int, timeout: float = 30) -> None:
    store = EtcdStore(port=port)
    deadline = time.monotonic() + timeout
    try:
        while len(store.get_prefix(prefix)) < count:
            assert time.monotonic() < deadline, f"{count} ranks did not arrive under {prefix} within {timeout} s"
            time.sleep(0.05)
    finally:
        store.close()


# -- partitions longer than the TTL, and one outcome for every rank -------------------------


def _outcomes(results: list[tuple[int, list[dict[str, Any]]]]) -> list[tuple[Any, ...]]:
    """What each rank saw, comparable across ranks: the generations it left, or the error's missing ranks."""
    seen = []
    for code, events in results:
        left = tuple(e["generation"] for e in events if e["event"] == "left")
        errors = [e for e in events if e["event"] == "error"]
        seen.append((code, left, tuple(errors[-1]["missing"]) if errors else None))
    return seen


def _gone(port: int, key: str, timeout: float = 15) -> None:
    """Wait until ``key`` no longer exists (its lease expired)."""
    store = EtcdStore(port=port)
    deadline = time.monotonic() + timeout
    try:
        while key in store.get_prefix(key):
            assert time.monotonic() < deadline, f"{key} still exists after {timeout} s"
            time.sleep(0.1)
    finally:
        store.close()


@pytest.mark.etcd
def test_etcd_paused_longer_than_the_ttl_does_not_split_the_ranks() -> None:
    from my_utils.distributed.testing import EtcdServer

    with EtcdServer() as server:
        early = [_start_rank(server.port, "paused", r, 3, 2, ttl=2, first_timeout=20, timeout=20) for r in range(2)]
        _wait_arrived(server.port, "/my_utils/barrier/paused/0/", 2)
        with server.paused(4.0):  # twice the TTL: the leases of ranks 0 and 1 run out meanwhile
            pass
        late = _start_rank(server.port, "paused", 2, 3, 2, ttl=2, first_timeout=20, timeout=20)
        results = _finish([*early, late])
    assert _outcomes(results) == [(0, (0, 1), None)] * 3, results
    for _, events in results:
        assert all(e["present"] == 3 for e in events if e["event"] == "left"), events


@pytest.mark.etcd
def test_a_partitioned_rank_arrives_again_when_the_link_is_back() -> None:
    from my_utils.distributed.testing import EtcdServer, TcpProxy

    with EtcdServer() as server, TcpProxy(server.port) as proxy:
        cut_off = _start_rank(proxy.port, "partition", 2, 3, 2, ttl=2, first_timeout=30, timeout=20)
        _wait_arrived(server.port, "/my_utils/barrier/partition/0/", 1)
        time.sleep(1.0)  # rank 2 has had the answer to its create: it is waiting, not arriving
        proxy.cut()  # rank 2 loses etcd; its lease expires although it is alive and waiting
        _gone(server.port, "/my_utils/barrier/partition/0/2")
        others = [_start_rank(server.port, "partition", r, 3, 2, ttl=2, first_timeout=20, timeout=20)
                  for r in range(2)]
        _wait_arrived(server.port, "/my_utils/barrier/partition/0/", 2)
        time.sleep(1.0)
        assert proxy.refused > 0  # rank 2 kept trying while it was cut off
        proxy.restore()
        results = _finish([*others, cut_off])
    assert _outcomes(results) == [(0, (0, 1), None)] * 3, results
    for _, events in results:
        assert all(e["present"] == 3 for e in events if e["event"] == "left"), events


@pytest.mark.etcd
def test_a_rank_arriving_after_the_others_gave_up_fails_with_them(etcd: Any) -> None:
    prompt = [_start_rank(etcd.port, "late", r, 3, 1, first_timeout=8) for r in range(2)]  # 8 s: both surely arrive
    first = _finish(prompt)
    late = _start_rank(etcd.port, "late", 2, 3, 1, first_timeout=30)
    [(code, events)] = _finish([late])
    assert _outcomes([*first, (code, events)]) == [(1, (), (2,))] * 3
    messages = {events[-1]["message"] for _, events in [*first, (code, events)]}
    assert len(messages) == 1, messages  # word for word the same on every rank
    assert events[-1]["decided"] is True and events[-1]["ms"] < 10_000  # told at once, not after its own 30 s
