"""A single-node etcd on 127.0.0.1 with a temporary data dir and free ports, that can be restarted.

    with EtcdServer() as server:          # needs the `etcd` binary (Debian: etcd-server)
        EtcdBarrier("x", 0, 1, port=server.port).wait()
        server.restart()                  # same ports, same data: keys and leases survive
        with server.paused(4.0): ...      # SIGSTOP: etcd answers nothing (a partition of every client)

Readiness is the first successful write (polled every 50 ms); a server that exits early is
reported with the tail of its log. ``stop()`` terminates (then kills) it; nothing waits unbounded.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from my_utils.core.errors import UsageError

__all__ = ["EtcdServer"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """An etcd process listening on 127.0.0.1 only (client and peer ports)."""

    def __init__(self, ready_timeout: float = 20.0) -> None:
        exe = shutil.which("etcd")
        if exe is None:
            raise UsageError("EtcdServer: the etcd binary is not on PATH; apt-get install etcd-server")
        self.exe = exe
        self.ready_timeout = ready_timeout
        self.port = _free_port()
        self.peer_port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="myutils-etcd-"))
        self.log_path = self.dir / "etcd.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """Start etcd and return once it accepts a write."""
        client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        cmd = [self.exe, "--name", "t", "--data-dir", str(self.dir / "data"),
               "--listen-client-urls", client, "--advertise-client-urls", client,
               "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
               "--initial-cluster", f"t={peer}", "--log-level", "warn"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        import etcd3gw

        client = etcd3gw.client(host="127.0.0.1", port=self.port, timeout=1)
        start = time.monotonic()
        try:
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    raise RuntimeError(f"etcd exited with code {self.process.returncode}: "
                                       f"{self.log_path.read_text(errors='replace')[-2000:]}")
                try:
                    client.put("/my_utils/ready", "1")
                    return
                except Exception as exc:
                    if time.monotonic() - start > self.ready_timeout:
                        self.stop()
                        raise TimeoutError(f"etcd on 127.0.0.1:{self.port} not ready after "
                                           f"{self.ready_timeout:g} s") from exc
                    time.sleep(0.05)
        finally:
            client.session.close()

    def stop(self) -> None:
        """Terminate etcd (kill it after 10 s); the data dir stays for a restart."""
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signal.SIGCONT)  # a paused etcd cannot act on SIGTERM
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def pause(self) -> None:
        """Freeze etcd (SIGSTOP): connections stay open, nothing is answered, leases keep ageing."""
        if self.process is None:
            raise UsageError("EtcdServer.pause(): the server is not running")
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused etcd run again (SIGCONT)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    @contextlib.contextmanager
    def paused(self, seconds: float) -> Iterator[None]:
        """Pause etcd, run the body, sleep what is left of ``seconds``, resume (also on error)."""
        started = time.monotonic()
        self.pause()
        try:
            yield
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        finally:
            self.resume()

    def restart(self, down_s: float = 0.0) -> None:
        """Stop, stay down ``down_s`` seconds, start again on the same ports with the same data."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def close(self) -> None:
        """Stop etcd and delete its data dir."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
