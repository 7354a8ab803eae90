"""The spooled merge of stragglers holds a bounded number of steps, whatever the rank count.

The merge holds one spooled chunk per rank; with chunks of 32 steps, 1,000 ranks held 28 MB in
the main process (bench/bench_scale.py: its peak at 1,000 ranks was 1.78x the peak at 100). The
chunk now shrinks with the rank count (``chunk_steps``), and the report stays the serial one.
"""

from __future__ import annotations

import pickle
import tracemalloc
from pathlib import Path

import pytest

from my_utils.distributed.stragglers import analyze_stragglers
from my_utils.distributed.stragglers import spool as spool_module
from my_utils.distributed.stragglers.spool import (
    CHUNK_BUDGET,
    CHUNK_STEPS,
    chunk_steps,
    read_spooled,
    spool_rank,
)
from my_utils.distributed.testing import write_synthetic_run


def test_chunks_shrink_as_the_ranks_grow() -> None:
    assert chunk_steps(1) == chunk_steps(CHUNK_BUDGET // CHUNK_STEPS) == CHUNK_STEPS
    assert chunk_steps(1000) == 4 and chunk_steps(CHUNK_BUDGET) == chunk_steps(10 * CHUNK_BUDGET) == 1
    assert all(chunk_steps(n) * n <= max(CHUNK_BUDGET, n) for n in range(1, 3 * CHUNK_BUDGET, 97))


@pytest.mark.parametrize("keep_open", [False, True])
def test_a_spool_file_holds_chunks_of_the_given_steps(tmp_path: Path, keep_open: bool) -> None:
    (path,) = [p for p in write_synthetic_run(tmp_path / "run", 3, 10) if p.name == "profile_rank_1.csv"]
    out = tmp_path / "rank_1.spool"
    spool_rank(str(path), str(out), 4)
    chunks = []
    with open(out, "rb") as fh:
        while True:
            try:
                chunks.append(pickle.load(fh))
            except EOFError:
                break
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert [s.step for s in read_spooled(out, keep_open=keep_open)] == list(range(10))


@pytest.mark.parametrize("executor", ["serial-spooled", "process"])
def test_one_step_chunks_give_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              executor: str) -> None:
    write_synthetic_run(tmp_path, 12, 9, slow=(7, "backward", 1.7), clock_offsets={2: (0.003, False)})
    reference = analyze_stragglers(tmp_path).to_dict()
    monkeypatch.setattr(spool_module, "CHUNK_BUDGET", 12)  # one step a chunk for 12 ranks
    if executor == "serial-spooled":  # the spooled path in this process, reopening a file per chunk
        from my_utils.distributed.stragglers import analysis
        from my_utils.distributed.stragglers.open_files import OpenFileBudget

        monkeypatch.setattr(analysis, "open_file_budget", lambda ranks: OpenFileBudget(False, 40, 64, 64))
        assert analyze_stragglers(tmp_path, executor="serial").to_dict() == reference
    else:
        assert analyze_stragglers(tmp_path, executor="process", max_workers=2).to_dict() == reference


@pytest.mark.slow
def test_many_ranks_hold_few_steps(tmp_path: Path) -> None:
    """600 ranks x 40 steps through the process pool: the Python heap of this process stays small.

    Before: 20 MB (a chunk of 32 steps per rank); now 5.6 MB (tracemalloc peak, this machine).
    """
    write_synthetic_run(tmp_path, 600, 40)
    tracemalloc.start()
    try:
        analyze_stragglers(tmp_path, executor="process", max_workers=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20, peak >> 10
