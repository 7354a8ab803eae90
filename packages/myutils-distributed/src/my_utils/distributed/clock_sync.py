"""Clock offsets between two ranks over torch.distributed (legacy path ``my_utils.clockSyncUtils``).

``ClockSynchronizer.sync(is_server, peer_rank, group=None)`` is the seed's call: the server
(the time reference) answers ping-pongs, the client measures and returns server clock minus
its own clock in seconds (the server returns 0.0). ``ClockSynchronizer.measure`` returns the
whole ``ClockEstimate`` (offset ± uncertainty). ``SocketClockSynchronizer`` (the same over a
plain TCP socket) is re-exported here because the seed imported both from this module.

Clocks are read with ``time.time_ns`` by default: the offset is applied to the unix
timestamps of the profile CSV, so it must be measured on that clock. Every receive waits at
most ``timeout`` seconds; the error names the peer (a gloo/NCCL wait has no timeout of its own
short of the process group's, which is typically 30 minutes).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_estimate import ClockEstimate, ClockSample, estimate_offset
from my_utils.distributed.socket_clock import SocketClockSynchronizer

if TYPE_CHECKING:
    import torch

__all__ = ["ClockSyncTimeout", "ClockSynchronizer", "SocketClockSynchronizer"]

Clock = Callable[[], int]

DEFAULT_ROUNDS = 60
DEFAULT_KEEP = 1
DEFAULT_WARMUP = 5
DEFAULT_TIMEOUT_S = 60.0
_STOP = -1  # a request's first field: -1 ends the session, otherwise the round number


class ClockSyncTimeout(TimeoutError):
    """A peer did not answer within the timeout; the message names it and what it should be doing."""


class ClockSynchronizer:
    """NTP-style offset between two ranks of a torch.distributed process group (gloo or NCCL).

    Both sides call ``sync`` (or ``measure``) with the other's global rank. The client sends
    ``rounds`` pings; the estimate is the lowest-RTT round trip, ± half its RTT (see
    ``clock_estimate``). With NCCL the small messages travel as CUDA tensors.
    """

    @staticmethod
    def sync(
        is_server: bool,
        peer_rank: int,
        group: Any = None,
        *,
        rounds: int = DEFAULT_ROUNDS,
        keep: int = DEFAULT_KEEP,
        timeout: float = DEFAULT_TIMEOUT_S,
        clock: Clock | None = None,
    ) -> float:
        """Return server clock minus this rank's clock in seconds (0.0 on the server)."""
        return ClockSynchronizer.measure(
            is_server, peer_rank, group, rounds=rounds, keep=keep, timeout=timeout, clock=clock
        ).offset_s

    @staticmethod
    def measure(
        is_server: bool,
        peer_rank: int,
        group: Any = None,
        *,
        rounds: int = DEFAULT_ROUNDS,
        keep: int = DEFAULT_KEEP,
        timeout: float = DEFAULT_TIMEOUT_S,
        clock: Clock | None = None,
    ) -> ClockEstimate:
        """Like ``sync`` but return the ``ClockEstimate`` (offset ± uncertainty, best RTT, when)."""
        import torch.distributed as dist

        if rounds <= DEFAULT_WARMUP:
            raise UsageError(f"ClockSynchronizer: rounds={rounds}; use more than {DEFAULT_WARMUP} (warm-up rounds)")
        if not dist.is_available() or not dist.is_initialized():
            raise UsageError(
                "ClockSynchronizer.sync: torch.distributed is not initialised; call "
                "torch.distributed.init_process_group(...) first (or use SocketClockSynchronizer)"
            )
        read = clock or time.time_ns
        link = _Link(dist, peer_rank, group, timeout)
        if is_server:
            link.serve(read)
            return ClockEstimate.reference(read() / 1e9, peer_rank)
        samples = link.ping(read, rounds)
        return estimate_offset(samples, keep=keep, warmup=DEFAULT_WARMUP, peer=peer_rank)


class _Link:
    """The two int64 messages of the protocol between this rank and ``peer``, every wait bounded."""

    def __init__(self, dist: Any, peer: int, group: Any, timeout: float) -> None:
        import torch

        self.dist = dist
        self.peer = peer
        self.group = group
        self.timeout = timeout
        device = torch.device("cpu")
        if dist.get_backend(group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        self.request = torch.zeros(2, dtype=torch.int64, device=device)
        self.reply = torch.zeros(2, dtype=torch.int64, device=device)
        self.me = dist.get_rank()

    def _wait(self, work: Any, what: str) -> None:
        try:
            work.wait(datetime.timedelta(seconds=self.timeout))
        except RuntimeError as exc:
            side = "server" if what == "request" else "client"
            raise ClockSyncTimeout(
                f"ClockSynchronizer on rank {self.me}: no {what} from rank {self.peer} within {self.timeout:g} s "
                f"({str(exc).splitlines()[0][:160]}); is rank {self.peer} calling "
                f"ClockSynchronizer.sync(is_server={side == 'client'}, peer_rank={self.me})?"
            ) from None

    def _send(self, tensor: torch.Tensor) -> None:
        self._wait(self.dist.isend(tensor, self.peer, group=self.group), "acknowledgement")

    def _recv(self, tensor: torch.Tensor, what: str) -> None:
        self._wait(self.dist.irecv(tensor, self.peer, group=self.group), what)

    def serve(self, read: Clock) -> None:
        """Answer pings until the client says stop: reply with (receive time, send time)."""
        request, reply = self.request, self.reply
        while True:
            self._recv(request, "request")
            t2 = read()
            if int(request[0]) == _STOP:
                return
            reply[0] = t2
            reply[1] = read()  # t3 as late as possible: the turnaround is subtracted from the RTT
            self._send(reply)

    def ping(self, read: Clock, rounds: int) -> list[ClockSample]:
        """Send ``rounds`` pings, then stop; return the timed round trips."""
        request, reply = self.request, self.reply
        samples: list[ClockSample] = []
        for i in range(rounds):
            request[0] = i
            t1 = read()
            self._send(request)
            self._recv(reply, "reply")
            t4 = read()
            values = reply.tolist()
            samples.append(ClockSample(t1, int(values[0]), int(values[1]), t4))
        request[0] = _STOP
        self._send(request)
        return samples
