"""``create_profiler_context``: the seed's task-type-aware torch profiler (legacy path ``my_utils.DITProfiler``).

Only task types listed in ``PROFILE_TASK_TYPES`` (comma-separated, e.g. ``DIT,VAE``) are
profiled; any other gets a ``nullcontext`` (nothing is imported or started). On exit a
profiled block writes, under ``<base_output_dir>/<task_type>/``:

- ``torch_prof_rank<rank>.json``: the Chrome trace (not for ``VAE``: its tiled decoders make
  traces of gigabytes, the seed's reason);
- ``prof_summary_rank<rank>.txt``: the operator table;
- ``<op>_rank<rank>_analysis.json`` per event name matched by a regex key of
  ``ops_to_analyze``: ``{name: {metric, count, total_us, mean_us, median_us, std_us, min_us,
  max_us}}``. ``<op>`` is the name made safe (``../../x`` stays inside the folder).

Without CUDA, CUDA metrics are read as their CPU counterparts: ``metric`` names the one
used, ``requested_metric`` the one asked for and ``time_basis`` says why. Environment
problems (no disk space, a profiler that fails to start) are logged and never raised into
the block; a bad ``ops_to_analyze`` raises ConfigError before anything runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.dist_env import env_rank
from my_utils.legacy.op_stats import compile_ops, group_matches, unique_stems
from my_utils.legacy.torch_session import cuda_available, export_trace, profiler_activities, time_basis

__all__ = ["DEFAULT_BASE_OUTPUT_DIR", "ENV_TASK_TYPES", "NO_TRACE_TASK_TYPES", "create_profiler_context",
           "profile_task_types"]

ENV_TASK_TYPES = "PROFILE_TASK_TYPES"
DEFAULT_BASE_OUTPUT_DIR = "profiler_output"
NO_TRACE_TASK_TYPES = frozenset({"VAE"})
_log = logging.getLogger("my_utils.legacy")


def profile_task_types() -> frozenset[str]:
    """The task types named in ``PROFILE_TASK_TYPES`` (read on every call, spaces ignored)."""
    return frozenset(t.strip() for t in os.environ.get(ENV_TASK_TYPES, "").split(",") if t.strip())


def create_profiler_context(current_task_type: str, logger: Any = None,
                            ops_to_analyze: Mapping[str, str] | None = None, *,
                            base_output_dir: str | Path = DEFAULT_BASE_OUTPUT_DIR,
                            rank: int | None = None) -> contextlib.AbstractContextManager[Any]:
    """A context that profiles its block when ``current_task_type`` is in ``PROFILE_TASK_TYPES``.

    Returns ``contextlib.nullcontext()`` for other task types (zero overhead). ``logger`` is
    any ``logging.Logger``-like object (the seed passes ``get_global_logger()``).
    """
    ops = compile_ops(ops_to_analyze)  # misuse is reported even for task types not profiled today
    if current_task_type not in profile_task_types():
        return contextlib.nullcontext()
    folder = Path(base_output_dir) / _safe_task_folder(current_task_type)
    return _profiled(current_task_type, folder, env_rank(0) if rank is None else rank, ops, logger or _log)


def _safe_task_folder(task: str) -> str:
    from my_utils.legacy.op_stats import safe_file_stem

    return safe_file_stem(task)


@contextlib.contextmanager
def _profiled(task: str, folder: Path, rank: int, ops: Any, logger: Any) -> Iterator[Any]:
    use_cuda = cuda_available()
    prof: Any = None
    try:
        from torch.profiler import profile

        prof = profile(activities=profiler_activities(use_cuda), record_shapes=True)
        prof.__enter__()
    except Exception as exc:  # the block still runs, unprofiled
        logger.warning("create_profiler_context(%r): torch.profiler could not start (%s); block runs unprofiled",
                       task, exc)
        prof = None
    try:
        yield prof
    finally:
        if prof is not None:
            if use_cuda:
                _synchronize(logger)
            try:
                prof.__exit__(None, None, None)
                _write_outputs(prof, task, folder, rank, ops, use_cuda, logger)
            except Exception as exc:  # a full disk must not replace the block's own outcome
                logger.warning("create_profiler_context(%r): outputs under %s not written (%s)", task, folder, exc)


def _synchronize(logger: Any) -> None:
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as exc:
        logger.warning("create_profiler_context: torch.cuda.synchronize failed (%s)", exc)


def _write_outputs(prof: Any, task: str, folder: Path, rank: int, ops: Any, use_cuda: bool, logger: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if task not in NO_TRACE_TASK_TYPES:
        export_trace(prof, folder / f"torch_prof_rank{rank}.json")
    sort_by = "self_device_time_total" if use_cuda else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=50)
    with atomic_write(folder / f"prof_summary_rank{rank}.txt") as fh:
        fh.write(f"task {task}, rank {rank}: {time_basis(use_cuda)}\n{table}\n")
    # device time exists only where CUDA was profiled
    events = [(evt.name, evt) for evt in prof.events()]
    stats = group_matches(events, ops, has_device_time=use_cuda)
    stems = unique_stems(stats)
    for name, op in stats.items():
        entry = op.to_json()
        if not use_cuda:
            requested = next(metric for pattern, metric in ops if pattern.search(name))
            if requested != op.metric:
                entry["requested_metric"] = requested
            entry["time_basis"] = time_basis(False)
        with atomic_write(folder / f"{stems[name]}_rank{rank}_analysis.json") as fh:
            json.dump({name: entry}, fh, indent=2)
    logger.info("create_profiler_context(%r): %d analysed op name(s) written to %s", task, len(stats), folder)
