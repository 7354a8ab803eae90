"""The seam between the barrier and a key-value server: what the barrier needs, nothing more.

``KeyValueStore`` is the contract (one instance per rank: it owns that rank's lease);
``EtcdStore`` implements it on etcd's v3 HTTP gateway with ``etcd3gw`` (the ``[etcd]`` extra;
chosen because it needs neither grpcio nor protobuf, so it cannot clash with the protobuf a
training stack pins, unlike ``etcd3`` 0.12, which fails to import with protobuf >= 4), and
``my_utils.distributed.testing.InMemoryKeyValueStore`` implements it in one process for tests.

Connection problems surface as ``StoreUnavailable`` whatever the client library, so the
barrier can tell "etcd is away" (retry until the deadline) from a bug.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
from typing import Any, Protocol

from my_utils.core.errors import MyUtilsError, UsageError

__all__ = ["EtcdStore", "KeyValueStore", "PrefixWatch", "StoreUnavailable", "etcd_client_available"]


_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")


class StoreUnavailable(MyUtilsError, ConnectionError):
    """The key-value server did not answer (down, restarting, unreachable); the message names it."""


class PrefixWatch(Protocol):
    """Keys put under a prefix after the watch was created."""

    def next_key(self, timeout: float) -> str | None:
        """The next key put, or None when ``timeout`` seconds passed without one."""

    def close(self) -> None:
        """Stop watching (idempotent)."""


class KeyValueStore(Protocol):
    """One rank's connection: keys it creates live under its own lease (they vanish if it dies)."""

    def describe(self) -> str:
        """Where the store is, for messages (``etcd at 127.0.0.1:2379``)."""

    def create(self, key: str, value: str) -> bool:
        """Create ``key`` under this rank's lease if absent; False when it already exists."""

    def get_prefix(self, prefix: str) -> dict[str, str]:
        """Every key under ``prefix`` and its value."""

    def read(self, key: str) -> tuple[str, int] | None:
        """``key``'s value and modification revision, or None when it does not exist."""

    def put_if_revision(self, key: str, value: str, revision: int,
                        delete_ranges: tuple[tuple[str, str], ...] = ()) -> bool:
        """In one transaction: if ``key``'s modification revision is ``revision`` (0: absent), put
        ``value`` there without a lease (it outlives the rank) and delete every key in each
        ``[start, end)`` of ``delete_ranges``; False, changing nothing, otherwise."""

    def watch_prefix(self, prefix: str) -> PrefixWatch:
        """Start watching ``prefix``; keys put after this returns are delivered."""

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix``."""

    def refresh_lease(self) -> bool:
        """Keep this rank's lease alive (called every TTL/3 by the barrier).

        False when the server no longer knows the lease (it expired during an outage or a
        partition, and the keys under it are gone): the next ``create`` takes a new lease,
        and the caller re-creates what it still needs."""

    def close(self, revoke: bool = False) -> None:
        """Release the connection; ``revoke`` also deletes this rank's keys now."""


def etcd_client_available() -> tuple[bool, str]:
    """Whether ``etcd3gw`` imports, and why not."""
    try:
        import etcd3gw  # noqa: F401
    except ImportError as exc:
        return False, f"etcd3gw is not installed ({exc}); pip install 'myutils-distributed[etcd]'"
    return True, ""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _range_end(prefix: str) -> str:
    raw = bytearray(prefix.encode())
    raw[-1] += 1  # every key starting with `prefix` sorts below this one
    return base64.b64encode(bytes(raw)).decode()


class _EtcdWatch:
    """A watch on etcd's gateway (``POST /v3/watch``, one JSON object per line) read by our own thread.

    etcd3gw's watch iterator blocks forever once the stream breaks (an etcd restart), and its
    creation has no timeout; here creation is bounded, keys arrive as text in one queue hop,
    and a broken stream is reported (``next_key`` raises ``StoreUnavailable``) so the barrier
    opens a new one.
    """

    _ENDED = object()

    def __init__(self, url: str, prefix: str, timeout: float, where: str) -> None:
        import queue

        import requests

        self._queue: queue.Queue[object] = queue.Queue()
        self._session = requests.Session()  # its own connection: a stream never goes back to a pool
        self._response: Any = None
        self._closed = False
        self._where, self._prefix = where, prefix
        self._error: BaseException | None = None
        created = threading.Event()
        body = {"create_request": {"key": _b64(prefix), "range_end": _range_end(prefix)}}

        def run() -> None:
            try:
                self._response = self._session.post(url, json=body, stream=True, timeout=(timeout, None))
                self._response.raise_for_status()
                pending = b""
                for chunk in self._response.iter_content(chunk_size=None):
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self._handle(json.loads(line).get("result", {}), created)
            except Exception as exc:  # the stream broke or never opened: said by next_key / __init__
                self._error = exc
            finally:
                created.set()
                self._queue.put(self._ENDED)

        self._thread = threading.Thread(target=run, name=f"etcd watch {prefix}", daemon=True)
        self._thread.start()
        if not created.wait(timeout) or self._error is not None:
            self.close()
            why = (f"{type(self._error).__name__}: {short_reason(self._error)}" if self._error
                   else f"no reply within {timeout:g} s")
            raise StoreUnavailable(f"{where}: cannot watch {prefix} ({why})")

    def _handle(self, result: dict[str, Any], created: threading.Event) -> None:
        if result.get("created"):
            created.set()
        for event in result.get("events", ()):
            if event.get("type", "PUT") == "PUT":  # PUT is proto3's default: the field is absent
                self._queue.put(base64.b64decode(event["kv"]["key"]).decode())

    def next_key(self, timeout: float) -> str | None:
        import queue

        try:
            item = self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if item is self._ENDED:
            self._queue.put(item)  # stays ended
            raise StoreUnavailable(f"{self._where}: the watch on {self._prefix} ended"
                                   + (f" ({type(self._error).__name__}: {short_reason(self._error)})"
                                      if self._error else ""))
        return str(item)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        response = self._response
        if response is not None:
            try:  # shut the socket down: closing alone does not wake a thread blocked in recv
                raw_socket = socket.fromfd(response.raw.fileno(), socket.AF_INET, socket.SOCK_STREAM)
                raw_socket.shutdown(socket.SHUT_RDWR)
                raw_socket.close()
            except Exception:  # already closed or never connected: nothing to wake
                pass
            response.close()
        self._session.close()


