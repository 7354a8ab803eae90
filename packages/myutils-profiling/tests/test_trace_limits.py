"""``trace`` within the machine's limits: more ranks than open files allowed, a full or small scratch space.

Each case runs the real command in a child process with the limit lowered (``resource.setrlimit``)
or with ``$TMPDIR`` (or the output folder) on a small tmpfs: the merge holds a bounded number of
files open, and what cannot work is refused before the parallel work, or named (the file and the
fix) when the disk fills; the scratch folder goes in every case.
"""

from __future__ import annotations

import gzip
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events

CLI = [sys.executable, "-c", "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; "
       "main()"]
TRACE = "kineto/hta/trace_filter__sampled_rank-0.json.gz"  # 1.76 MB of JSON: spill files of ~1.5 MB


def _ranks(path: Path, ranks: int) -> Path:
    events = [MetricEvent(name="iter", value=0.5, kind="duration", unit="ms", source="mytimer", rank=r, step=s,
                          ts=1.7e9 + s * 0.001 + r * 1e-6, attrs={"depth": 0}) for r in range(ranks) for s in range(3)]
    out = path / "metrics_events.jsonl"
    write_events(out, events)
    return out


def _limit(kind: int, value: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(kind, (value, value))
    return apply


def _trace(args: list[str], tmpdir: Path, limit: Callable[[], None] | None = None,
           executor: str = "serial") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.run([*CLI, "trace", *args, "-q", "--executor", executor, "--workers", "2"],
                          capture_output=True, text=True, timeout=600, env=env, preexec_fn=limit)


@pytest.mark.parametrize("nofile", [64, 40])
def test_more_ranks_than_open_files_allowed_merge_to_the_same_trace(tmp_path: Path, nofile: int) -> None:
    events = _ranks(tmp_path, 300)  # 300 spill files; 40 open files: merged in two levels
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    free = _trace(["--events", str(events), "--output", str(tmp_path / "free.json")], tmpdir)
    assert free.returncode == 0, free.stderr
    limited = _trace(["--events", str(events), "--output", str(tmp_path / "limited.json")], tmpdir,
                     _limit(resource.RLIMIT_NOFILE, nofile))
    assert limited.returncode == 0, limited.stderr
    assert (tmp_path / "limited.json").read_bytes() == (tmp_path / "free.json").read_bytes()
    assert list(tmpdir.iterdir()) == []


def test_an_open_file_limit_too_low_is_refused_before_the_work(tmp_path: Path) -> None:
    events = _ranks(tmp_path, 50)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    res = _trace(["--events", str(events), "--output", str(tmp_path / "t.json")], tmpdir,
                 _limit(resource.RLIMIT_NOFILE, 26))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "the open-file limit (26, hard limit 26)" in lines[0] and "ulimit -n" in lines[0]
    assert not (tmp_path / "t.json").exists() and list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_a_scratch_file_over_the_size_limit_is_named_and_the_scratch_goes(real_fixtures: Any, tmp_path: Path,
                                                                          executor: str) -> None:
    events = _ranks(tmp_path, 2)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "out" / "t.json"
    res = _trace(["--events", str(events), "--torch-trace", str(real_fixtures / TRACE), "--output", str(out)],
                 tmpdir, _limit(resource.RLIMIT_FSIZE, 500_000), executor)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0] and "a scratch file of trace" in lines[0], lines
    assert lines[0].startswith(f"error: {tmpdir}/myutils-trace-") and "set TMPDIR" in lines[0]
    assert list(tmpdir.iterdir()) == [] and not out.parent.exists()


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount tmpfs folders of a given size (``"1400k"``); they are unmounted afterwards."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        folder = tmp_path / f"fs{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"mounting a small tmpfs failed (it needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    if shutil.which("mount") is None:
        pytest.skip("no mount command: a small filesystem cannot be made here")
    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_scratch_space_clearly_too_small_is_refused_before_the_work(real_fixtures: Any, tmp_path: Path,
                                                                       small_fs: Callable[[str], Path]) -> None:
    tmpdir = small_fs("256k")
    out = tmp_path / "out" / "t.json"
    res = _trace(["--events", str(_ranks(tmp_path, 2)), "--torch-trace", str(real_fixtures / TRACE),
                  "--output", str(out)], tmpdir)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "MB of scratch space" in lines[0] and str(tmpdir) in lines[0], lines
    assert "set TMPDIR" in lines[0] and list(tmpdir.iterdir()) == [] and not out.parent.exists()


def test_a_scratch_space_that_fills_up_names_the_file(real_fixtures: Any, tmp_path: Path,
                                                      small_fs: Callable[[str], Path]) -> None:
    raw = len(gzip.decompress((real_fixtures / TRACE).read_bytes()))
    tmpdir = small_fs(f"{int(raw * 0.78) // 1024}k")  # above the estimate, below what the spill files take
    out = tmp_path / "out" / "t.json"
    res = _trace(["--events", str(_ranks(tmp_path, 2)), "--torch-trace", str(real_fixtures / TRACE),
                  "--output", str(out)], tmpdir)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0] and "a scratch file of trace" in lines[0]
    assert lines[0].startswith(f"error: {tmpdir}/myutils-trace-")
    assert list(tmpdir.iterdir()) == [] and not out.parent.exists()


def test_an_output_folder_clearly_too_small_is_refused_before_writing(real_fixtures: Any, tmp_path: Path,
                                                                       small_fs: Callable[[str], Path]) -> None:
    folder = small_fs("200k")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    res = _trace(["--events", str(_ranks(tmp_path, 2)), "--torch-trace", str(real_fixtures / TRACE),
                  "--output", str(folder / "t.json")], tmpdir)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--output {folder / 't.json'}: the merged trace needs about" in lines[0], lines
    assert list(folder.iterdir()) == [] and list(tmpdir.iterdir()) == []
