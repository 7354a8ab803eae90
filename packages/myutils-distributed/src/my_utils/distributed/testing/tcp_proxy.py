"""A TCP proxy on 127.0.0.1 that a test can cut and restore: a network partition of one client.

    with TcpProxy(etcd.port) as proxy:               # the partitioned rank connects to proxy.port
        ...
        proxy.cut()      # every open connection is dropped; new ones are refused (reset at once)
        ...
        proxy.restore()  # connections go through again

Each accepted connection is copied both ways by two daemon threads; ``cut`` shuts every
socket down (the client sees its connection reset, as when a link or a NAT entry dies) and,
until ``restore``, accepts and closes new connections at once. Nothing waits unbounded:
``close`` stops the listener and drops every connection.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>`` until cut."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = threading.Event()
        self.refused = 0  # connections closed at once while cut (for tests to check the cut was felt)
        self._thread = threading.Thread(target=self._accept_loop, name=f"TcpProxy :{self.port}", daemon=True)
        self._thread.start()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def cut(self) -> None:
        """Drop every open connection and refuse new ones until ``restore``."""
        with self._lock:
            self._cut = True
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _shut(sock)

    def restore(self) -> None:
        """Let connections through again."""
        with self._lock:
            self._cut = False

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._closed.set()
        self.cut()
        self._thread.join(5)
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refuse = self._cut
            if refuse:
                self.refused += 1
                _shut(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                _shut(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                if self._cut:
                    _shut(client)
                    _shut(upstream)
                    continue
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _shut(src, reset=False)
            _shut(dst, reset=False)


def _shut(sock: socket.socket, reset: bool = True) -> None:
    if reset:  # SO_LINGER 0: close sends RST, as a dropped link does
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes the pump thread blocked in recv
    with contextlib.suppress(OSError):
        sock.close()
