"""The interpreter ``run_gloo`` starts: bind the store on 127.0.0.1, fork the ranks, bound the wait.

    python -m my_utils.distributed.testing.gloo_main WORKER WORLD KWARGS_JSON OUT_DIR TIMEOUT
"""

from __future__ import annotations

import os

# Before torch is imported: one OpenMP thread per rank, gloo on loopback.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

import datetime
import importlib
import importlib.util
import json
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_worker(spec: str) -> Callable[..., Any]:
    """``"file.py:function"`` (loaded by path) or ``"package.module:function"``."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(f"_gloo_worker_{Path(where).stem}", where)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"gloo_main: cannot load {where}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


def _rank_main(rank: int, world: int, port: int, fd: int, worker: str, kwargs: dict[str, Any], out: str,
               timeout: float) -> None:
    import torch.distributed as dist

    wait = datetime.timedelta(seconds=timeout)
    if rank == 0:  # the store listens on the socket the parent bound to 127.0.0.1
        store = dist.TCPStore("127.0.0.1", port, world, True, wait, master_listen_fd=fd, use_libuv=False)
    else:
        store = dist.TCPStore("127.0.0.1", port, world, False, wait)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=wait)
    try:
        result = load_worker(worker)(rank, world, **kwargs)
        tmp = Path(out) / f"rank_{rank}.json.tmp"
        tmp.write_text(json.dumps({"result": result}))
        tmp.rename(Path(out) / f"rank_{rank}.json")
    finally:
        dist.destroy_process_group()


def main(argv: list[str]) -> int:
    """Fork ``world`` ranks running ``worker``; return 0 when all finished in time."""
    import torch.multiprocessing as mp

    worker, world_text, kwargs_text, out, timeout_text = argv
    world, timeout = int(world_text), float(timeout_text)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        args = (world, listener.getsockname()[1], listener.fileno(), worker, json.loads(kwargs_text), out, timeout)
        context = mp.start_processes(_rank_main, args=args, nprocs=world, start_method="fork", join=False)
        deadline = time.monotonic() + timeout
        while not context.join(timeout=max(0.05, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                for process in context.processes:
                    if process.is_alive():
                        process.kill()
                print(f"gloo_main: {worker} on {world} ranks did not finish within {timeout:g} s; ranks killed",
                      file=sys.stderr)
                return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
