"""``KeyValueStore`` in one process: the barrier's logic tested with threads, no server.

Instances made with the same ``InMemoryKeyValueStore.Space()`` share keys; each instance is
one rank's connection with its own "lease": ``expire_lease()`` drops that rank's keys as etcd
would after a crash or a partition longer than the TTL (the next ``refresh_lease`` says so),
``set_unavailable(True)`` makes every call fail like a stopped server. Keys put by
``put_if_revision`` have no owner: no lease takes them away.
"""

from __future__ import annotations

import queue
import threading

from my_utils.distributed.kv_store import StoreUnavailable

__all__ = ["InMemoryKeyValueStore"]


class _Space:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, tuple[str, int | None, int]] = {}  # key -> (value, owner id or None, mod revision)
        self.revision = 0
        self.watchers: list[tuple[str, queue.Queue[str]]] = []
        self.unavailable = False


class _Watch:
    def __init__(self, space: _Space, prefix: str) -> None:
        self.space = space
        self.queue: queue.Queue[str] = queue.Queue()
        self.entry = (prefix, self.queue)
        with space.lock:
            space.watchers.append(self.entry)

    def next_key(self, timeout: float) -> str | None:
        try:
            return self.queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def close(self) -> None:
        with self.space.lock:
            if self.entry in self.space.watchers:
                self.space.watchers.remove(self.entry)


class InMemoryKeyValueStore:
    """One rank's view of a shared in-memory key space (see the module docstring)."""

    Space = _Space

    def __init__(self, space: _Space) -> None:
        self.space = space
        self.closed = False
        self._lease_lost = False

    def _check(self) -> None:
        if self.space.unavailable:
            raise StoreUnavailable("in-memory store: set unavailable by the test")

    def set_unavailable(self, value: bool) -> None:
        """Make every call of every instance on this space fail (or work again)."""
        self.space.unavailable = value

    def describe(self) -> str:
        return "in-memory store"

    def create(self, key: str, value: str) -> bool:
        self._check()
        with self.space.lock:
            if key in self.space.data:
                return False
            self.space.revision += 1
            self.space.data[key] = (value, id(self), self.space.revision)
            watchers = [q for prefix, q in self.space.watchers if key.startswith(prefix)]
        for q in watchers:
            q.put(key)
        return True

    def get_prefix(self, prefix: str) -> dict[str, str]:
        self._check()
        with self.space.lock:
            return {k: v for k, (v, _, _) in self.space.data.items() if k.startswith(prefix)}

    def read(self, key: str) -> tuple[str, int] | None:
        self._check()
        with self.space.lock:
            item = self.space.data.get(key)
        return None if item is None else (item[0], item[2])

    def put_if_revision(self, key: str, value: str, revision: int,
                        delete_ranges: tuple[tuple[str, str], ...] = ()) -> bool:
        self._check()
        with self.space.lock:
            item = self.space.data.get(key)
            if (item[2] if item is not None else 0) != revision:
                return False
            for start, end in delete_ranges:
                for k in [k for k in self.space.data if start <= k < end]:
                    del self.space.data[k]
            self.space.revision += 1
            self.space.data[key] = (value, None, self.space.revision)
            watchers = [q for prefix, q in self.space.watchers if key.startswith(prefix)]
        for q in watchers:
            q.put(key)
        return True

    def watch_prefix(self, prefix: str) -> _Watch:
        self._check()
        return _Watch(self.space, prefix)

    def delete_prefix(self, prefix: str) -> None:
        self._check()
        with self.space.lock:
            for key in [k for k in self.space.data if k.startswith(prefix)]:
                del self.space.data[key]

    def refresh_lease(self) -> bool:
        self._check()
        lost, self._lease_lost = self._lease_lost, False
        return not lost

    def expire_lease(self) -> None:
        """Drop every key this instance created (its lease ran out); the next refresh returns False."""
        with self.space.lock:
            for key in [k for k, (_, owner, _) in self.space.data.items() if owner == id(self)]:
                del self.space.data[key]
        self._lease_lost = True

    def close(self, revoke: bool = False) -> None:
        self.closed = True
        if revoke:
            self.expire_lease()
