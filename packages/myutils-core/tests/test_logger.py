"""GlobalLogger: singleton, idempotent setup, files per rank, env defaults, real CSV rows, offsets."""

from __future__ import annotations

import csv
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError, UsageError
from my_utils.core.logger import GlobalLogger, get_global_logger
from my_utils.core.profile_csv import HEADER_LINE, read_profile_csv
from my_utils.core.timer import MyTimer


@pytest.fixture(autouse=True)
def fresh_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


def test_singleton_and_module_function() -> None:
    assert GlobalLogger() is GlobalLogger()
    assert get_global_logger() is GlobalLogger().get_logger()
    assert isinstance(get_global_logger(), logging.Logger)


def test_get_logger_before_setup_does_not_swallow_setup(tmp_path: Path) -> None:
    early = get_global_logger()
    early_mgr = GlobalLogger().get_logger()
    GlobalLogger().setup(tmp_path, rank=0, world_size=1, extra_log_label="Trainer")
    early.info("written after setup through the early logger")
    assert early is early_mgr is GlobalLogger().get_logger()
    assert "written after setup through the early logger" in (tmp_path / "rank_0.log").read_text()
    assert (tmp_path / "profile_rank_0.csv").read_text() == HEADER_LINE  # created by setup itself


def test_setup_is_idempotent(tmp_path: Path) -> None:
    mgr = GlobalLogger()
    mgr.setup(tmp_path / "a", rank=1, world_size=4)
    mgr.setup(tmp_path / "b", rank=2, world_size=4)
    assert mgr.log_dir == tmp_path / "a" and mgr.rank == 1
    assert not (tmp_path / "b").exists()
    assert "GlobalLogger is already set up" in (tmp_path / "a" / "rank_1.log").read_text()
    assert len(logging.getLogger("my_utils").handlers) == 2  # console + file, not doubled


def test_prefix_shows_label_rank_and_megatron_parallel_info(tmp_path: Path) -> None:
    mgr = GlobalLogger()
    mgr.setup(log_dir=tmp_path, rank=3, world_size=4, extra_log_label="Worker", data_parallel_rank=1,
              data_parallel_world_size=2, tensor_model_parallel_rank=1, tensor_model_parallel_world_size=2,
              pipeline_stage="last")
    mgr.get_logger().warning("Learning rate adjusted")
    line = (tmp_path / "rank_3.log").read_text().strip()
    assert "[Worker rank 3/4 dp=1/2 tp=1/2 pipeline_stage=last] WARNING my_utils: Learning rate adjusted" in line


def test_rank_and_world_size_come_from_torchrun_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    mgr = GlobalLogger().setup(tmp_path)
    assert (mgr.rank, mgr.world_size, mgr.local_rank) == (5, 8, 1)
    assert (tmp_path / "rank_5.log").exists() and (tmp_path / "profile_rank_5.csv").exists()
    assert mgr.machine_id.endswith("_rank5")


def test_explicit_rank_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert GlobalLogger().setup(tmp_path, rank=0, world_size=1).rank == 0


@pytest.mark.parametrize(("env", "message"), [
    ({"RANK": "two"}, "environment:variable RANK: expected a non-negative integer, got 'two'"),
    ({"RANK": "3", "WORLD_SIZE": "2"}, "rank=3 is not below world_size=2"),
])
def test_bad_rank_configuration_raises_at_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                env: dict[str, str], message: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises((ConfigError, UsageError)) as info:
        GlobalLogger().setup(tmp_path)
    assert message in str(info.value)
    assert not GlobalLogger().is_configured


def test_log_profile_event_is_in_the_os_when_it_returns(tmp_path: Path) -> None:
    mgr = GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    before = time.time()
    mgr.log_profile_event(step=10, event_name="forward_pass", event_type="START", duration_ms=0.0,
                          metadata="layer=transformer_0")
    # another process renders it from the step log: no buffer of ours is involved
    path = str(tmp_path / "profile_rank_0.csv")
    code = ("from my_utils.core.step_log import sync_profile_csv\n"
            f"sync_profile_csv({path!r})\n"
            f"print(open({path!r}).read().splitlines()[-1])")
    last = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ",10,forward_pass,START,0.0,layer=transformer_0" in last
    (row,) = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert before - 1 <= row.timestamp_unix <= time.time() + 1
    assert row.machine_id == mgr.machine_id


def test_rows_are_real_csv(tmp_path: Path) -> None:
    mgr = GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    mgr.log_profile_event(1, 'load "shard", part 2\nretry', "MARK", 1.25, {"file": "a,b.pt", "note": "x;y"})
    mgr.flush()
    with open(tmp_path / "profile_rank_0.csv", newline="", encoding="utf-8") as fh:
        (record,) = list(csv.DictReader(fh))
    assert record["event_name"] == 'load "shard", part 2\nretry'
    assert record["event_type"] == "MARK" and float(record["duration_ms"]) == 1.25
    (row,) = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert row.metadata_dict() == {"file": "a,b.pt", "note": "x;y"}


