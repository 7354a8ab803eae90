"""SocketClockSynchronizer over TCP on loopback: the seed's example, a known skew, bind address, timeouts."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_estimate import ClockEstimate
from my_utils.distributed.socket_clock import SocketClockSynchronizer
from my_utils.distributed.testing import listening_addresses

SKEW_NS = 2_500_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _in_thread(func: Any) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(func())
        except BaseException as exc:  # handed to the test thread
            box.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def _connect_when_listening(port: int, client: Any, deadline_s: float = 10) -> Any:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return client()
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_seed_example_over_tcp_on_loopback() -> None:
    port = _free_port()
    # the seed's example, machine A and machine B being one host here (peer_ip = loopback)
    sync = SocketClockSynchronizer(port=port)
    server, box = _in_thread(lambda: sync.sync(is_server=True))
    offset = _connect_when_listening(
        port, lambda: SocketClockSynchronizer(port=port).sync(is_server=False, peer_ip="127.0.0.1"))
    server.join(30)
    assert box == [0.0]
    assert abs(offset) < 0.05  # one host, one clock (the bound is checked in the next test)


def test_skew_is_recovered_within_the_uncertainty_and_only_loopback_listens() -> None:
    server_side = SocketClockSynchronizer(0, bind_ip="127.0.0.1", rounds=40, timeout=20)
    port = server_side.listen()
    assert listening_addresses(os.getpid()) == [f"127.0.0.1:{port}"]
    server, box = _in_thread(lambda: server_side.measure(is_server=True))
    client = SocketClockSynchronizer(port, rounds=40, clock=lambda: time.time_ns() + SKEW_NS, timeout=20)
    estimate = client.measure(is_server=False, peer_ip="127.0.0.1")
    server.join(30)
    assert isinstance(box[0], ClockEstimate) and box[0].offset_s == 0.0
    assert abs(estimate.offset_s - (-SKEW_NS / 1e9)) <= estimate.uncertainty_s + 2e-9
    assert estimate.uncertainty_s <= estimate.best_rtt_s / 2 + 1e-9 and estimate.samples == 40
    assert listening_addresses(os.getpid()) == []  # the server closed its socket when the client was done


def test_server_without_client_times_out() -> None:
    sync = SocketClockSynchronizer(0, bind_ip="127.0.0.1", timeout=0.3)
    port = sync.listen()
    with pytest.raises(TimeoutError, match=rf"server on 127.0.0.1:{port}: no client connected within 0.3 s"):
        sync.sync(is_server=True)


def test_client_without_server_names_it() -> None:
    port = _free_port()
    with pytest.raises(ConnectionError, match=rf"cannot connect to server 127.0.0.1:{port} .*sync\(is_server=True\)"):
        SocketClockSynchronizer(port, timeout=1).sync(is_server=False, peer_ip="127.0.0.1")


def test_silent_server_times_out_naming_it() -> None:
    with socket.socket() as mute:  # accepts connections, never answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        port = mute.getsockname()[1]
        with pytest.raises(TimeoutError, match=rf"no reply from server 127.0.0.1:{port} within 0.3 s"):
            SocketClockSynchronizer(port, timeout=0.3).sync(is_server=False, peer_ip="127.0.0.1")


def test_bad_arguments() -> None:
    with pytest.raises(UsageError, match="expected a TCP port"):
        SocketClockSynchronizer(70000)
    with pytest.raises(UsageError, match="use more than 5"):
        SocketClockSynchronizer(1, rounds=5)
    with pytest.raises(UsageError, match="give peer_ip"):
        SocketClockSynchronizer(1).sync(is_server=False)
    taken = SocketClockSynchronizer(0, bind_ip="127.0.0.1")
    port = taken.listen()
    with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{port}"):
        SocketClockSynchronizer(port, bind_ip="127.0.0.1").listen()
    taken.close()
