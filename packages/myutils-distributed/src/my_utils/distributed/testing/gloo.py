"""Run a function on N gloo ranks in separate processes, reachable on 127.0.0.1 only.

``run_gloo("tests/workers.py:check_padding", world=2, kwargs={...})`` starts one fresh
interpreter (so the caller's torch threads and state never leak into forked ranks), which
binds the store's socket to 127.0.0.1 itself and forks the ranks with
``torch.multiprocessing`` (fork passes the listening descriptor; ``env://`` would listen on
every interface). Each rank calls ``function(rank, world, **kwargs)`` inside an initialised
gloo process group and its JSON-able result comes back in rank order. Everything is bounded
by ``timeout``: on expiry the ranks are killed and ``GlooRunError`` says so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GlooRunError", "listening_addresses", "run_gloo"]

LOOPBACK_ENV = {"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}


class GlooRunError(RuntimeError):
    """The ranks failed or timed out; the message carries the tail of their output."""


def run_gloo(worker: str, world: int, *, kwargs: dict[str, Any] | None = None, timeout: float = 60.0) -> list[Any]:
    """Run ``worker`` (``"path/to/file.py:function"`` or ``"module:function"``) on ``world`` gloo ranks."""
    with tempfile.TemporaryDirectory(prefix="myutils-gloo-") as out:
        cmd = [sys.executable, "-m", "my_utils.distributed.testing.gloo_main", worker, str(world),
               json.dumps(kwargs or {}), out, str(timeout)]
        env = {**os.environ, **LOOPBACK_ENV}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30, env=env)
        except subprocess.TimeoutExpired as exc:
            raise GlooRunError(f"{worker} on {world} ranks: no exit within {timeout + 30:g} s; "
                               f"output: {_tail(exc.stdout, exc.stderr)}") from None
        if proc.returncode != 0:
            raise GlooRunError(f"{worker} on {world} ranks exited with {proc.returncode}: "
                               f"{_tail(proc.stdout, proc.stderr)}")
        results = []
        for rank in range(world):
            path = Path(out) / f"rank_{rank}.json"
            if not path.exists():
                raise GlooRunError(f"{worker}: rank {rank} wrote no result; output: {_tail(proc.stdout, proc.stderr)}")
            results.append(json.loads(path.read_text())["result"])
        return results


def _tail(stdout: str | bytes | None, stderr: str | bytes | None, limit: int = 4000) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")

    return (text(stdout) + text(stderr))[-limit:]


def listening_addresses(pid: int) -> list[str]:
    """TCP listen addresses (``ip:port``) of process ``pid``, read from /proc (Linux; no ``ss`` needed)."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            hex_ip, hex_port = cols[1].split(":")
            raw = bytes.fromhex(hex_ip)
            # /proc prints each 32-bit word in host (little-endian) order
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append(f"{socket.inet_ntop(family, words)}:{int(hex_port, 16)}")
    return sorted(found)
