"""Scratch folders named by their owner process: a later run removes those of killed runs, never a live one's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.scratch import make_scratch, owner_alive, owner_token, sweep_scratch


def _dead_token() -> str:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return f"{int(done.stdout)}-1"


def test_only_the_folders_of_dead_owners_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = _dead_token()
    assert not owner_alive(dead) and owner_alive(owner_token())
    killed = [tmp_path / f"myutils-trace-{dead}-abc", tmp_path / f"myutils-dask-{dead}-x_y"]
    kept = [tmp_path / f"myutils-trace-{owner_token()}-live",  # a run still going
            tmp_path / f"myutils-trace-{dead}",  # not our naming (no random tail)
            tmp_path / "myutils-trace-abc",  # an older version's folder: no owner to judge by
            tmp_path / f"pymp-{dead}-abc"]
    for folder in killed + kept:
        folder.mkdir()
        (folder / "unit_0.tsv").write_text("spill")
    (tmp_path / f"myutils-trace-{dead}-file").write_text("a file, not a folder")
    made = make_scratch("myutils-trace-")
    assert made.parent == tmp_path and made.name.startswith(f"myutils-trace-{owner_token()}-")
    assert not any(f.exists() for f in killed) and all(f.exists() for f in kept)
    assert (tmp_path / f"myutils-trace-{dead}-file").exists()
    assert sweep_scratch(tmp_path) == []


@pytest.mark.parametrize("prefix", ["trace-", "myutils-trace", "myutils-Trace-", "myutils-../-"])
def test_a_prefix_outside_the_naming_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="expected 'myutils-<lowercase role>-'"):
        make_scratch(prefix)
