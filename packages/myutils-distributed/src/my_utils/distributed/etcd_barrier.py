"""N ranks meet under a key prefix on etcd: one agreed outcome per meeting, leases for dead ranks, bounded waits.

Each ``wait()`` is one generation ``g``. A rank creates ``<prefix><g>/<rank>`` under its lease
(create-if-absent) and watches ``<prefix>``, re-reading ``<prefix><g>/`` every ``poll_s``
seconds as a heartbeat (a quiet watch may be a dead one). An etcd restart ends the watch
stream or fails a read (``StoreUnavailable``); once etcd answers again, a read and a new
watch pick up where the barrier was.

**One outcome for everybody.** Counting alone lets ranks disagree: a rank that counted a key
before it expired, or arrived after another rank's deadline, would pass while the others
fail. So the outcome of a generation is a key, ``<prefix><g>/outcome``, written once in a
transaction (put only if absent) and never under a lease:

- a rank that reads all ``world_size`` arrival keys at one revision writes *passed*;
- a rank whose deadline comes first writes *failed* with the ranks missing from a fresh read;
- every rank, whatever it counted, returns or raises what that key says (``BarrierTimeout``
  with the same missing ranks on every rank; a rank arriving after the decision fails too).

**Partitions longer than the TTL.** A rank's arrival lives under its lease (TTL ``ttl``,
refreshed every TTL/3 by a daemon thread), so a crashed rank's arrival disappears. When
etcd is paused, or one rank is cut off, for longer than the TTL, the lease expires although
the rank is alive and waiting: the refresh then learns that the lease is gone, takes a new
one and re-creates the arrival (so does the heartbeat read, if the key is missing). Nobody
can have decided *passed* while the key was absent, so the ranks meet once the rank is back.

A rank that cannot reach etcd at its deadline keeps trying to read or write the outcome for
``settle_s`` more seconds; if etcd is still away it raises ``BarrierTimeout`` saying the
store was unavailable (the others may have decided either way; the next ``wait()`` of that
rank first settles this generation). Every wait therefore ends within ``timeout + settle_s``
(plus one request timeout).

Keys of generations before ``g`` are deleted by one rank once ``g`` has passed (everybody
has left them then); never earlier: a slower rank may still be reading the outcome. An
outcome left by an earlier run under the same name is recognised (it names other
processes' tokens) and replaced; the first decision of generation 0 also deletes every other
generation's keys (nobody of this run can be past generation 0 before that decision).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from types import TracebackType

from my_utils.core.errors import MyUtilsError, UsageError
from my_utils.distributed.kv_store import EtcdStore, KeyValueStore, PrefixWatch, StoreUnavailable

__all__ = ["BarrierTimeout", "EtcdBarrier"]

_log = logging.getLogger(__name__)

OUTCOME = "outcome"


class BarrierTimeout(MyUtilsError, TimeoutError):
    """Not every rank arrived in time; ``missing`` lists them (sorted).

    When ``decided`` is True every rank of the barrier raised this same error (same
    ``generation``, ``arrived`` and ``missing``); when False this rank could not reach the
    store at its deadline and does not know what the others saw.
    """

    def __init__(self, message: str, generation: int, arrived: list[int], missing: list[int],
                 decided: bool = True) -> None:
        super().__init__(message)
        self.generation = generation
        self.arrived = arrived
        self.missing = missing
        self.decided = decided


@dataclass(frozen=True)
class _Outcome:
    """What the ranks agreed on for one generation (the JSON of its outcome key)."""

    passed: bool
    arrived: dict[int, str]  # rank -> token of the instance that arrived
    missing: list[int]
    by: int
    limit: float
    revision: int

    @classmethod
    def parse(cls, text: str, revision: int) -> _Outcome | None:
        try:
            doc = json.loads(text)
            return cls(bool(doc["passed"]), {int(r): str(t) for r, t in doc["arrived"].items()},
                       sorted(int(r) for r in doc["missing"]), int(doc["by"]), float(doc["limit"]), revision)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None  # not ours (a hand-written key): treated as stale and replaced

    def dump(self) -> str:
        return json.dumps({"passed": self.passed, "arrived": {str(r): t for r, t in sorted(self.arrived.items())},
                           "missing": self.missing, "by": self.by, "limit": self.limit}, sort_keys=True)


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
        settle_s: float = 2.0,
        store: KeyValueStore | None = None,
    ) -> None:
        if not name or "/" in name:
            raise UsageError(f"EtcdBarrier(name={name!r}): expected a non-empty name without '/'")
        if world_size < 1 or not 0 <= rank < world_size:
            raise UsageError(f"EtcdBarrier(rank={rank}, world_size={world_size}): expected 0 <= rank < world_size")
        self.name, self.rank, self.world_size = name, rank, world_size
        self.timeout, self.poll_s, self.ttl, self.settle_s = timeout, poll_s, ttl, settle_s
        self.prefix = f"/my_utils/barrier/{name}/"
        self.generation = 0
        self._token = f"{rank}:{uuid.uuid4().hex}"
        self._store: KeyValueStore = store if store is not None else EtcdStore(host, port, ttl=ttl)
        self._watch: PrefixWatch | None = None
        self._lock = threading.Lock()
        self._holding: str | None = None  # the arrival key to re-create if its lease is lost
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
        with self._lock:
            self._holding = None
        self._drop_watch()
        try:
            self._store.close(revoke=revoke)
        except StoreUnavailable as exc:
            _log.warning("EtcdBarrier %s: closing: %s", self.name, exc)

    def _refresh_loop(self) -> None:
        reported = False
        while not self._stop.wait(max(0.5, self.ttl / 3)):
            try:
                if not self._store.refresh_lease():
                    _log.warning("EtcdBarrier %s rank %d: the lease expired (etcd away or unreachable for "
                                 "longer than ttl=%d s); arriving again under a new one", self.name, self.rank,
                                 self.ttl)
                    self._reassert()
                reported = False
            except Exception as exc:  # an outage must not kill the thread: the next refresh may work
                if not reported:
                    _log.warning("EtcdBarrier %s rank %d: lease refresh failed: %s", self.name, self.rank, exc)
                    reported = True

    def _reassert(self) -> None:
        """Re-create the arrival this rank is waiting under (gone with an expired lease)."""
        with self._lock:  # not while wait() moves on: a left generation's key must stay gone
            if self._holding is not None:
                self._store.create(self._holding, self._token)

    # -- the barrier ---------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> int:
        """Block until all ranks reached this generation; return its number (0, 1, ...).

        Raises ``BarrierTimeout`` (the same on every rank) when the ranks agreed that some did
        not arrive in time.
        """
        limit = self.timeout if timeout is None else timeout
        generation = self.generation
        deadline = time.monotonic() + limit
        where = f"{self.prefix}{generation}/"
        self._arrive(where, deadline, limit)
        with self._lock:
            self._holding = f"{where}{self.rank}"
        try:
            outcome = self._settle(generation, where, deadline, limit)
        finally:
            with self._lock:
                self._holding = None
        self.generation += 1
        if not outcome.passed:
            raise self._failed(generation, outcome)
        self._clean(generation)
        return generation

    def _settle(self, generation: int, where: str, deadline: float, limit: float) -> _Outcome:
        """Wait for this generation's outcome: read it, or write it when all are here or time is up."""
        outcome_key = f"{where}{OUTCOME}"
        arrived: set[int] = {self.rank}
        stale = 0  # revision of an outcome left by an earlier run (0: none)
        outage: StoreUnavailable | None = None
        read = False
        while True:
            now = time.monotonic()
            try:
                if self._watch is None:
                    # watch first, then read: an arrival between the two is seen by one of them
                    self._watch = self._store.watch_prefix(self.prefix)
                    read = False
                if not read or len(arrived) >= self.world_size or now >= deadline:
                    present, found, stale = self._read(where, outcome_key, stale)
                    read, outage = True, None
                    if found is not None:
                        return found
                    if self.rank not in present:  # our lease expired while we waited
                        self._reassert()
                        present[self.rank] = self._token
                    arrived = set(present)
                    if len(present) >= self.world_size or now >= deadline:
                        decided = self._decide(generation, outcome_key, present, stale, limit)
                        if decided is not None:
                            return decided
                        read = False  # another rank decided first: read what it wrote
                        continue
                key = self._watch.next_key(max(0.0, min(self.poll_s, deadline - now)))
                if key is None or key == outcome_key:  # a heartbeat (a quiet watch may be dead), or a decision
                    read = False
                else:
                    rank = self._rank_of(key, where)
                    if rank is not None:
                        arrived.add(rank)
            except StoreUnavailable as exc:
                outage = exc
                self._drop_watch()
                if time.monotonic() >= deadline + self.settle_s:
                    raise self._unknown(generation, limit, arrived, outage) from None
                time.sleep(min(0.2, max(0.01, deadline + self.settle_s - time.monotonic())))

    def _read(self, where: str, outcome_key: str, stale: int) -> tuple[dict[int, str], _Outcome | None, int]:
        """This generation's arrivals (rank -> token) and its outcome if one of this run exists."""
        items = self._store.get_prefix(where)
        present = {}
        for key, value in items.items():
            rank = self._rank_of(key, where)
            if rank is not None:
                present[rank] = value
        if outcome_key not in items:
            return present, None, 0
        outcome = _Outcome.parse(items[outcome_key], 0)
        if outcome is not None and self._of_this_run(outcome, present):
            return present, outcome, stale
        found = self._store.read(outcome_key)  # an earlier run's: its revision, to replace it
        return present, None, (found[1] if found is not None else 0)

    def _of_this_run(self, outcome: _Outcome, present: dict[int, str]) -> bool:
        """Whether ``outcome`` was written by this run (not left under the same name by an earlier one)."""
        mine = outcome.arrived.get(self.rank)
        if mine is not None:
            return mine == self._token
        if self.rank not in outcome.missing:
            return False
        # decided without us (we arrive late): by ranks whose arrivals are still here
        return any(present.get(rank) == token for rank, token in outcome.arrived.items())

    def _decide(self, generation: int, outcome_key: str, present: dict[int, str], stale: int,
                limit: float) -> _Outcome | None:
        """Write the outcome (passed if all are present); None when another rank's came first."""
        missing = sorted(set(range(self.world_size)) - set(present))
        outcome = _Outcome(not missing, dict(present), missing, self.rank, limit, 0)
        purge: tuple[tuple[str, str], ...] = ()
        if generation == 0:  # nobody of this run is past generation 0 yet: all else is an earlier run's
            zero = f"{self.prefix}0/"
            purge = ((self.prefix, zero), (_after(zero), _after(self.prefix)))
        if self._store.put_if_revision(outcome_key, outcome.dump(), stale, purge):
            return outcome
        return None

    def _rank_of(self, key: str, where: str) -> int | None:
        tail = key[len(where):] if key.startswith(where) else ""
        if tail.isdigit() and int(tail) < self.world_size:
            return int(tail)
        return None

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
                if current is None:  # gone between the create and the read (an expired lease): again
                    continue
                raise UsageError(f"EtcdBarrier {self.name!r}: rank {self.rank} already arrived at generation "
                                 f"{self.generation} from another process ({key} exists); two processes use "
                                 f"rank {self.rank}, or a previous run left keys (delete {self.prefix})")
            except StoreUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise BarrierTimeout(
                        f"EtcdBarrier {self.name!r} generation {self.generation}: rank {self.rank} could not "
                        f"arrive within {limit:g} s because the store is unavailable ({exc}); check etcd",
                        self.generation, [], list(range(self.world_size)), decided=False) from None
                time.sleep(0.2)

    def _failed(self, generation: int, outcome: _Outcome) -> BarrierTimeout:
        # built from the outcome alone: every rank raises the same message
        arrived = sorted(outcome.arrived)
        return BarrierTimeout(
            f"EtcdBarrier {self.name!r} generation {generation} on {self._store.describe()}: "
            f"{len(arrived)}/{self.world_size} ranks arrived within {outcome.limit:g} s; missing ranks "
            f"{outcome.missing}; they crashed, are slower, or do not call wait() (a dead rank's key expires with "
            f"its lease); every rank of the barrier fails alike (decided by rank {outcome.by})",
            generation, arrived, outcome.missing)

    def _unknown(self, generation: int, limit: float, arrived: set[int],
                 outage: StoreUnavailable) -> BarrierTimeout:
        missing = sorted(set(range(self.world_size)) - arrived)
        return BarrierTimeout(
            f"EtcdBarrier {self.name!r} generation {generation} on {self._store.describe()}: "
            f"{len(arrived)}/{self.world_size} ranks arrived within {limit:g} s; missing ranks {missing}; "
            f"the store was unavailable at the end ({outage}), so this rank cannot know what the others decided",
            generation, sorted(arrived), missing, decided=False)

    def _clean(self, generation: int) -> None:
        # every rank arrived at `generation`, so every rank has left the generations before it
        if generation == 0 or generation % self.world_size != self.rank:
            return
        try:
            old = {key[len(self.prefix):].split("/", 1)[0] for key in self._store.get_prefix(self.prefix)}
            for g in sorted(int(g) for g in old if g.isdigit() and int(g) < generation):
                self._store.delete_prefix(f"{self.prefix}{g}/")
        except StoreUnavailable as exc:
            _log.warning("EtcdBarrier %s: could not delete generations before %d: %s", self.name, generation, exc)


def _after(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix`` (its range end)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
