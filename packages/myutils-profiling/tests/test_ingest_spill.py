"""ingest's rank files come back through spill files: the same bytes as inline lines, and nothing left behind."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from my_utils.profiling import MetricsCollector
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.formats import rank_files
from my_utils.profiling.formats.rank_files import SPILL_PREFIX, RankFile, Stamp, read_rank_file

CSV = example_config_path().parent / "data" / "profile_rank_0.csv"
KIND = "my_utils.profiling.formats.mytimer:MyTimerMetricsProvider"
HOW = Stamp("mytimer", "run-1", None)


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$TMPDIR of this process: a fresh folder (where the spill folders are made)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _ranks(folder: Path, count: int, damaged: int | None = None) -> Path:
    folder.mkdir()
    for r in range(count):
        target = folder / f"profile_rank_{r}.csv"
        if r == damaged:
            target.write_text("timestamp_unix,step\nnot a number,0\n")
        else:
            shutil.copy(CSV, target)
    return folder


def test_spilled_lines_are_the_inline_lines_and_the_spill_file_goes_once_copied(tmp_path: Path) -> None:
    inline = read_rank_file(KIND, str(CSV), None, HOW)
    spill = tmp_path / "spill"
    spill.mkdir()
    spilled = read_rank_file(KIND, str(CSV), None, HOW, str(spill))
    assert isinstance(inline, RankFile) and isinstance(spilled, RankFile)
    assert inline.spilled is None and inline.count >= 20 and inline.lines.count(b"\n") == inline.count
    assert spilled.lines == b"" and spilled.spilled is not None and Path(spilled.spilled).parent == spill
    assert (spilled.count, spilled.sources, spilled.rank) == (inline.count, inline.sources, inline.rank)
    out = tmp_path / "events.jsonl"
    with open(out, "ab") as fh:
        fh.write(b"before\n")
        spilled.copy_to(fh)
        inline.copy_to(fh)
    assert out.read_bytes() == b"before\n" + inline.lines * 2
    assert list(spill.iterdir()) == []


def test_a_worker_that_cannot_see_the_spill_folder_sends_the_lines_back(tmp_path: Path, tmpdir_here: Path) -> None:
    # a cluster worker on another machine: the folder made here does not exist there
    unseen = tmp_path / "elsewhere" / "myutils-ingest-1-2-x"
    result = read_rank_file(KIND, str(CSV), None, HOW, str(unseen))
    assert isinstance(result, RankFile) and result.spilled is None
    assert result.lines == read_rank_file(KIND, str(CSV), None, HOW).lines  # type: ignore[union-attr]
    assert not unseen.exists() and list(tmpdir_here.iterdir()) == []


@pytest.mark.parametrize("kernel", ["refused", "stops halfway"])
def test_the_copy_goes_on_through_a_buffer_where_the_kernel_copy_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       kernel: str) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    result = read_rank_file(KIND, str(CSV), None, HOW, str(spill))
    assert isinstance(result, RankFile) and result.spilled is not None
    expected = Path(result.spilled).read_bytes()
    real = getattr(os, "copy_file_range", None)
    calls: list[int] = []

    def copy_file_range(src: int, dst: int, count: int) -> int:
        calls.append(count)
        if kernel == "stops halfway" and len(calls) == 1 and real is not None:
            return int(real(src, dst, min(count, 1000)))
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", copy_file_range, raising=False)
    out = tmp_path / "events.jsonl"
    with open(out, "ab") as fh:
        result.copy_to(fh)
    assert out.read_bytes() == expected and len(expected) > 1000
    assert calls and not Path(result.spilled).exists()


def _collector(tmp_path: Path, inputs: Path, ignore: bool = False) -> MetricsCollector:
    return MetricsCollector.from_config({"providers": [{"provider": "mytimer", "input": str(inputs)}]},
                                        ignore_provider_errors=ignore, output_dir=tmp_path / "out", run_id="run-1")


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_ingest_writes_the_lines_through_a_spill_folder_it_removes(tmp_path: Path, tmpdir_here: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   executor: str) -> None:
    inputs = _ranks(tmp_path / "csv", 5)
    copied: list[str | None] = []
    copy_to = RankFile.copy_to
    monkeypatch.setattr(RankFile, "copy_to", lambda self, out: (copied.append(self.spilled), copy_to(self, out))[1])
    target = tmp_path / "events.jsonl"
    count, sources = _collector(tmp_path, inputs).stream_to(target, executor=executor, max_workers=2)
    one = read_rank_file(KIND, str(CSV), None, HOW).count  # type: ignore[union-attr]
    assert (count, sources) == (5 * one, ["mytimer"])
    assert target.read_bytes().count(b"\n") == count
    if executor == "serial":  # copied in this process, where the spy sees it: every file went through the folder
        assert len(copied) == 5 and all(c is not None and Path(c).parent.name.startswith(SPILL_PREFIX)
                                        and Path(c).parent.parent == tmpdir_here for c in copied)
    assert list(tmpdir_here.iterdir()) == []
    serial = tmp_path / "serial.jsonl"
    _collector(tmp_path, inputs).stream_to(serial, executor="serial")
    assert target.read_bytes() == serial.read_bytes()


def test_a_skipped_providers_later_spill_files_are_removed_at_once(tmp_path: Path, tmpdir_here: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = _ranks(tmp_path / "csv", 4, damaged=1)
    discarded: list[tuple[str | None, bool]] = []
    discard = RankFile.discard

    def spy(self: RankFile) -> None:
        discard(self)
        discarded.append((self.spilled, self.spilled is not None and os.path.exists(self.spilled)))

    monkeypatch.setattr(RankFile, "discard", spy)
    collector = _collector(tmp_path, inputs, ignore=True)
    target = tmp_path / "events.jsonl"
    assert collector.stream_to(target, executor="serial") == (0, [])
    assert target.read_bytes() == b""  # the first file's lines were cut off again with its provider
    assert len(discarded) == 2 and all(path is not None and not left for path, left in discarded)
    assert [f.provider for f in collector.failures] == ["mytimer"]
    assert list(tmpdir_here.iterdir()) == []


def test_a_read_stopped_early_removes_its_spill_folder(tmp_path: Path, tmpdir_here: Path) -> None:
    inputs = _ranks(tmp_path / "csv", 3)
    calls = [(KIND, str(f), None, HOW) for f in sorted(inputs.iterdir())]
    results = rank_files.read_rank_files(calls, "serial", None, False)
    first = next(results)
    assert isinstance(first, RankFile) and first.spilled is not None and os.path.exists(first.spilled)
    assert [p.name.startswith(SPILL_PREFIX) for p in tmpdir_here.iterdir()] == [True]
    results.close()
    assert list(tmpdir_here.iterdir()) == []
