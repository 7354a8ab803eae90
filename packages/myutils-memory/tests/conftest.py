"""Fixtures of the myutils-memory tests: snapshots (hand-made, from a real CPU profile, recorded on a GPU by someone
else, a generated Llama run), memory_viz's own figures for a snapshot, and a fake NVML.

``memviz_stats`` runs ``torch.cuda._memory_viz.segsum`` (what ``python -m torch.cuda._memory_viz
stats`` prints) and reads its totals; ``memviz_replay`` replays a trace the way memory_viz's page
(``MemoryViz.js``, ``process_alloc_data``) does, written here from its rules, not from our code.

The fake ``libnvidia-ml.so.1`` is compiled from ``fake_nvml.c`` with gcc once per session
(variants: a full driver, one without the energy counter, one without power), and handed to
the real pynvml the way pynvml loads a library: only while ``pynvml.nvmlLib`` is None.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
MiB = 1 << 20
BASE = 0x7F0000000000
FRAMES = [{"filename": "train.py", "line": 10, "name": "forward"}]


def hand_made() -> dict[str, Any]:
    """One 4 MiB segment; allocs of 1, 2 and 1 MiB at t=1,2,3 s; the 2 MiB one freed at 4 s.

    In use: 1 MiB, 3 MiB, 4 MiB (the peak, at 3 s), then 2 MiB at the end.
    """
    s = 1_000_000
    return {
        "segments": [{
            "device": 0, "address": BASE, "total_size": 4 * MiB, "allocated_size": 2 * MiB,
            "active_size": 2 * MiB, "requested_size": 2 * MiB, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": FRAMES,
            "blocks": [
                {"address": BASE, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": FRAMES},
                {"address": BASE + MiB, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
                {"address": BASE + 3 * MiB, "size": MiB, "requested_size": MiB, "state": "active_allocated",
                 "frames": [{"filename": "model.py", "line": 7, "name": "attention"}]},
            ],
        }],
        "device_traces": [[
            {"action": "segment_alloc", "addr": BASE, "size": 4 * MiB, "stream": 0, "time_us": 0, "frames": FRAMES},
            {"action": "alloc", "addr": BASE, "size": MiB, "stream": 0, "time_us": 1 * s, "frames": FRAMES},
            {"action": "alloc", "addr": BASE + MiB, "size": 2 * MiB, "stream": 0, "time_us": 2 * s,
             "frames": [{"filename": "model.py", "line": 3, "name": "mlp"}]},
            {"action": "alloc", "addr": BASE + 3 * MiB, "size": MiB, "stream": 0, "time_us": 3 * s,
             "frames": [{"filename": "model.py", "line": 7, "name": "attention"}]},
            {"action": "free_requested", "addr": BASE + MiB, "size": 2 * MiB, "stream": 0, "time_us": 4 * s,
             "frames": []},
            {"action": "free_completed", "addr": BASE + MiB, "size": 2 * MiB, "stream": 0, "time_us": 4 * s,
             "frames": []},
        ]],
        "allocator_settings": {},
    }


@pytest.fixture
def hand_snapshot() -> dict[str, Any]:
    """A fresh copy of :func:`hand_made`."""
    return hand_made()


@pytest.fixture(scope="session")
def profile_snapshot() -> dict[str, Any]:
    """A real snapshot: a CPU torch profile (shapes, memory, stacks) through ``_profile_to_snapshot``."""
    import torch
    from torch.cuda import _memory_viz

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x = torch.randn(32, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                profile_memory=True, with_stack=True) as prof:
        for _ in range(3):
            model(x).sum().backward()
    return dict(_memory_viz._profile_to_snapshot(prof))


@pytest.fixture(scope="session")
def eor_snapshot(real_fixtures: Any) -> tuple[Path, dict[str, Any]]:
    """The CNN snapshot recorded on a GPU with C++ stacks (MANIFEST section 6): its path and its dict."""
    from my_utils.memory.snapshot_io import load_snapshot

    path = real_fixtures / "memory/eor_nn__snapshot.pickle"
    return path, load_snapshot(path)


@pytest.fixture(scope="session")
def llm_snapshot() -> dict[str, Any]:
    """A Llama training run's snapshot made by ``my_utils.memory.testing`` (the held-out snapshot of the tests)."""
    from my_utils.memory.testing import llm_training_snapshot

    return llm_training_snapshot()


