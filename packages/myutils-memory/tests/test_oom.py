"""The OOM recorder: a raised torch.OutOfMemoryError on the CPU writes a bundle and propagates unchanged."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from my_utils.memory.cuda_memory import RecordingCudaMemory, TorchCudaMemory
from my_utils.memory.oom import ENV_VAR, OomRecorder, install_oom_recorder, requested_bytes

MiB = 1 << 20
MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which "
           "1.50 GiB is free.")


def _bundle_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_guard_records_and_reraises_the_same_error(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    cuda = RecordingCudaMemory(state=hand_snapshot, stats={"num_ooms": 1, "allocated_bytes.all.current": 2 * MiB},
                               free_total=(3 * MiB, 80 * MiB))
    recorder = OomRecorder(tmp_path, rank=1, cuda=cuda)
    error = torch.OutOfMemoryError(MESSAGE)
    with pytest.raises(torch.OutOfMemoryError) as info, recorder.guard():
        raise error
    assert info.value is error and str(info.value) == MESSAGE
    (bundle,) = recorder.bundles
    assert bundle.parent == tmp_path and bundle.name.startswith("oom__") and bundle.name.endswith("__rank1")
    assert _bundle_files(bundle) == ["allocator_stats.json", "largest_blocks.json", "snapshot.pickle", "snapshot.pt",
                                     "summary.txt"]
    assert torch.load(bundle / "snapshot.pt")["segments"] == hand_snapshot["segments"]
    assert pickle.loads((bundle / "snapshot.pickle").read_bytes())["segments"] == hand_snapshot["segments"]
    stats = json.loads((bundle / "allocator_stats.json").read_text())
    assert stats["memory_stats"]["num_ooms"] == 1 and stats["mem_get_info"] == [3 * MiB, 80 * MiB]
    blocks = json.loads((bundle / "largest_blocks.json").read_text())
    assert [b["size"] for b in blocks] == [MiB, MiB]
    base = hand_snapshot["segments"][0]["address"]
    assert sorted(b["address"] for b in blocks) == [base, base + 3 * MiB]
    summary = (bundle / "summary.txt").read_text()
    assert "requested: 2.00 GiB" in summary and MESSAGE in summary and "device free/total now: 3.00 MiB / 80.00 MiB" \
        in summary and "forward (train.py:10)" in summary
    assert not list(tmp_path.glob("*.partial"))


def test_other_errors_pass_through_untouched(tmp_path: Path) -> None:
    recorder = OomRecorder(tmp_path, cuda=RecordingCudaMemory())
    with pytest.raises(ValueError, match="boom"), recorder.guard():
        raise ValueError("boom")
    assert recorder.bundles == [] and list(tmp_path.iterdir()) == []


def test_cpu_build_bundle_says_why_there_is_no_snapshot(tmp_path: Path) -> None:
    """The real seam on this CPU build: no allocator state, the error and the reason are kept."""
    recorder = OomRecorder(tmp_path, rank=0, cuda=TorchCudaMemory())
    with pytest.raises(torch.OutOfMemoryError), recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    (bundle,) = recorder.bundles
    assert "snapshot.pt" not in _bundle_files(bundle) and "snapshot.pickle" not in _bundle_files(bundle)
    assert "CUDA is unavailable (torch.cuda.is_available() is False" in (bundle / "summary.txt").read_text()


def test_observer_bundle_gets_the_error_once(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    """On CUDA the observer writes the bundle inside the failing allocation; the error is added after."""
    recorder = OomRecorder(tmp_path, cuda=RecordingCudaMemory(state=hand_snapshot))
    recorder.observe(0, 2 << 30, 70 << 30, 1 << 30)
    with pytest.raises(torch.OutOfMemoryError), recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    (bundle,) = recorder.bundles
    summary = (bundle / "summary.txt").read_text()
    assert "requested: 2.00 GiB" in summary and "device free at the failing allocation: 1.00 GiB" in summary
    assert summary.count("error raised: OutOfMemoryError") == 1


def test_a_failing_write_is_reported_and_the_error_still_propagates(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    recorder = OomRecorder(blocker / "sub", cuda=RecordingCudaMemory())
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"), pytest.raises(torch.OutOfMemoryError), \
            recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    assert recorder.bundles == [] and "writing the bundle" in caplog.text


def test_requested_bytes_parsing() -> None:
    assert requested_bytes(MESSAGE) == 2 << 30
    assert requested_bytes("Tried to allocate 20.00 MiB") == 20 * MiB
    assert requested_bytes("no size here") is None


def test_install_wires_history_and_hooks_and_uninstalls(tmp_path: Path) -> None:
    cuda = RecordingCudaMemory(unavailable="no GPU here")
    before = sys.excepthook
    recorder = install_oom_recorder(tmp_path, cuda=cuda)
    assert recorder is not None and sys.excepthook is not before
    recorder.uninstall()
    assert sys.excepthook is before


def test_env_var_zero_switches_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "0")
    assert install_oom_recorder() is None


def _run(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **env})


def test_uncaught_oom_in_a_real_process(tmp_path: Path) -> None:
    """One call installs it; the process still dies of the original error, printed by Python as usual."""
    proc = _run(f"""
        import torch
        from my_utils.memory.oom import install_oom_recorder
        install_oom_recorder()
        raise torch.OutOfMemoryError({MESSAGE!r})
    """, tmp_path, **{ENV_VAR: str(tmp_path / "bundles"), "RANK": "2"})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"torch.OutOfMemoryError: {MESSAGE}"
    (bundle,) = (tmp_path / "bundles").iterdir()
    assert bundle.name.endswith("__rank2")
    assert MESSAGE in (bundle / "summary.txt").read_text()


def test_uncaught_oom_in_a_thread(tmp_path: Path) -> None:
    proc = _run(f"""
        import threading, torch
        from my_utils.memory.oom import install_oom_recorder
        install_oom_recorder("bundles")
        def work():
            raise torch.OutOfMemoryError({MESSAGE!r})
        t = threading.Thread(target=work)
        t.start(); t.join()
        print("main thread goes on")
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "main thread goes on"
    assert "OutOfMemoryError" in proc.stderr
    assert len(list((tmp_path / "bundles").iterdir())) == 1


