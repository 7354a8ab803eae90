"""The etcd seam: on a real etcd keys come back as text and watches deliver puts; without a server,
calls are ``StoreUnavailable`` (no etcd binary needed for that: only the client, the ``[etcd]`` extra)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from my_utils.distributed.kv_store import EtcdStore, StoreUnavailable, etcd_client_available, short_reason


@pytest.fixture(scope="module")
def etcd() -> Iterator[Any]:
    from my_utils.distributed.testing import EtcdServer

    with EtcdServer() as server:
        yield server


@pytest.mark.etcd
def test_create_get_watch_delete(etcd: Any) -> None:
    a, b = EtcdStore(port=etcd.port), EtcdStore(port=etcd.port)
    assert a.create("/kv/x/1", "one") is True
    assert a.create("/kv/x/1", "again") is False  # create-if-absent
    watch = a.watch_prefix("/kv/x/")
    started = time.monotonic()
    threading.Timer(0.05, lambda: b.create("/kv/x/2", "two")).start()
    assert watch.next_key(5.0) == "/kv/x/2"  # text, from the watch (not a heartbeat read)
    assert time.monotonic() - started < 2.0
    assert watch.next_key(0.05) is None
    watch.close()
    watch.close()  # idempotent
    assert a.get_prefix("/kv/x/") == {"/kv/x/1": "one", "/kv/x/2": "two"}
    a.refresh_lease()
    a.delete_prefix("/kv/x/")
    assert b.get_prefix("/kv/x/") == {}
    b.close(revoke=True)
    a.close()


def _needs_client() -> None:
    ok, why = etcd_client_available()
    if not ok:  # the one cause: the [etcd] extra is not installed (no server is needed)
        pytest.skip(why)


def test_no_server_is_store_unavailable() -> None:
    import socket

    _needs_client()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = EtcdStore(port=port, request_timeout=1.0)
    with pytest.raises(StoreUnavailable, match=rf"etcd at 127.0.0.1:{port}: read /x/ failed .*Connection refused"):
        store.get_prefix("/x/")
    with pytest.raises(StoreUnavailable, match="cannot watch /x/"):
        store.watch_prefix("/x/")


def test_client_availability_says_how_to_install() -> None:
    import importlib.util
    import subprocess
    import sys

    installed = importlib.util.find_spec("etcd3gw") is not None
    assert etcd_client_available() == ((True, "") if installed else (False, etcd_client_available()[1]))
    code = ("import sys; sys.modules['etcd3gw'] = None; "  # what an environment without the extra sees
            "from my_utils.distributed.kv_store import etcd_client_available as a; ok, why = a(); print(ok, why)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("False etcd3gw is not installed") and "myutils-distributed[etcd]" in proc.stdout


def test_reasons_are_short() -> None:
    long = ConnectionError("HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded with url: /v3/kv "
                           "(Caused by NewConnectionError(\"<urllib3.connection.HTTPConnection object>: Failed to "
                           "establish a new connection: [Errno 111] Connection refused\"))")
    assert short_reason(long) == "[Errno 111] Connection refused"
    assert short_reason(ValueError("x" * 500)).endswith("...") and len(short_reason(ValueError("x" * 500))) == 200