def _memviz_stats(snapshot: dict[str, Any]) -> dict[str, str]:
    """The totals ``python -m torch.cuda._memory_viz stats`` prints for ``snapshot``, as it prints them."""
    from torch.cuda import _memory_viz

    text = _memory_viz.segsum(snapshot)
    found: dict[str, str] = {}
    for line in text.splitlines():
        for key in ("segments", "total_reserved", "total_allocated", "total_free"):
            if line.startswith(key + ": "):
                found[key] = line.split(": ", 1)[1]
    assert len(found) == 4, text
    return found


@pytest.fixture(scope="session")
def memviz_stats() -> Callable[[dict[str, Any]], dict[str, str]]:
    """``memviz_stats(snapshot)``: {segments, total_reserved, total_allocated, total_free} as memory_viz prints them."""
    return _memviz_stats


def _memviz_replay(snapshot: dict[str, Any], device: int = 0) -> tuple[int, int]:
    """(bytes in use before the trace, the peak) of ``device`` as memory_viz's trace page computes them.

    Its rules: an ``alloc`` adds an element; a free of an address the trace allocated removes it, a
    free of an address it never saw is memory allocated before the trace; blocks still allocated at
    the end that the trace did not allocate are too (their ``requested_size``, their addresses
    counted from the segment's). The peak is the largest total after any action.
    """
    live: dict[int, int] = {}
    before = 0
    actions: list[int] = []
    for e in snapshot["device_traces"][device]:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            actions.append(e["size"])
        elif e["action"] == "free_completed":
            if e["addr"] in live:
                actions.append(-live.pop(e["addr"]))
            else:
                before += e["size"]
                actions.append(-e["size"])
    for seg in snapshot["segments"]:
        if seg.get("device", 0) != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and addr not in live:
                before += b.get("requested_size", b["size"])
            addr += b["size"]
    total, peak = before, 0
    for change in actions:
        total += change
        peak = max(peak, total)
    return before, peak


@pytest.fixture(scope="session")
def memviz_replay() -> Callable[..., tuple[int, int]]:
    """``memviz_replay(snapshot, device=0)``: (in use before the trace, peak) by memory_viz's page's rules."""
    return _memviz_replay


def _build(out: Path, *defines: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    lib = out / "libnvidia-ml.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *defines, str(HERE / "fake_nvml.c"), "-o", str(lib)],
                   check=True, capture_output=True)
    return lib


@pytest.fixture(scope="session")
def fake_nvml_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Paths of the compiled fake drivers: ``full``, ``no_energy``, ``no_power``."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the fake libnvidia-ml.so.1 cannot be built")
    root = tmp_path_factory.mktemp("fake_nvml")
    return {"full": _build(root / "full"), "no_energy": _build(root / "no_energy", "-DNO_ENERGY"),
            "no_power": _build(root / "no_power", "-DNO_ENERGY", "-DNO_POWER")}


@pytest.fixture
def use_fake_nvml(monkeypatch: pytest.MonkeyPatch,
                  fake_nvml_libs: dict[str, Path]) -> Iterator[Callable[[str], Path]]:
    """``use_fake_nvml("no_energy")``: the real pynvml loads that fake driver (restored afterwards)."""
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (the [nvml] extra)")

    def use(variant: str = "full") -> Path:
        lib = fake_nvml_libs[variant]
        monkeypatch.setattr(pynvml, "nvmlLib", ctypes.CDLL(str(lib)))
        monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
        return lib

    yield use