@pytest.mark.cuda
def test_real_cuda_oom_writes_a_bundle(tmp_path: Path) -> None:
    """On a GPU: a too-large allocation; the observer writes the bundle with a real snapshot."""
    recorder = install_oom_recorder(tmp_path)
    assert recorder is not None
    try:
        free, _total = torch.cuda.mem_get_info()
        with pytest.raises(torch.OutOfMemoryError), recorder.guard():
            torch.empty(free * 4, dtype=torch.uint8, device="cuda")
    finally:
        recorder.uninstall()
    (bundle,) = recorder.bundles
    assert torch.load(bundle / "snapshot.pt")["segments"] and (bundle / "snapshot.pickle").stat().st_size > 0
    assert "error raised: OutOfMemoryError" in (bundle / "summary.txt").read_text()


def test_bundle_files_are_strict_json_and_names_stay_on_their_line(tmp_path: Path,
                                                                    hand_snapshot: dict[str, Any]) -> None:
    """NaN/Infinity in the allocator stats become null; a frame name with line breaks is escaped in summary.txt."""
    hand_snapshot["segments"][0]["blocks"][0]["frames"] = [{"filename": "a.py", "line": 1,
                                                            "name": "x\nnote: fake\r\x1b[2J"}]
    cuda = RecordingCudaMemory(state=hand_snapshot, stats={"ratio": float("nan"), "peak": float("inf"), "n": 3})
    recorder = OomRecorder(tmp_path, cuda=cuda)
    with pytest.raises(torch.OutOfMemoryError), recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    (bundle,) = recorder.bundles

    def strict(token: str) -> None:
        raise AssertionError(f"bare {token} in a bundle file")

    stats = json.loads((bundle / "allocator_stats.json").read_text(), parse_constant=strict)
    assert stats["memory_stats"] == {"ratio": None, "peak": None, "n": 3}
    blocks = json.loads((bundle / "largest_blocks.json").read_text(), parse_constant=strict)
    assert blocks[0]["frames"][0]["name"] == "x\nnote: fake\r\x1b[2J"  # JSON keeps the name exactly
    summary = (bundle / "summary.txt").read_text()
    assert "\x1b" not in summary and "\r" not in summary
    assert [line for line in summary.splitlines() if line.startswith("note:")] == []
    assert "x\\nnote: fake\\r\\x1b[2J (a.py:1)" in summary


