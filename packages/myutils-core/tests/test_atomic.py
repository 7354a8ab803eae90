"""Atomic writes: the target holds the old content or the complete new content."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import typer

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


# -- a failed write names the output, never the hidden temporary file ----------------------

_CHILD = """
import os, resource, signal, sys
from my_utils.core.atomic import atomic_write
if sys.argv[2] == "fsize":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    with atomic_write(sys.argv[1], "wb") as fh:
        for _ in range(64):
            fh.write(b"x" * 8192)
except OSError as exc:
    print(type(exc).__name__, exc.errno, exc.filename, exc.strerror, sep="|")
"""


def _write_in_child(target: Path, how: str, *prefix: str) -> list[str]:
    proc = subprocess.run([*prefix, sys.executable, "-c", _CHILD, str(target), how], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split("|")


def test_a_file_size_limit_names_the_output(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    kind, code, filename, message = _write_in_child(target, "fsize")
    assert (kind, int(code), filename) == ("OSError", errno.EFBIG, "None")
    assert message == f"File too large writing {target}"
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def _tmpfs_command(mount_dir: Path, options: str) -> list[str] | None:
    """A command prefix running its argument with a small tmpfs at ``mount_dir`` (a user namespace), or None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-rm", "sh", "-c", f"mount -t tmpfs -o {options} tmpfs {mount_dir}"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return None
    return [unshare, "-rm", "sh", "-c", f'mount -t tmpfs -o {options} tmpfs {mount_dir} && exec "$@"', "sh"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs in a user namespace is Linux only")
def test_a_full_disk_names_the_output(tmp_path: Path) -> None:
    mount_dir = tmp_path / "small"
    mount_dir.mkdir()
    prefix = _tmpfs_command(mount_dir, "size=64k")
    if prefix is None:
        pytest.skip("no user namespaces here (unshare -rm + mount tmpfs refused): cannot make a small disk")
    target = mount_dir / "out" / "trace.json"
    kind, code, filename, message = _write_in_child(target, "plain", *prefix)
    assert (kind, int(code), filename) == ("OSError", errno.ENOSPC, "None")
    assert message == f"No space left on device writing {target}"


def test_a_folder_that_cannot_be_written_names_the_output(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes into any folder of a normal file system: sysfs refuses even root
        target = Path("/sys/kernel/myutils_report.json")
        if not target.parent.is_dir():
            pytest.skip("running as root without /sys/kernel: no folder refuses root here")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        target = folder / "report.json"
    try:
        with pytest.raises(PermissionError) as info, atomic_write(target) as fh:
            fh.write("x")
    finally:
        if os.geteuid() != 0:
            target.parent.chmod(0o755)
    assert info.value.filename is None
    assert str(info.value) == f"[Errno {errno.EACCES}] Permission denied writing {target}"
    assert ".tmp" not in str(info.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs in a user namespace is Linux only")
def test_a_read_only_file_system_names_the_output(tmp_path: Path) -> None:
    mount_dir = tmp_path / "ro"
    mount_dir.mkdir()
    prefix = _tmpfs_command(mount_dir, "ro,size=64k")
    if prefix is None:
        pytest.skip("no user namespaces here (unshare -rm + mount tmpfs refused): cannot mount a read-only folder")
    kind, code, filename, message = _write_in_child(mount_dir / "out.json", "plain", *prefix)
    assert (kind, int(code), filename) == ("OSError", errno.EROFS, "None")
    assert message == f"Read-only file system writing {mount_dir / 'out.json'}"


def test_the_callers_own_errors_are_left_alone(tmp_path: Path) -> None:
    missing = tmp_path / "input.csv"
    with pytest.raises(FileNotFoundError) as info, atomic_write(tmp_path / "out.json") as fh:
        fh.write(missing.read_text())
    assert info.value.filename == str(missing)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_the_cli_prints_the_output_and_what_happened(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from my_utils.core.cli.guard import exit_on_error

    app = typer.Typer()

    @app.command()
    @exit_on_error
    def write(path: Path) -> None:
        with atomic_write(path) as fh:
            fh.write("x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what a full disk raises from write()

    result = CliRunner().invoke(app, [str(tmp_path / "r.json")])
    assert result.exit_code == 2
    assert result.output == f"error: No space left on device writing {tmp_path / 'r.json'}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_temporary_goes_with_the_next_write_and_a_live_ones_stays(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up: the temporary names its writer, and a later process's first write removes it."""
    script = ("import os, sys; from my_utils.core.atomic import atomic_write\n"
              "with atomic_write(sys.argv[1]) as fh:\n"
              "    fh.write('half'); fh.flush(); os.kill(os.getpid(), 9)\n")
    target = tmp_path / "report.json"
    killed = subprocess.Popen([sys.executable, "-c", script, str(target)])
    assert killed.wait(timeout=60) == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".report.json.{killed.pid}-") and left[0].endswith(".tmp"), left
    from my_utils.core.scratch import temp_name

    alive = tmp_path / f"{temp_name(tmp_path / 'other.json')}abcd1234.tmp"  # this process's: still writing
    alive.write_text("in progress")
    proc = subprocess.run([sys.executable, "-c", "import sys; from my_utils.core.atomic import atomic_write\n"
                           "with atomic_write(sys.argv[1]) as fh: fh.write('new')", str(tmp_path / "next.json")],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "next.json"])


# -- replace_all: a set of outputs, all or none --------------------------------------------------------------


def _staged(folder: Path, names: list[str], text: str) -> list[tuple[Path, Path]]:
    pairs = []
    for name in names:
        tmp = folder / f".{name}.staged"
        tmp.write_text(text)
        pairs.append((tmp, folder / name))
    return pairs


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() if p.is_file() else "<folder>" for p in sorted(folder.iterdir())}


def test_replace_all_puts_every_file_in_place_and_leaves_nothing_else(tmp_path: Path) -> None:
    from my_utils.core.atomic import replace_all

    (tmp_path / "a.csv").write_text("old a")
    replace_all(_staged(tmp_path, ["a.csv", "b.csv"], "new"))
    assert _listing(tmp_path) == {"a.csv": "new", "b.csv": "new"}


def test_replace_all_refuses_a_folder_before_any_rename(tmp_path: Path) -> None:
    from my_utils.core.atomic import replace_all

    (tmp_path / "a.csv").write_text("old a")
    (tmp_path / "b.csv").mkdir()
    pairs = _staged(tmp_path, ["a.csv", "b.csv", "c.csv"], "new")
    with pytest.raises(IsADirectoryError, match=f"cannot write {tmp_path / 'b.csv'}: it is a folder"):
        replace_all(pairs)
    assert {k: v for k, v in _listing(tmp_path).items() if not k.startswith(".")} == {"a.csv": "old a",
                                                                                        "b.csv": "<folder>"}


def test_replace_all_undoes_the_renames_before_one_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third rename fails (as a file system gone read-only would): the first two get their old files back, a
    target that did not exist is removed again, and no backup stays."""
    from my_utils.core import atomic

    (tmp_path / "a.csv").write_text("old a")
    (tmp_path / "c.csv").write_text("old c")
    pairs = _staged(tmp_path, ["a.csv", "b.csv", "c.csv"], "new")
    real_replace, calls = os.replace, []

    def failing(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(errno.EROFS, "Read-only file system")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(OSError, match=f"cannot write {tmp_path / 'c.csv'}: Read-only file system"):
        atomic.replace_all(pairs)
    monkeypatch.undo()
    assert {k: v for k, v in _listing(tmp_path).items() if k.endswith(".csv") and not k.startswith(".")} == {
        "a.csv": "old a", "c.csv": "old c"}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no backup left