def test_time_offset_is_added_to_later_timestamps(tmp_path: Path) -> None:
    mgr = GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    mgr.log_profile_event(0, "a", "MARK", 0.0, "", timestamp=1000.0)
    mgr.set_time_offset(0.002345)
    mgr.log_profile_event(0, "b", "MARK", 0.0, "", timestamp=1000.0)
    mgr.log_profile_event(0, "c", "MARK", 0.0, "")
    mgr.flush()
    a, b, c = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert a.timestamp_unix == 1000.0
    assert b.timestamp_unix == pytest.approx(1000.002345, abs=1e-6)
    assert c.timestamp_unix == pytest.approx(time.time() + 0.002345, abs=1.0)
    assert mgr.time_offset == pytest.approx(0.002345)
    with pytest.raises(UsageError, match="expected a finite number of seconds"):
        mgr.set_time_offset(float("nan"))


def test_rows_before_setup_are_dropped_and_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    mgr = GlobalLogger()
    with caplog.at_level(logging.WARNING):
        mgr.log_profile_event(0, "a", "START", 0.0, "")
        mgr.log_profile_event(0, "a", "END", 0.0, "")
    assert caplog.text.count("profile rows arrived before setup()") == 1


def test_threads_with_their_own_timers_never_interleave_steps(tmp_path: Path) -> None:
    GlobalLogger().setup(tmp_path, rank=0, world_size=1)

    def work(tid: int) -> None:
        timer = MyTimer(tag=f"thread{tid}")
        for step in range(100):
            timer.set_step(step)
            for region in range(5):
                timer.start(f"r{region}")
                timer.stop(f"r{region}")
            timer.step()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    GlobalLogger().flush()
    rows = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert len(rows) == 4 * 100 * 10
    for i in range(0, len(rows), 10):  # each step of each thread is one contiguous block
        block = rows[i:i + 10]
        assert len({(r.metadata_dict()["tag"], r.step) for r in block}) == 1


def test_eight_ranks_sharing_a_log_dir_get_their_own_files(tmp_path: Path) -> None:
    code = (
        "from my_utils.logger import GlobalLogger\n"
        "from my_utils.utils import MyTimer\n"
        "mgr = GlobalLogger()\n"
        f"mgr.setup({str(tmp_path)!r})\n"
        "mgr.get_logger().info('hello from %d', mgr.rank)\n"
        "t = MyTimer(tag='r')\n"
        "for s in range(20):\n"
        "    t.set_step(s); t.start('iter'); t.stop('iter'); t.step()\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE,
                         env={**os.environ, "RANK": str(r), "WORLD_SIZE": "8", "LOCAL_RANK": str(r)})
        for r in range(8)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    for rank in range(8):
        rows = read_profile_csv(tmp_path / f"profile_rank_{rank}.csv")
        assert len(rows) == 40 and {r.machine_id for r in rows} == {rows[0].machine_id}
        assert rows[0].machine_id.endswith(f"_rank{rank}")
        assert f"hello from {rank}" in (tmp_path / f"rank_{rank}.log").read_text()
    assert len(list(tmp_path.iterdir())) == 16


def test_unwritable_log_dir_degrades_to_console(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    mgr = GlobalLogger().setup(blocker / "logs", rank=0, world_size=1)
    mgr.log_profile_event(0, "a", "START", 0.0, "")  # must not raise
    mgr.get_logger().info("still logging")
    err = capfd.readouterr().err
    assert "logging to the console only" in err and "still logging" in err
    assert "cannot write profile rows" in err


def test_runtime_modules_stay_light() -> None:
    code = ("import sys, my_utils.core, my_utils.utils, my_utils.logger, my_utils.core.trace, my_utils.core.debug, "
            "my_utils.core.profile_csv, my_utils.core.testing.trace_check\n"
            "from my_utils.core import MyTimer, GlobalLogger, csv_to_trace, ChecksumUtils\n"
            "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("mode", ["process", "thread", "inline"])
def test_close_then_exit_is_silent_and_the_csv_complete(tmp_path: Path, mode: str) -> None:
    """``close()`` then the atexit hook: the second close found the log gone and warned that "the
    steps stay in the log" although the CSV held every step (issue 33)."""
    code = (
        "from my_utils.core import GlobalLogger, MyTimer\n"
        "mgr = GlobalLogger()\n"
        f"mgr.setup({str(tmp_path)!r}, rank=0, world_size=1)\n"
        "t = MyTimer(tag='c')\n"
        "t.set_logger(mgr)\n"
        "for s in range(30):\n"
        "    t.set_step(s)\n"
        "    with t.region('iter'):\n"
        "        pass\n"
        "    t.step()\n"
        "mgr.close()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MYUTILS_PROFILE_CSV": mode})
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    rows = read_profile_csv(tmp_path / "profile_rank_0.csv")
    assert [(r.step, r.event_type) for r in rows] == [(s, k) for s in range(30) for k in ("START", "END")]
    assert not (tmp_path / "profile_rank_0.steplog").exists()