class EtcdStore:
    """``KeyValueStore`` on an etcd v3 server (``etcd3gw``, HTTP gateway), one lease per instance."""

    def __init__(self, host: str = "127.0.0.1", port: int = 2379, *, ttl: int = 30,
                 request_timeout: float = 2.0) -> None:
        ok, why = etcd_client_available()
        if not ok:
            raise UsageError(f"EtcdStore: {why}")
        import etcd3gw

        if ttl < 2:
            raise UsageError(f"EtcdStore(ttl={ttl}): use at least 2 s (etcd runs short TTLs up to ~1 s long)")
        self.host, self.port, self.ttl, self.request_timeout = host, port, ttl, request_timeout
        self._client = etcd3gw.client(host=host, port=port, timeout=request_timeout)
        self._lease: Any = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"etcd at {self.host}:{self.port}"

    def _call(self, what: str, func: Any, *args: Any, **kwargs: Any) -> Any:
        from etcd3gw import exceptions

        try:
            return func(*args, **kwargs)
        except (exceptions.ConnectionFailedError, exceptions.ConnectionTimeoutError,
                exceptions.InternalServerError) as exc:
            raise StoreUnavailable(f"{self.describe()}: {what} failed ({type(exc).__name__}: "
                                   f"{short_reason(exc)})") from None

    def _granted_lease(self) -> Any:
        with self._lock:
            if self._lease is None:
                self._lease = self._call("lease grant", self._client.lease, ttl=self.ttl)
            return self._lease

    def create(self, key: str, value: str) -> bool:
        from etcd3gw import exceptions

        lease = self._granted_lease()
        try:
            return bool(self._call(f"create {key}", self._client.create, key, value, lease=lease))
        except exceptions.Etcd3Exception as exc:
            if "not found" not in f"{exc} {exc.detail_text}".lower():
                raise
            with self._lock:  # the lease expired (etcd answers 404): take a new one once
                self._lease = None
            return bool(self._call(f"create {key}", self._client.create, key, value, lease=self._granted_lease()))

    def get_prefix(self, prefix: str) -> dict[str, str]:
        items = self._call(f"read {prefix}", self._client.get_prefix, prefix)
        return {_text(meta["key"]): _text(value) for value, meta in items}

    def read(self, key: str) -> tuple[str, int] | None:
        items = self._call(f"read {key}", self._client.get, key, metadata=True)
        for value, meta in items:
            return _text(value), int(meta.get("mod_revision", 0))
        return None

    def put_if_revision(self, key: str, value: str, revision: int,
                        delete_ranges: tuple[tuple[str, str], ...] = ()) -> bool:
        txn = {
            "compare": [{"key": _b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": revision}],
            "success": [{"request_put": {"key": _b64(key), "value": _b64(value)}}]
            + [{"request_delete_range": {"key": _b64(start), "range_end": _b64(end)}} for start, end in delete_ranges],
            "failure": [],
        }
        result = self._call(f"decide {key}", self._client.transaction, txn)
        return bool(result.get("succeeded", False))

    def watch_prefix(self, prefix: str) -> PrefixWatch:
        try:
            url = self._client.get_url("/watch")
        except Exception as exc:  # the gateway's API path is discovered by a request
            raise StoreUnavailable(f"{self.describe()}: cannot watch {prefix} ({type(exc).__name__}: "
                                   f"{short_reason(exc)})") from None
        return _EtcdWatch(url, prefix, self.request_timeout, self.describe())

    def delete_prefix(self, prefix: str) -> None:
        self._call(f"delete {prefix}", self._client.delete_prefix, prefix)

    def refresh_lease(self) -> bool:
        lease = self._lease
        if lease is None:
            return True  # nothing created yet (or a new lease is due at the next create)
        from etcd3gw import exceptions

        try:
            if int(self._call("lease refresh", lease.refresh)) > 0:
                return True
        except exceptions.Etcd3Exception as exc:
            if "not found" not in f"{exc} {exc.detail_text}".lower():
                raise
        with self._lock:  # etcd answers TTL -1 (or 404): the lease expired and its keys are gone
            if self._lease is lease:
                self._lease = None
        return False

    def close(self, revoke: bool = False) -> None:
        lease, self._lease = self._lease, None
        if revoke and lease is not None:
            self._call("lease revoke", lease.revoke)
        self._client.session.close()


def short_reason(exc: BaseException) -> str:
    """The useful end of a client error: ``[Errno 111] Connection refused`` rather than a urllib3 repr."""
    text = str(exc) or str(getattr(exc, "detail_text", "") or "") or type(exc).__name__
    match = _ERRNO.search(text)
    if match:
        return match.group(0)
    return text if len(text) <= 200 else text[:197] + "..."


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
