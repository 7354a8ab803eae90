"""The local Dask cluster every ``--executor dask`` command starts (``my_utils.core.dask_local``), driven directly.

The commands' own tests (myutils-profiling's ``test_dask``, myutils-distributed's ``test_stragglers_dask``)
check what their users see; these check the cluster's promises: plain worker processes forked from the
fork server, on 127.0.0.1, gone with the block; its space made and removed (or left, when it is the
caller's); every worker gone is said, not waited for; and ``frozen_gc`` undoes itself.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.dask_local import LocalDask, frozen_gc, local_cluster
from my_utils.core.errors import UsageError


def test_frozen_gc_freezes_for_the_block_and_undoes_it() -> None:
    before = gc.get_freeze_count()
    if before:
        pytest.skip(f"this process froze {before} objects itself: frozen_gc leaves such a process alone")
    kept = [object() for _ in range(1000)]
    with frozen_gc():
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0


def test_frozen_gc_leaves_a_process_that_froze_objects_itself_alone() -> None:
    code = ("import gc\nfrom my_utils.core.dask_local import frozen_gc\n"
            "gc.freeze(); own = gc.get_freeze_count(); junk = [[] for _ in range(5000)]\n"
            "with frozen_gc():\n    inside = gc.get_freeze_count()\n"
            "print(own > 0, inside == own, gc.get_freeze_count() == own)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "True"]


def test_importing_it_imports_no_dask() -> None:
    code = ("import sys\nimport my_utils.core.dask_local\n"
            "print(sorted(m for m in ('dask', 'distributed', 'tornado') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr


def _ask(local: LocalDask, func: object, *args: object) -> object:
    future = local.client.submit(func, *args, pure=False)
    try:
        return local.result(future)
    finally:
        future.release()


@pytest.mark.slow
def test_workers_are_plain_forked_processes_gone_with_the_block(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "space"  # the caller's: made when missing, left in place
    with local_cluster(2, ["json"], space) as local:
        assert local.workers == 2
        pids = {p.pid for p in local.procs}
        assert os.getpid() not in pids and len(pids) == 2
        # each task ran in one of our processes (no nanny between), whose parent is the fork server
        ran = {_ask(local, os.getpid) for _ in range(6)}
        assert ran <= pids
        info = local.client.scheduler_info()["workers"]  # the workers have joined by now: loopback only
        assert info and all(address.startswith("tcp://127.0.0.1:") for address in info)
        if "forkserver" in multiprocessing.get_all_start_methods():  # not this process's children: the server's
            assert _ask(local, os.getppid) not in (os.getpid(), *pids)
        assert space.is_dir()
    assert all(not p.is_alive() for p in local.procs)
    assert space.is_dir()
    assert list(tmp_path.iterdir()) == [space]  # nothing else written into the cwd


@pytest.mark.slow
def test_its_own_space_goes_with_the_block(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    with local_cluster(1) as local:
        made = [p for p in tmp_path.iterdir() if p.name.startswith("myutils-dask-")]
        assert len(made) == 1 and _ask(local, os.path.isdir, str(made[0])) is True
    assert not made[0].exists()


@pytest.mark.slow
def test_every_worker_gone_is_said_not_waited_for() -> None:
    pytest.importorskip("distributed")
    with local_cluster(2) as local, pytest.raises(UsageError, match=r"local Dask workers exited \(exit codes \[3\]\)"):
        _ask(local, os._exit, 3)  # Dask gives the task to the other worker when the first dies: both exit


@pytest.mark.slow
@pytest.mark.parametrize(("cores", "tasks", "want"), [(4, 1, 1), (4, 3, 3), (2, 5, 2), (None, 3, 1), (4, 0, 1)])
def test_the_default_worker_count_follows_the_tasks_up_to_the_cores(monkeypatch: pytest.MonkeyPatch,
                                                                   cores: int | None, tasks: int, want: int) -> None:
    """``workers=None``: one worker per task, no more than the cores (an unknown count is 1), at least one."""
    pytest.importorskip("distributed")
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    with local_cluster(None, tasks=tasks) as local:
        assert local.workers == want == len(local.procs)
        local.client.wait_for_workers(want, timeout=120)  # each of them joins the scheduler
        assert len(local.client.scheduler_info()["workers"]) == want
        assert {_ask(local, os.getpid) for _ in range(2 * want)} <= {p.pid for p in local.procs}
