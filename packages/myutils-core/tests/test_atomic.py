"""Atomic writes: the target holds the old content or the complete new content."""

from __future__ import annotations

import os
import stat
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


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_permissions_follow_the_umask_like_open(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        with open(tmp_path / "plain", "w") as fh:
            fh.write("x")
        with atomic_write(tmp_path / "atomic") as fh:
            fh.write("x")
    finally:
        os.umask(old)
    plain = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
    assert plain == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "atomic").stat().st_mode) == plain
