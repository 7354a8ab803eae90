"""load_snapshot through the real CLI on hostile files: bounded work, one line naming the file and the place, no block.

Each case is a file a user could be handed: shared references that unpickle to 3e8 entries,
malformed structure (every field the summary and the cut read), a pickle broken at a known
byte, a FIFO. ``summarize`` and ``cut`` must refuse each in one line with exit 2, naming the
place, and the cut must leave no output.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.errors import InputError
from my_utils.memory.snapshot_io import load_snapshot

MiB = 1 << 20
MYUTILS = Path(sys.executable).with_name("myutils")


def _entry(i: int, **extra: Any) -> dict[str, Any]:
    return {"action": "alloc", "addr": 4096 * i, "size": MiB, "stream": 0, "time_us": 1_000 * i, "frames": [],
            **extra}


def _snapshot(**override: Any) -> dict[str, Any]:
    snap = {"segments": [{"device": 0, "address": 0, "total_size": 64 * MiB, "stream": 0,
                          "blocks": [{"address": 0, "size": MiB, "state": "active_allocated", "frames": []}]}],
            "device_traces": [[_entry(i) for i in range(20)]]}
    snap.update(override)
    return snap


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MYUTILS), *args], capture_output=True, text=True, timeout=timeout, check=False)


def _refused(proc: Any, *fragments: str) -> str:
    stderr = proc.stderr if isinstance(proc, subprocess.CompletedProcess) else proc.output
    code = proc.returncode if isinstance(proc, subprocess.CompletedProcess) else proc.exit_code
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_shared_references_are_bounded_by_the_file_size(tmp_path: Path) -> None:
    """206 KB that unpickles to 3e8 trace entries (one dict, shared): refused at once, not walked."""
    e = _entry(1)
    path = tmp_path / "shared.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[e] * 100_000] * 3000}, protocol=4))
    assert path.stat().st_size < 300_000
    proc = _cli("memory", "summarize", str(path), timeout=60)  # the unbounded walk takes many minutes
    _refused(proc, str(path), "device_traces", "300000000 trace entries")
    out = tmp_path / "cut.pickle"
    _refused(_cli("memory", "cut", str(path), "--from", "0", "--to", "1", "-o", str(out), timeout=60), "device_traces")
    assert not out.exists()


def test_a_file_with_many_real_entries_is_within_the_budget(tmp_path: Path) -> None:
    """The bound never refuses a real snapshot: distinct entries (frames lists shared, as torch shares them)."""
    frames = [{"name": f"f{i}", "filename": "model.py", "line": i} for i in range(40)]
    trace = [_entry(i, frames=frames) for i in range(30_000)]
    path = tmp_path / "many.pickle"
    path.write_bytes(pickle.dumps(_snapshot(device_traces=[trace]), protocol=4))
    assert len(load_snapshot(path)["device_traces"][0]) == 30_000


def _with_entry(**fields: Any) -> dict[str, Any]:
    snap = _snapshot()
    snap["device_traces"][0][12] = {**snap["device_traces"][0][12], **fields}
    return snap


def _without(where: dict[str, Any], key: str) -> dict[str, Any]:
    del where[key]
    return where


_NO_TIME = _snapshot()
del _NO_TIME["device_traces"][0][12]["time_us"]
_NO_ADDRESS = _snapshot()
del _NO_ADDRESS["segments"][0]["address"]

MALFORMED = {
    "entry without time_us": (_NO_TIME, "device_traces[0][12].time_us"),
    "segments [1]": (_snapshot(segments=[1]), "segments[0]"),
    "frames 5": (_with_entry(frames=5), "device_traces[0][12].frames"),
    "frame not a dict": (_with_entry(frames=[{"name": "a"}, 7]), "device_traces[0][12].frames[1]"),
    "size 2**70": (_with_entry(size=2**70), "device_traces[0][12].size"),
    "negative size": (_with_entry(size=-5), "device_traces[0][12].size"),
    "time NaN": (_with_entry(time_us=float("nan")), "device_traces[0][12].time_us"),
    "action not text": (_with_entry(action=3), "device_traces[0][12].action"),
    "addr text": (_with_entry(addr="0x10"), "device_traces[0][12].addr"),
    "segment without address": (_NO_ADDRESS, "segments[0].address"),
    "segment device huge": (_snapshot(segments=[{"device": 2**40, "address": 0, "total_size": 1}]),
                            "segments[0].device"),
    "block size text": (_snapshot(segments=[{"address": 0, "total_size": 8, "blocks": [{"size": "8"}]}]),
                        "segments[0].blocks[0].size"),
    "trace not a list": (_snapshot(device_traces=[5]), "device_traces[0]"),
    "region time text": (_snapshot(my_utils_regions=[{"name": "x", "start_us": "a", "stop_us": 1}]),
                         "my_utils_regions[0].start_us"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_snapshots_name_the_place(tmp_path: Path, case: str) -> None:
    data, place = MALFORMED[case]
    path = tmp_path / "bad.pickle"
    path.write_bytes(pickle.dumps(data, protocol=4))
    runner = CliRunner()
    _refused(runner.invoke(build_app(), ["memory", "summarize", str(path)]), f"{path}:{place}:")
    out = tmp_path / "o.pickle"
    _refused(runner.invoke(build_app(), ["memory", "cut", str(path), "--from", "0", "--to", "1", "-o", str(out)]),
             f"{path}:{place}:")
    assert not out.exists()


def test_fourteen_bytes_declaring_a_terabyte(tmp_path: Path) -> None:
    """BINBYTES8 with a 1 TiB length in a 14-byte file: refused at that opcode, nothing allocated."""
    path = tmp_path / "tiny.pickle"
    path.write_bytes(b"\x80\x04\x8e" + (1 << 40).to_bytes(8, "little") + b"abc")
    assert path.stat().st_size == 14
    line = _refused(_cli("memory", "summarize", str(path)), f"{path}:byte 2:", "1099511627776")
    assert "MemoryError" not in line


def _position_of(data: bytes, opname: str) -> int:
    return next(pos for op, _arg, pos in pickletools.genops(data) if op.name == opname)


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("true",))


def test_a_refused_pickle_names_the_real_byte(tmp_path: Path) -> None:
    """An unknown opcode in the middle, and a pickled function after 100 KB of data: their own offsets."""
    data = bytearray(pickle.dumps({"segments": [], "pad": "x" * 100_000, "marker": "MARK"}, protocol=4))
    at = data.index(b"MARK") - 2  # the SHORT_BINUNICODE opcode of "MARK"
    data[at] = 0xFF
    path = tmp_path / "flipped.pickle"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    assert info.value.place == f"byte {at}" and at > 100_000, info.value

    evil = pickle.dumps({"segments": [], "pad": "x" * 100_000, "x": _Evil()}, protocol=4)
    path.write_bytes(evil)
    with pytest.raises(InputError, match=r"refused to load posix\.system") as info:
        load_snapshot(path)
    assert info.value.place == f"byte {_position_of(evil, 'STACK_GLOBAL')}", info.value


def test_truncated_pickle_names_where_it_ends(tmp_path: Path) -> None:
    data = pickle.dumps(_snapshot(), protocol=4)
    path = tmp_path / "torn.pickle"
    path.write_bytes(data[:-40])
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    place = info.value.place or ""
    assert place.startswith("byte ") and int(place.split()[1]) > len(data) // 2, info.value


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo does not exist on this platform")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "snap.pickle"
    os.mkfifo(fifo)
    _refused(_cli("memory", "summarize", str(fifo), timeout=60), str(fifo), "FIFO")
    out = tmp_path / "o.pickle"
    _refused(_cli("memory", "cut", str(fifo), "--from", "0", "--to", "1", "-o", str(out), timeout=60), "FIFO")
    assert not out.exists()


def test_a_torch_zip_of_a_malformed_snapshot_names_the_place(tmp_path: Path) -> None:
    import torch

    buf = io.BytesIO()
    torch.save(_with_entry(size=-1), buf)
    path = tmp_path / "bad.pt"
    path.write_bytes(buf.getvalue())
    with pytest.raises(InputError) as info:
        load_snapshot(path)
    assert info.value.place == "device_traces[0][12].size", info.value


def test_deep_nesting_kept_by_the_cut_is_refused_in_one_line(tmp_path: Path) -> None:
    """A key the summary ignores but the cut writes back, nested 100,000 deep: one line, nothing written."""
    placeholder = "PLACEHOLDER-FOR-DEEP"
    data = pickle.dumps(_snapshot(allocator_settings=placeholder), protocol=2)  # protocol 2: no frames
    string = b"X" + len(placeholder).to_bytes(4, "little") + placeholder.encode()
    depth = 100_000  # EMPTY_LIST pushed 100,000 times, then each appended to the one below
    path = tmp_path / "deep.pickle"
    path.write_bytes(data.replace(string, b"]" * depth + b"a" * (depth - 1)))
    assert _cli("memory", "summarize", str(path)).returncode == 0
    for name in ("o.pickle", "o.pt"):
        out = tmp_path / name
        _refused(_cli("memory", "cut", str(path), "--from", "0", "--to", "1", "-o", str(out)),
                 f"{path}:key 'allocator_settings':")
        assert not out.exists() and not out.with_suffix(".pickle").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.pickle"]


def test_a_bytearray_declaring_exabytes_gives_one_line(tmp_path: Path) -> None:
    """CPython prints a stray 'SystemError: deallocated bytearray...' when BYTEARRAY8 cannot be allocated."""
    path = tmp_path / "ba.pickle"
    path.write_bytes(b"\x80\x05\x96" + (8391162081649385248).to_bytes(8, "little") + b"abc" * 100)
    _refused(_cli("memory", "summarize", str(path)), f"{path}:byte 2:", "BYTEARRAY8")


def test_a_cut_of_many_segments_is_not_quadratic(tmp_path: Path) -> None:
    """100,000 segments with a live block each (9 MB): the cut matched every live block against every segment
    (1e10 steps, minutes); each segment now takes its blocks by bisection (seconds)."""
    n = 100_000
    segs = [{"device": 0, "address": i * 4 * MiB, "total_size": 2 * MiB,
             "blocks": [{"address": i * 4 * MiB, "size": MiB, "state": "active_allocated"}]} for i in range(n)]
    trace = [{"action": "alloc", "addr": i * 4 * MiB, "size": MiB, "time_us": i} for i in range(n)]
    path = tmp_path / "many.pickle"
    path.write_bytes(pickle.dumps({"segments": segs, "device_traces": [trace]}, protocol=4))
    out = tmp_path / "cut.pickle"
    proc = _cli("memory", "cut", str(path), "--from", "0.05", "--to", "1", "-o", str(out), timeout=150)
    assert proc.returncode == 0, proc.stderr
    cut = load_snapshot(out)
    assert len(cut["segments"]) == n and len(cut["device_traces"][0]) == n - 50_000
    live = [b for s in cut["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert len(live) == n and all(s["blocks"][0]["address"] == s["address"] for s in cut["segments"])
