"""Atomic writes: the target holds the old content or the complete new content."""

from __future__ import annotations

from pathlib import Path

import pytest

from my_utils.core.atomic import atomic_write


def test_success_replaces(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    with atomic_write(target) as fh:
        fh.write("new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_failure_keeps_old_content_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target) as fh:
        fh.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_binary_mode(tmp_path: Path) -> None:
    target = tmp_path / "blob.bin"
    with atomic_write(target, "wb") as fh:
        fh.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
