"""Clock offset between two machines over one TCP connection, without torch.distributed.

``SocketClockSynchronizer(port).sync(is_server, peer_ip=None)`` is the seed's call. The
server accepts one client, answers its pings with (receive time, send time) and returns 0.0;
the client returns server clock minus its own clock in seconds. ``measure`` returns the
``ClockEstimate`` (offset ± uncertainty).

The server binds ``bind_ip`` only; the default ``""`` (every interface) keeps the seed's
two-machine use working, pass ``bind_ip="127.0.0.1"`` (or one interface's address) to listen
on that address alone. Every wait (accept, connect, each reply) is bounded by ``timeout`` and
the error names the peer.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_estimate import ClockEstimate, ClockSample, estimate_offset

__all__ = ["SocketClockSynchronizer"]

_REQUEST = struct.Struct("!q")  # round number, or -1 to stop
_REPLY = struct.Struct("!qq")  # t2, t3 in the server's nanoseconds
_STOP = -1
_WARMUP = 5


def _recv_exact(sock: socket.socket, size: int, peer: str) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        part = sock.recv(size - len(chunks))
        if not part:
            raise ConnectionError(f"SocketClockSynchronizer: {peer} closed the connection in the middle of a sync")
        chunks += part
    return bytes(chunks)


class SocketClockSynchronizer:
    """NTP-style clock offset over TCP between a server (the reference) and one client."""

    def __init__(
        self,
        port: int,
        *,
        bind_ip: str = "",
        rounds: int = 60,
        keep: int = 1,
        timeout: float = 60.0,
        clock: Callable[[], int] | None = None,
    ) -> None:
        if not 0 <= int(port) <= 65535:
            raise UsageError(f"SocketClockSynchronizer(port={port!r}): expected a TCP port 0..65535")
        if rounds <= _WARMUP:
            raise UsageError(f"SocketClockSynchronizer(rounds={rounds}): use more than {_WARMUP} (warm-up rounds)")
        self.port = int(port)
        self.bind_ip = bind_ip
        self.rounds = rounds
        self.keep = keep
        self.timeout = timeout
        self.clock = clock or time.time_ns
        self.bound_port: int | None = None  # the port actually listened on (port 0 picks one)
        self._listener: socket.socket | None = None

    def sync(self, is_server: bool, peer_ip: str | None = None) -> float:
        """Return server clock minus this machine's clock in seconds (0.0 on the server)."""
        return self.measure(is_server, peer_ip).offset_s

    def measure(self, is_server: bool, peer_ip: str | None = None) -> ClockEstimate:
        """Like ``sync`` but return the whole ``ClockEstimate``."""
        if is_server:
            self._serve()
            return ClockEstimate.reference(self.clock() / 1e9, peer_ip)
        if not peer_ip:
            raise UsageError("SocketClockSynchronizer.sync(is_server=False): give peer_ip, the server's address")
        return self._ping(peer_ip)

    def listen(self) -> int:
        """Bind and listen now (before ``sync(is_server=True)``); return the port (useful with port 0)."""
        if self._listener is None:
            family = socket.AF_INET6 if ":" in self.bind_ip else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((self.bind_ip, self.port))
                listener.listen(1)
            except OSError as exc:
                listener.close()
                raise OSError(exc.errno, f"SocketClockSynchronizer: cannot listen on {self.bind_ip or '*'}:"
                                         f"{self.port}: {exc.strerror}; choose another port") from None
            self._listener = listener
            self.bound_port = listener.getsockname()[1]
        assert self.bound_port is not None
        return self.bound_port

    def close(self) -> None:
        """Stop listening (``sync`` on the server does this when the client is done)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _serve(self) -> None:
        self.listen()
        listener = self._listener
        assert listener is not None
        where = f"{self.bind_ip or '*'}:{self.bound_port}"
        listener.settimeout(self.timeout)
        try:
            try:
                conn, addr = listener.accept()
            except TimeoutError:
                raise TimeoutError(
                    f"SocketClockSynchronizer server on {where}: no client connected within {self.timeout:g} s; "
                    "start the client with sync(is_server=False, peer_ip=<this machine's address>)"
                ) from None
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.settimeout(self.timeout)
                peer = f"client {addr[0]}:{addr[1]}"
                read = self.clock
                try:
                    while True:
                        (number,) = _REQUEST.unpack(_recv_exact(conn, _REQUEST.size, peer))
                        t2 = read()
                        if number == _STOP:
                            return
                        conn.sendall(_REPLY.pack(t2, read()))
                except TimeoutError:
                    raise TimeoutError(
                        f"SocketClockSynchronizer server on {where}: {peer} sent nothing for {self.timeout:g} s"
                    ) from None
        finally:
            self.close()

    def _ping(self, peer_ip: str) -> ClockEstimate:
        peer = f"server {peer_ip}:{self.port}"
        try:
            sock = socket.create_connection((peer_ip, self.port), timeout=self.timeout)
        except OSError as exc:
            raise ConnectionError(
                f"SocketClockSynchronizer: cannot connect to {peer} within {self.timeout:g} s ({exc}); "
                "is the server running sync(is_server=True) on that port?"
            ) from None
        samples: list[ClockSample] = []
        read = self.clock
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                for i in range(self.rounds):
                    t1 = read()
                    sock.sendall(_REQUEST.pack(i))
                    t2, t3 = _REPLY.unpack(_recv_exact(sock, _REPLY.size, peer))
                    samples.append(ClockSample(t1, t2, t3, read()))
                sock.sendall(_REQUEST.pack(_STOP))
            except TimeoutError:
                raise TimeoutError(f"SocketClockSynchronizer: no reply from {peer} within {self.timeout:g} s") from None
        return estimate_offset(samples, keep=self.keep, warmup=_WARMUP, peer=peer_ip)
