"""``myutils memory summarize`` and ``cut`` through the real CLI: output, files, one-line errors with exit 2."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.memory.snapshot import save_snapshot

MiB = 1 << 20


def _run(*args: str) -> Any:
    return CliRunner().invoke(build_app(), list(args))


@pytest.fixture
def snap_file(tmp_path: Path, hand_snapshot: dict[str, Any]) -> Path:
    return save_snapshot(tmp_path / "hand.pt", hand_snapshot)


def test_summarize_prints_peak_stacks_windows_trend(snap_file: Path) -> None:
    result = _run("memory", "summarize", str(snap_file), "--windows", "4")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "peak in use: 4.00 MiB at 3.000s" in out
    stacks = out.split("allocation stacks by bytes still live at the end (3 of 3 shown;")[1].splitlines()[2:5]
    assert stacks[2].split() == ["0", "B", "2.00", "MiB", "2.00", "MiB", "1", "0", "B", "mlp", "(model.py:3)"]
    assert out.count("window ") == 4 and "trend:" in out


def test_cut_writes_a_smaller_snapshot(snap_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.pt"
    result = _run("memory", "cut", str(snap_file), "--from", "1.5", "--to", "3.5", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "2 trace entries" in result.output and "small.pickle" in result.output
    data = torch.load(out)  # weights_only=True, torch's default
    assert len(data["device_traces"][0]) == 2 and out.read_bytes()[:2] == b"PK"
    viz = out.with_suffix(".pickle")
    assert viz.read_bytes()[:2] == b"\x80\x04" and pickle.loads(viz.read_bytes()) == data
    again = tmp_path / "again.pickle"  # the .pickle reads back too, and a .pickle name writes that alone
    result = _run("memory", "cut", str(viz), "--from", "0", "--to", "100", "-o", str(again))
    assert result.exit_code == 0, result.output
    assert pickle.loads(again.read_bytes()) == data and not again.with_suffix(".pt").exists()


def _one_line_exit_2(result: Any, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0]


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch PWNED",))


def _torch_saved(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize(("content", "fragments"), [
    (b"not a pickle", ("byte 0", "expected a memory snapshot (a torch.save zip or a pickle)")),
    (b"PK\x03\x04zip", (":zip:", "torch.save'd memory snapshot")),
    (pickle.dumps([1, 2]), ("top level", "expected a dict")),
    (pickle.dumps({"segments": [], "device_traces": [[{"size": 1}]]}), ("device_traces[0][0]",)),
    (pickle.dumps({"segments": []})[:-3], ("expected a pickled memory snapshot",)),
    (pickle.dumps({"x": _Evil()}), ("refused to load posix.system",)),
    (_torch_saved({"segments": [], "x": _Evil()}), (":zip:", "unsupported GLOBAL posix.system")),
    (_torch_saved([1, 2]), ("top level", "expected a dict")),
])
def test_bad_snapshot_one_line_exit_2(tmp_path: Path, content: bytes, fragments: tuple[str, ...],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    _one_line_exit_2(_run("memory", "summarize", str(bad)), "bad.pt", *fragments)
    out = tmp_path / "out.pt"
    _one_line_exit_2(_run("memory", "cut", str(bad), "--from", "0", "--to", "1", "-o", str(out)), "bad.pt")
    assert not out.exists() and not out.with_suffix(".pickle").exists() and not (tmp_path / "PWNED").exists()


def test_missing_file_and_bad_range(tmp_path: Path, snap_file: Path) -> None:
    _one_line_exit_2(_run("memory", "summarize", str(tmp_path / "nope.pt")), "nope.pt", "cannot open")
    out = tmp_path / "o.pt"
    _one_line_exit_2(_run("memory", "cut", str(snap_file), "--from", "3", "--to", "1", "-o", str(out)),
                     "0 <= from < to")
    assert not out.exists()


def test_console_script_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_text("hello")
    exe = Path(sys.executable).with_name("myutils")
    proc = subprocess.run([str(exe), "memory", "summarize", str(bad)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {bad}:byte 0: expected a memory snapshot (a torch.save "
                                               "zip or a pickle), found neither"]


def test_memory_viz_cli_renders_the_pickle_of_a_cut(snap_file: Path, tmp_path: Path) -> None:
    """The .pickle half of a pair is what ``python -m torch.cuda._memory_viz`` (and the web page) read."""
    out = tmp_path / "small.pt"
    assert _run("memory", "cut", str(snap_file), "--from", "0", "--to", "10", "-o", str(out)).exit_code == 0
    html = tmp_path / "viz.html"
    proc = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(out.with_suffix(".pickle")),
                           "-o", str(html)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "const local_files" in html.read_text(encoding="utf-8")


@pytest.mark.parametrize("out_name", ["run.pt", "run.pickle", "link.pickle"])
def test_cut_never_replaces_its_input(tmp_path: Path, hand_snapshot: dict[str, Any], out_name: str) -> None:
    """``-o run.pt`` would write the sibling ``run.pickle``; ``-o run.pickle`` (or a link to it) is the input."""
    src = save_snapshot(tmp_path / "run.pickle", hand_snapshot)
    (tmp_path / "link.pickle").symlink_to(src)
    before = src.read_bytes()
    out = tmp_path / out_name
    result = _run("memory", "cut", str(src), "--from", "0", "--to", "5", "-o", str(out))
    _one_line_exit_2(result, "run.pickle", "would replace the input")
    assert src.read_bytes() == before and not (tmp_path / "run.pt").exists()


HOSTILE_NAME = "evil\r\x1b[2Jpeak in use: 0 B\n| `x` <img src=x onerror=alert(1)>\u2028end"


def test_names_from_the_file_cannot_rewrite_the_terminal(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    """A frame name with CR, an escape sequence and line breaks stays on its own line, escaped."""
    hand_snapshot["device_traces"][0][2]["frames"] = [{"filename": "m.py", "line": 1, "name": HOSTILE_NAME}]
    path = save_snapshot(tmp_path / "hostile.pickle", hand_snapshot)
    result = _run("memory", "summarize", str(path))
    assert result.exit_code == 0, result.output
    out = result.output
    assert "\x1b" not in out and "\r" not in out and "\u2028" not in out
    assert [line for line in out.splitlines() if line.startswith("peak in use")] == ["peak in use: 4.00 MiB at 3.000s"]
    lines = [line for line in out.splitlines() if "evil" in line]
    assert len(lines) == 2  # the stacks live at the end, and those live at the peak
    for line in lines:
        assert "evil\\r\\x1b[2Jpeak in use: 0 B\\n| `x` <img src=x onerror=alert(1)>\\u2028end (m.py:1)" in line


def test_profile_made_snapshot_reports_no_reserved_memory(tmp_path: Path) -> None:
    """The input that printed "reserved at the end: 41888.16 GiB": a CPU profile turned into a snapshot, whose one
    segment spans from the heap's lowest address to the highest mmap'd tensor, terabytes apart."""
    from torch.cuda._memory_viz import _profile_to_snapshot

    small, big = torch.nn.Linear(64, 256), torch.nn.Linear(2048, 2048)  # 16 MiB of weights: mmap'd, not the heap
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        (small(torch.randn(32, 64)).sum() + big(torch.randn(512, 2048)).sum()).backward()
    snap = _profile_to_snapshot(prof)
    (seg,) = snap["segments"]
    # one segment from the lowest to the highest address seen: terabytes when the big weights are mmap'd
    # far from the heap (what the old summary printed as reserved memory), less when the allocator placed
    # them nearby (it varies with the process's memory layout); either way it is no reservation
    assert seg["total_size"] >= 2048 * 2048 * 4
    path = save_snapshot(tmp_path / "profile.pickle", snap)
    out_json = tmp_path / "s.json"
    result = _run("memory", "summarize", str(path), "--json", str(out_json))
    assert result.exit_code == 0, result.output
    assert "reserved: not recorded (segments made from a CPU profile)" in result.output
    assert " GiB" not in result.output.split("allocation stacks")[0].split("in use:")[1]
    data = json.loads(out_json.read_text())
    assert data["reserved_bytes"] is None and data["allocator"]["recorded"] is False
    assert {f["kind"] for f in data["findings"]} == {"not_recorded", "no_times"}


def test_json_keeps_every_frame_of_each_listed_stack(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    deep = [{"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
            {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
             "filename": "CUDACachingAllocator.cpp", "line": 0},
            {"name": "forward", "filename": "/home/me/model.py", "line": 7},
            {"name": "_PyEval_EvalFrameDefault", "filename": "??", "line": 0},
            {"name": "<module>", "filename": "/home/me/train.py", "line": 1}]
    hand_snapshot["device_traces"][0][3]["frames"] = deep
    path = save_snapshot(tmp_path / "deep.pickle", hand_snapshot)
    out_json = tmp_path / "deep.json"
    result = _run("memory", "summarize", str(path), "--json", str(out_json), "--full-stacks")
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert (data["format"], data["schema_version"], data["frames_view"]) == ("my_utils.memory.summary", 1, "user")
    (stack,) = [st for st in data["top_stacks"] if st["frames"] == ["forward (me/model.py:7)",
                                                                    "<module> (me/train.py:1)"]]
    assert stack["full_stack"] == deep and stack["live_end_bytes"] == MiB
    assert data["allocator"]["reserved_bytes"] == 4 * MiB and data["peak_bytes"] == 4 * MiB
    # --full-stacks prints every recorded frame under the stack's line, the allocator's too
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith("forward (me/model.py:7) <- <module> (me/train.py:1)"))
    assert [line.strip() for line in lines[at + 1:at + 6]] == [
        "torch::unwind::unwind()", "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int) "
        "(CUDACachingAllocator.cpp)", "forward (me/model.py:7)", "_PyEval_EvalFrameDefault",
        "<module> (me/train.py:1)"]


def test_bad_frames_option_and_outputs_that_would_replace_the_input(snap_file: Path) -> None:
    _one_line_exit_2(_run("memory", "summarize", str(snap_file), "--frames", "mine"), "--frames 'mine'",
                     "user, python, all")
    _one_line_exit_2(_run("memory", "summarize", str(snap_file), "--json", str(snap_file)), "would replace the input")


def test_cut_of_a_snapshot_numbered_by_entry_counts_entries_not_seconds(
        tmp_path: Path, profile_snapshot: dict[str, Any]) -> None:
    """A snapshot made from a CPU profile records no times: --from/--to are entry numbers, and the
    message says so (it said "between 2.0 s and 5.0 s")."""
    src = save_snapshot(tmp_path / "cpu.pt", profile_snapshot)
    out = tmp_path / "small.pickle"
    result = _run("memory", "cut", str(src), "--from", "2", "--to", "5", "-o", str(out))
    assert result.exit_code == 0, result.output
    kept = sum(len(t) for t in pickle.loads(out.read_bytes())["device_traces"])
    # entries 2..5 inclusive of each device trace, counted from the input independently
    expected = sum(len(t[2:6]) for t in profile_snapshot["device_traces"])
    assert kept == expected > 0
    assert f"{kept} trace entries from entry 2 to entry 5 (the snapshot records no times" in result.output
    assert " s " not in result.output.split(": ", 1)[1]
    bad = _run("memory", "cut", str(src), "--from", "5", "--to", "2", "-o", str(tmp_path / "x.pickle"))
    _one_line_exit_2(bad, "entry numbers: this snapshot records no times")
