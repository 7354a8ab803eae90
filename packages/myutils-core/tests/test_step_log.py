"""The step log: packed records render to exactly today's CSV rows, once, whatever was killed when."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import HEADER_LINE, format_profile_line, read_profile_csv
from my_utils.core.step_log import (
    StepLogRenderer,
    encode_text,
    encode_timer_step,
    pack_names,
    steplog_path,
    sync_profile_csv,
    timer_head,
)
from my_utils.core.step_log_writer import StepLogWriter
from my_utils.core.timer import MyTimer
from my_utils.core.timer_rows import format_step_rows

BASE_NS = 1_764_000_000_123_456_789
MID = "host,1_rank0"


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


def step_of(names: list[Any], depths: list[int]) -> tuple[list[Any], list[list[Any]]]:
    """The events a timer records for regions opened in this order at these depths, and the regions."""
    events: list[Any] = []
    regions: list[list[Any]] = []
    open_regions: list[list[Any]] = []
    t = 5_000_000

    def close_to(depth: int) -> None:
        nonlocal t
        while len(open_regions) > depth:
            t += 1_234_567
            open_regions.pop()[3] = t
            events.extend(("", ~t))

    for name, depth in zip(names, depths, strict=True):
        close_to(depth)
        t += 10_001
        region = [name, depth, t, 0]
        open_regions.append(region)
        regions.append(region)
        events.extend((name, t))
    close_to(0)
    return events, regions


def record(names: list[Any], depths: list[int], step: int = 1, cuda: list[float | None] | None = None,
           tag: str = "") -> bytes:
    events, _ = step_of(names, depths)
    return encode_timer_step(events, pack_names(events[0::2]), cuda, step, BASE_NS, timer_head(tag, MID))


CASES = {
    "plain": (["iter", "forward", "backward", "allreduce"], [0, 1, 1, 2], None),
    "quoted": (['layer,0 "attn"\nqkv', "é→ü", "x;y=%z"], [0, 1, 0], None),
    "nul in a name": (["a\0b", "c"], [0, 1], None),
    "cuda": (["iter", "matmul"], [0, 1], [2.5, None]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rendered_rows_equal_the_rows_formatted_on_the_thread(tmp_path: Path, case: str) -> None:
    names, depths, cuda = CASES[case]
    _, regions = step_of(names, depths)
    csv = tmp_path / "profile_rank_0.csv"
    writer = StepLogWriter(csv, mode="inline")
    assert writer.open()
    writer.append(record(names, depths, 42, cuda, 't,"ag"'))
    writer.close()
    expected = format_step_rows(regions, cuda, 42, BASE_NS, MID, 't,"ag"', {})
    assert csv.read_text(encoding="utf-8") == HEADER_LINE + expected
    assert len(read_profile_csv(csv)) == 2 * len(names)
    assert not steplog_path(csv).exists()  # removed at close: the CSV is complete


def test_text_records_keep_their_place_between_steps(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    writer = StepLogWriter(csv, mode="thread")
    writer.open()
    for step in range(50):
        writer.append(record(["s"], [0], step, tag="t"))
        writer.append_text(format_profile_line(BASE_NS, MID, step, "explicit", "MARK", 0.0, ""))
    writer.close()
    rows = read_profile_csv(csv)
    assert [(r.step, r.event_name, r.event_type) for r in rows] == [
        (s, name, kind) for s in range(50) for name, kind in (("s", "START"), ("s", "END"), ("explicit", "MARK"))]


def test_a_torn_record_waits_and_a_killed_render_is_redone_once(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    writer = StepLogWriter(csv, mode="inline")
    writer.open()
    log = steplog_path(csv)
    data = record(["a", "b"], [0, 1])
    with open(log, "ab") as fh:  # a record cut by a kill in the middle of its write
        fh.write(data[:30])
    renderer = StepLogRenderer(log, csv)
    assert renderer.render() == 0 and read_profile_csv(csv) == []
    with open(log, "ab") as fh:
        fh.write(data[30:])
    assert renderer.render() == len(data)
    assert len(read_profile_csv(csv)) == 4
    # a renderer killed after its CSV write but before storing its state: those rows are extra bytes
    with open(csv, "ab") as fh:
        fh.write(b"1764000000.1,2025-11-24 16:00:00.100,m,1,half a ro")
    with open(log, "ab") as fh:
        fh.write(data)
    renderer.render()
    renderer.close()
    assert [r.step for r in read_profile_csv(csv)] == [1] * 8  # cut, then the new record once
    writer.close()


def test_a_corrupt_record_is_reported_once_and_skipped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    csv = tmp_path / "p.csv"
    writer = StepLogWriter(csv, mode="inline")
    writer.open()
    good = record(["a"], [0])
    writer.append(good)
    events = ["a", 100, "", ~200, "", ~300]  # the third event stops a region that is not open
    bad = encode_timer_step(events, pack_names(events[0::2]), None, 2, BASE_NS, timer_head("", MID))
    with caplog.at_level(logging.ERROR):
        writer.append(bad)
        writer.append(good)
    assert caplog.text.count("expected a well-formed step record (event 2 stops a region but none is open)") == 1
    assert "p.steplog:byte " in caplog.text
    assert [r.step for r in read_profile_csv(csv)] == [1, 1, 1, 1]  # the records around it are kept
    # a write cut short by a full disk, with later steps behind it: only that step is lost
    with caplog.at_level(logging.ERROR):
        writer.append(record(["torn"], [0], 3)[:40])
        writer.append(record(["after"], [0], 4))
        writer.append(b"\xff" * 40)  # garbage with no record after it yet ...
        writer.append(record(["later"], [0], 5))  # ... until the next record
    assert caplog.text.count("unreadable bytes; they are skipped") == 1
    assert [r.step for r in read_profile_csv(csv)] == [1, 1, 1, 1, 4, 4, 5, 5]
    writer.close()
    assert not steplog_path(csv).exists()


def test_a_closed_descriptor_is_reported_once_and_writing_resumes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = tmp_path / "p.csv"
    writer = StepLogWriter(csv, mode="inline")
    writer.open()
    data = record(["a"], [0])
    assert writer._fd is not None
    os.close(writer._fd)  # an environment problem under our feet: EBADF on the next write
    with caplog.at_level(logging.WARNING):
        writer.append(data)  # never raises
        writer.append(data)
        assert writer.dropped == 2
        monkeypatch.setattr("my_utils.core.step_log_writer.time.monotonic", lambda: 1e12)  # retry now
        writer.append(data)
    assert caplog.text.count("cannot write profile rows to") == 1
    assert "works again" in caplog.text
    writer.close()
    assert len(read_profile_csv(csv)) == 2


def test_readers_sync_and_a_folder_without_log_is_left_alone(tmp_path: Path) -> None:
    assert sync_profile_csv(tmp_path / "profile_rank_0.csv") is False
    GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    timer = MyTimer()
    timer.start("a")
    timer.stop("a")
    timer.step()
    sync_profile_csv(tmp_path / "profile_rank_0.csv")
    assert len(read_profile_csv(tmp_path / "profile_rank_0.csv")) == 2


@pytest.mark.parametrize("mode", ["process", "thread", "inline", "direct"])
def test_every_mode_writes_the_same_rows(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYUTILS_PROFILE_CSV", mode)
    mgr = GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    assert mgr.profile_sink is not None and mgr.profile_sink.mode == mode
    timer = MyTimer(tag="m")
    for step in range(30):
        timer.set_step(step)
        timer.start("iter")
        timer.start("fwd")
        timer.stop("fwd")
        timer.stop("iter")
        timer.step()
        mgr.log_profile_event(step, "mark", "MARK", 1.0, {"mode": mode})
    GlobalLogger._reset_for_tests()  # close: the CSV is complete, the log is gone
    rows = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert [(r.step, r.event_name, r.event_type) for r in rows] == [
        (s, n, t) for s in range(30)
        for n, t in (("iter", "START"), ("fwd", "START"), ("fwd", "END"), ("iter", "END"), ("mark", "MARK"))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile_rank_0.csv", "rank_0.log"]


def test_encode_text_is_one_record(tmp_path: Path) -> None:
    data = encode_text("a,b\n")
    assert len(data) == 28 + 4 and data.endswith(b"a,b\n")


def test_a_full_disk_is_reported_once_and_the_loop_goes_on(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes writes past 64 KiB fail with EFBIG, like a full disk, in a real process
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))\n"
        "from my_utils.core.logger import GlobalLogger\n"
        "from my_utils.core.timer import MyTimer\n"
        f"mgr = GlobalLogger().setup({str(tmp_path)!r}, rank=0, world_size=1)\n"
        "timer = MyTimer(tag='disk')\n"
        "for step in range(3000):\n"
        "    timer.set_step(step); timer.start('iter'); timer.start('fwd'); timer.stop('fwd'); timer.stop('iter')\n"
        "    timer.step()\n"
        "    mgr.log_profile_event(step, 'mark', 'MARK', 0.0, '')\n"
        "print('loop done', mgr.profile_sink.dropped > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["loop", "done", "True"]
    assert out.stderr.count("cannot write profile rows to") == 1
    assert "Traceback" not in out.stderr
    rows = read_profile_csv(tmp_path / "profile_rank_0.csv")  # what fitted is whole and in order
    assert rows and [r.step for r in rows] == sorted(r.step for r in rows)


def test_a_filesystem_without_locks_falls_back_to_direct_rows(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    import my_utils.core.step_log_writer as writer_module

    def no_locks(fd: int, how: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(writer_module.fcntl, "flock", no_locks)  # what an NFS mount without lockd answers
    mgr = GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    assert mgr.profile_sink is not None and mgr.profile_sink.mode == "direct"
    timer = MyTimer()
    timer.start("a")
    timer.stop("a")
    timer.step()
    assert len(read_profile_csv(tmp_path / "profile_rank_0.csv")) == 2  # written in step(), no flush needed


@pytest.mark.parametrize("python", ["/nonexistent/python3", "/bin/false"])
def test_a_helper_that_cannot_run_hands_over_to_a_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture, python: str) -> None:
    monkeypatch.setattr("my_utils.core.step_log_writer.sys.executable", python)
    writer = StepLogWriter(tmp_path / "p.csv", mode="process")
    writer.open()
    with caplog.at_level(logging.WARNING):
        for step in range(600):  # past a liveness check of the helper
            writer.append(record(["a"], [0], step))
            if step == 0 and python == "/bin/false":
                assert writer._helper is not None
                writer._helper.wait(timeout=30)  # it exits at once: the next check must notice
    assert writer.mode == "thread"
    assert "rendering on" in caplog.text and "thread" in caplog.text
    writer.close()
    assert len(read_profile_csv(tmp_path / "p.csv")) == 1200
