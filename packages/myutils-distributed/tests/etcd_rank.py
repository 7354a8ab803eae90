"""One barrier rank in its own process (so a test can kill it): prints one JSON line per event.

    python etcd_rank.py --port P --name N --rank R --world W --rounds K [--timeout S] [--die-at G]
                        [--ttl S] [--first-timeout S]

Generation 0 waits up to ``--first-timeout`` (60 s) whatever ``--timeout`` says: the ranks start
at once, but a busy machine may take seconds to start an interpreter, and that is not what a
test measures (unless it sets ``--first-timeout``).

``--die-at G`` kills the process with SIGKILL just before it would arrive at generation G
(a crashed rank: its lease is never revoked, it simply stops).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

from my_utils.distributed.etcd_barrier import EtcdBarrier


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("--port", "--rank", "--world", "--rounds", "--ttl"):
        ap.add_argument(name, type=int, default=30 if name == "--ttl" else None)
    ap.add_argument("--name", required=True)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--first-timeout", type=float, default=60.0)
    ap.add_argument("--die-at", type=int, default=-1)
    a = ap.parse_args()
    barrier = EtcdBarrier(a.name, a.rank, a.world, port=a.port, ttl=a.ttl, timeout=a.timeout, poll_s=0.5)
    print(json.dumps({"event": "ready", "rank": a.rank}), flush=True)
    for generation in range(a.rounds):
        if generation == a.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        started = time.perf_counter()
        try:
            done = barrier.wait(timeout=a.first_timeout if generation == 0 else a.timeout)
        except Exception as exc:
            print(json.dumps({"event": "error", "rank": a.rank, "type": type(exc).__name__, "message": str(exc),
                              "missing": getattr(exc, "missing", None), "decided": getattr(exc, "decided", None),
                              "ms": (time.perf_counter() - started) * 1e3}), flush=True)
            raise SystemExit(1) from None
        ms = (time.perf_counter() - started) * 1e3
        # the property under test: nobody leaves before everybody has arrived
        where = f"{barrier.prefix}{done}/"
        here = sum(1 for key in barrier._store.get_prefix(where) if key[len(where):].isdigit())
        print(json.dumps({"event": "left", "rank": a.rank, "generation": done, "ms": ms, "present": here}),
              flush=True)
    barrier.close()


if __name__ == "__main__":
    main()
