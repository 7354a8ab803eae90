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

import re
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

    def watch_prefix(self, prefix: str) -> PrefixWatch:
        """Start watching ``prefix``; keys put after this returns are delivered."""

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix``."""

    def refresh_lease(self) -> None:
        """Keep this rank's lease alive (called every TTL/3 by the barrier)."""

    def close(self, revoke: bool = False) -> None:
        """Release the connection; ``revoke`` also deletes this rank's keys now."""


def etcd_client_available() -> tuple[bool, str]:
    """Whether ``etcd3gw`` imports, and why not."""
    try:
        import etcd3gw  # noqa: F401
    except ImportError as exc:
        return False, f"etcd3gw is not installed ({exc}); pip install 'myutils-distributed[etcd]'"
    return True, ""


class _EtcdWatch:
    """An etcd3gw watch whose creation and every read are bounded (its own calls are not)."""

    def __init__(self, client: Any, prefix: str, timeout: float, where: str) -> None:
        import queue

        self._queue: queue.Queue[str | None] = queue.Queue()
        self._cancel: Any = None
        result: dict[str, Any] = {}

        def start() -> None:  # etcd3gw's watch POST has no timeout: run it where we can stop waiting
            try:
                events, cancel = client.watch_prefix(prefix)
                result["cancel"] = cancel
                created.set()
                for event in events:
                    if event.get("type", "PUT") == "PUT":  # PUT is proto3's default: the field is absent
                        self._queue.put(_text(event["kv"]["key"]))
            except Exception as exc:  # the stream broke: the reader falls back to polling
                result["error"] = exc
                created.set()

        created = threading.Event()
        self._thread = threading.Thread(target=start, name=f"etcd-watch {prefix}", daemon=True)
        self._thread.start()
        if not created.wait(timeout) or "error" in result:
            self.close()
            error = result.get("error")
            why = f"{type(error).__name__}: {short_reason(error)}" if error else f"no reply within {timeout:g} s"
            raise StoreUnavailable(f"{where}: cannot watch {prefix} ({why})")
        self._cancel = result["cancel"]

    def next_key(self, timeout: float) -> str | None:
        import queue

        try:
            return self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def close(self) -> None:
        if self._cancel is not None:
            cancel, self._cancel = self._cancel, None
            try:
                cancel()
            except Exception:
                pass


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

    def watch_prefix(self, prefix: str) -> PrefixWatch:
        return _EtcdWatch(self._client, prefix, self.request_timeout, self.describe())

    def delete_prefix(self, prefix: str) -> None:
        self._call(f"delete {prefix}", self._client.delete_prefix, prefix)

    def refresh_lease(self) -> None:
        lease = self._lease
        if lease is not None:
            self._call("lease refresh", lease.refresh)

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
