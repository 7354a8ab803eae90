"""Dask preload for the workers of a real cluster: ``distributed.worker.preload: [my_utils.profiling.dask_worker]``.

The workers our commands start themselves (a local cluster, :mod:`my_utils.core.dask_local`) freeze, once
they run, the ~65,000 objects ``distributed``'s imports leave behind: otherwise every full
collection walks them again while a task parses (+0.09 s of gc per 54 MB trace, measured there).
A worker started with ``dask worker`` gets the same from this module, named as a preload in the
Dask config the profiling README's cluster recipe gives (or ``dask worker --preload
my_utils.profiling.dask_worker``). It also drops the worker's own "Compute Failed" report of a
task's error, which the command already gets as itself (one line).
"""

from __future__ import annotations

import gc
from typing import Any

from my_utils.core.dask_local import no_task_failures

__all__ = ["dask_setup", "no_task_failures"]


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run once in each worker after it started: freeze what its imports left."""
    import logging  # here: importing this module stays as light as the filter's

    del worker  # the hook's signature; nothing of the worker is needed
    gc.freeze()
    logging.getLogger("distributed.worker").addFilter(no_task_failures)