def test_largest_blocks_are_listed_largest_first(tmp_path: Path) -> None:
    """25 live blocks of distinct sizes in a shuffled order (and inactive ones between): the 20 largest, largest
    first, in largest_blocks.json and in summary.txt."""
    import random

    sizes = [(i + 1) * 4096 + i for i in range(25)]
    random.Random(7).shuffle(sizes)
    blocks, address = [], 0x10000
    for n, size in enumerate(sizes):
        blocks.append({"address": address, "size": size, "state": "active_allocated",
                       "frames": [{"name": f"alloc{size}", "filename": "m.py", "line": n}]})
        blocks.append({"address": address + size, "size": 1 << 30, "state": "inactive", "frames": []})
        address += size + (1 << 30)
    snapshot = {"segments": [{"device": 0, "address": 0x10000, "total_size": address - 0x10000, "blocks": blocks}],
                "device_traces": [[]]}
    recorder = OomRecorder(tmp_path, cuda=RecordingCudaMemory(state=snapshot))
    with pytest.raises(torch.OutOfMemoryError), recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    (bundle,) = recorder.bundles
    expected = sorted(sizes, reverse=True)[:20]
    listed = json.loads((bundle / "largest_blocks.json").read_text())
    assert [b["size"] for b in listed] == expected
    assert [b["frames"][0]["name"] for b in listed] == [f"alloc{size}" for size in expected]
    summary = (bundle / "summary.txt").read_text().splitlines()
    rows = summary[summary.index("largest live blocks (20):") + 1:]
    assert [row.split()[-2] for row in rows] == [f"alloc{size}" for size in expected]


def test_summary_names_the_users_code_not_the_allocator(tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    """On a GPU the recorder records C++ stacks too: each starts with the allocator's frames, which name nothing."""
    cxx = [{"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
           {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)",
            "filename": "CUDACachingAllocator.cpp", "line": 0},
           {"name": "at::native::mm(at::Tensor const&, at::Tensor const&)", "filename": "??", "line": 0}]
    python = [{"name": "forward", "filename": "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py",
               "line": 125},
              {"name": "_PyEval_EvalFrameDefault", "filename": "??", "line": 0},
              {"name": "train_step", "filename": "/home/me/train.py", "line": 40}]
    hand_snapshot["segments"][0]["blocks"][0]["frames"] = cxx + python
    recorder = OomRecorder(tmp_path, cuda=RecordingCudaMemory(state=hand_snapshot))
    with pytest.raises(torch.OutOfMemoryError), recorder.guard():
        raise torch.OutOfMemoryError(MESSAGE)
    (bundle,) = recorder.bundles
    listed = json.loads((bundle / "largest_blocks.json").read_text())
    (block,) = [b for b in listed if b["frames"] == cxx + python]
    assert block["stack"] == "forward (torch/nn/modules/linear.py:125) <- train_step (me/train.py:40)"
    summary = (bundle / "summary.txt").read_text()
    assert "forward (torch/nn/modules/linear.py:125) <- train_step (me/train.py:40)" in summary
    assert "unwind" not in summary
