"""Test helpers users can import too: gloo ranks on loopback, a throw-away etcd server, an in-memory store,
a TCP proxy to cut one client off."""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "GlooRunError": "my_utils.distributed.testing.gloo",
    "run_gloo": "my_utils.distributed.testing.gloo",
    "listening_addresses": "my_utils.distributed.testing.gloo",
    "EtcdServer": "my_utils.distributed.testing.etcd_server",
    "InMemoryKeyValueStore": "my_utils.distributed.testing.memory_store",
    "TcpProxy": "my_utils.distributed.testing.tcp_proxy",
    "write_synthetic_run": "my_utils.distributed.testing.synthetic",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.distributed.testing.etcd_server import EtcdServer as EtcdServer
    from my_utils.distributed.testing.gloo import GlooRunError as GlooRunError
    from my_utils.distributed.testing.gloo import listening_addresses as listening_addresses
    from my_utils.distributed.testing.gloo import run_gloo as run_gloo
    from my_utils.distributed.testing.memory_store import InMemoryKeyValueStore as InMemoryKeyValueStore
    from my_utils.distributed.testing.synthetic import write_synthetic_run as write_synthetic_run
    from my_utils.distributed.testing.tcp_proxy import TcpProxy as TcpProxy
