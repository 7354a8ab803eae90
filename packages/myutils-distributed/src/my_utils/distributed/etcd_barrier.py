"""N ranks meet under a key prefix on etcd: leases for dead ranks, generations for reuse, bounded waits.

Each ``wait()`` is one generation ``g``. A rank creates ``<prefix><g>/<rank>`` under its lease
(create-if-absent), then counts the ranks under ``<prefix><g>/``: from a read, then from one
watch on the whole prefix that stays open across generations (arrivals at a later generation
are kept for it), re-reading every ``poll_s`` seconds as a heartbeat. An etcd restart ends
the watch stream or fails a read (``StoreUnavailable``); once etcd answers again a read (keys
and leases are on its disk) and a new watch pick up where the barrier was. Every wait ends by ``timeout`` with an error
that lists the missing ranks, and says when etcd itself was away.

A rank's keys live under its lease (TTL ``ttl``, refreshed every TTL/3 by a daemon thread),
so a killed rank's arrival disappears and the others time out naming it. Keys of generation
``g - 1`` are deleted by one rank once generation ``g`` is complete (everybody has left
``g - 1`` by then); never earlier: a slower rank may still be counting.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from types import TracebackType

from my_utils.core.errors import MyUtilsError, UsageError
from my_utils.distributed.kv_store import EtcdStore, KeyValueStore, PrefixWatch, StoreUnavailable

__all__ = ["BarrierTimeout", "EtcdBarrier"]

_log = logging.getLogger(__name__)


class BarrierTimeout(MyUtilsError, TimeoutError):
    """Not every rank arrived in time; ``missing`` lists them (sorted)."""

    def __init__(self, message: str, generation: int, arrived: list[int], missing: list[int]) -> None:
        super().__init__(message)
        self.generation = generation
        self.arrived = arrived
        self.missing = missing


class EtcdBarrier:
    """A reusable barrier of ``world_size`` ranks named ``name`` (keys under ``/my_utils/barrier/<name>/``).

    ``store`` is the seam (default: ``EtcdStore(host, port, ttl=ttl)``, the ``[etcd]`` extra).
    Use one instance per rank and call ``wait()`` at each meeting point; ``close()`` at the end.
    """

    def __init__(
        self,
        name: str,
        rank: int,
        world_size: int,
        *,
        host: str = "127.0.0.1",
        port: int = 2379,
        ttl: int = 30,
        timeout: float = 300.0,
        poll_s: float = 1.0,
        store: KeyValueStore | None = None,
    ) -> None:
        if not name or "/" in name:
            raise UsageError(f"EtcdBarrier(name={name!r}): expected a non-empty name without '/'")
        if world_size < 1 or not 0 <= rank < world_size:
            raise UsageError(f"EtcdBarrier(rank={rank}, world_size={world_size}): expected 0 <= rank < world_size")
        self.name, self.rank, self.world_size = name, rank, world_size
        self.timeout, self.poll_s, self.ttl = timeout, poll_s, ttl
        self.prefix = f"/my_utils/barrier/{name}/"
        self.generation = 0
        self._token = f"{rank}:{uuid.uuid4().hex}"
        self._store: KeyValueStore = store if store is not None else EtcdStore(host, port, ttl=ttl)
        self._watch: PrefixWatch | None = None
        self._early: dict[int, set[int]] = {}  # arrivals seen for generations after the current one
        self._stop = threading.Event()
        self._keepalive = threading.Thread(target=self._refresh_loop, name=f"EtcdBarrier {name} lease", daemon=True)
        self._keepalive.start()

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> EtcdBarrier:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self, revoke: bool = False) -> None:
        """Stop refreshing the lease. Keys expire after the TTL; ``revoke`` deletes them now
        (only when every rank has left the last ``wait``)."""
        self._stop.set()
        self._drop_watch()
        try:
            self._store.close(revoke=revoke)
        except StoreUnavailable as exc:
            _log.warning("EtcdBarrier %s: closing: %s", self.name, exc)

    def _refresh_loop(self) -> None:
        reported = False
        while not self._stop.wait(max(0.5, self.ttl / 3)):
            try:
                self._store.refresh_lease()
                reported = False
            except Exception as exc:  # an outage must not kill the thread: the next refresh may work
                if not reported:
                    _log.warning("EtcdBarrier %s rank %d: lease refresh failed: %s", self.name, self.rank, exc)
                    reported = True

    # -- the barrier ---------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> int:
        """Block until all ranks reached this generation; return its number (0, 1, ...)."""
        limit = self.timeout if timeout is None else timeout
        generation = self.generation
        deadline = time.monotonic() + limit
        where = f"{self.prefix}{generation}/"
        outage: StoreUnavailable | None = None
        arrived = self._early.pop(generation, set())
        self._arrive(where, deadline, limit)
        arrived.add(self.rank)  # even if no read succeeds after this: our key is there
        read = False
        while True:
            remaining = deadline - time.monotonic()
            try:
                if self._watch is None:
                    # watch first, then read: an arrival between the two is seen by one of them
                    self._watch = self._store.watch_prefix(self.prefix)
                    read = False
                if not read:
                    arrived |= self._ranks(self._store.get_prefix(where), where)
                    read, outage = True, None
                if len(arrived) >= self.world_size:
                    break
                if remaining <= 0:
                    raise self._timeout(generation, limit, arrived, outage)
                key = self._watch.next_key(min(self.poll_s, remaining))
                if key is None:  # heartbeat: a quiet watch may be a dead one
                    read = False
                else:
                    self._note(key, generation, arrived)
            except StoreUnavailable as exc:
                outage = exc
                self._drop_watch()
                if deadline - time.monotonic() <= 0:
                    raise self._timeout(generation, limit, arrived, outage) from None
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        self.generation += 1
        self._clean(generation)
        return generation

    def _note(self, key: str, generation: int, arrived: set[int]) -> None:
        """Count an arrival from the watch: this generation's, or a later one's for later."""
        parts = key[len(self.prefix):].split("/") if key.startswith(self.prefix) else []
        if len(parts) != 2 or not (parts[0].isdigit() and parts[1].isdigit()):
            return
        g, rank = int(parts[0]), int(parts[1])
        if rank >= self.world_size:
            return
        if g == generation:
            arrived.add(rank)
        elif g > generation:  # a faster rank is already at the next meeting
            self._early.setdefault(g, set()).add(rank)

    def _drop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()

    def _arrive(self, where: str, deadline: float, limit: float) -> None:
        key = f"{where}{self.rank}"
        while True:
            try:
                if self._store.create(key, self._token):
                    return
                current = self._store.get_prefix(key).get(key)
                if current == self._token:  # our create went through but its answer was lost
                    return
                raise UsageError(f"EtcdBarrier {self.name!r}: rank {self.rank} already arrived at generation "
                                 f"{self.generation} from another process ({key} exists); two processes use "
                                 f"rank {self.rank}, or a previous run left keys (delete {self.prefix})")
            except StoreUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise BarrierTimeout(
                        f"EtcdBarrier {self.name!r} generation {self.generation}: rank {self.rank} could not "
                        f"arrive within {limit:g} s because the store is unavailable ({exc}); check etcd",
                        self.generation, [], list(range(self.world_size))) from None
                time.sleep(0.2)

    def _ranks(self, items: dict[str, str], where: str) -> set[int]:
        ranks = set()
        for key in items:
            tail = key[len(where):] if key.startswith(where) else ""
            if tail.isdigit() and int(tail) < self.world_size:
                ranks.add(int(tail))
        return ranks

    def _timeout(self, generation: int, limit: float, arrived: set[int],
                 outage: StoreUnavailable | None) -> BarrierTimeout:
        missing = sorted(set(range(self.world_size)) - arrived)
        why = (f"; the store was unavailable at the end ({outage})" if outage is not None
               else "; they crashed, are slower, or do not call wait() (a dead rank's key expires with its lease)")
        return BarrierTimeout(
            f"EtcdBarrier {self.name!r} generation {generation} on {self._store.describe()}: "
            f"{len(arrived)}/{self.world_size} ranks arrived within {limit:g} s; missing ranks {missing}{why}",
            generation, sorted(arrived), missing)

    def _clean(self, generation: int) -> None:
        # every rank arrived at `generation`, so every rank has left `generation - 1`
        if generation == 0 or generation % self.world_size != self.rank:
            return
        try:
            self._store.delete_prefix(f"{self.prefix}{generation - 1}/")
        except StoreUnavailable as exc:
            _log.warning("EtcdBarrier %s: could not delete generation %d: %s", self.name, generation - 1, exc)
