"""The entry-point cache: the same answer as importlib.metadata, renewed whenever a distribution changes."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core import entry_point_cache as cache
from my_utils.core.entry_point_cache import CachedEntryPoint, cached_entry_points, metadata_fingerprint
from my_utils.core.hookspecs import ENTRY_POINT_GROUP
from my_utils.core.testing.plugin_env import write_distribution

GROUP = "myutils_test.cache_group"


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(folder))
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    return folder


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path into which test distributions are installed."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _from_metadata(group: str) -> list[tuple[str, str, str | None, str | None]]:
    return [(ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
            for ep in importlib.metadata.entry_points(group=group)]


def _rows(eps: list[CachedEntryPoint]) -> list[tuple[str, str, str | None, str | None]]:
    return [(ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
            for ep in eps]


def _cache_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("entry-points-*.json"))


def test_a_miss_and_a_hit_give_what_importlib_metadata_gives(cache_dir: Path) -> None:
    expected = _from_metadata(ENTRY_POINT_GROUP)
    assert {name for name, *_ in expected} >= {"core"}
    assert _rows(cached_entry_points(ENTRY_POINT_GROUP)) == expected  # a miss: read, then written
    (written,) = _cache_files(cache_dir)
    assert json.loads(written.read_text())["groups"][ENTRY_POINT_GROUP]
    assert _rows(cached_entry_points(ENTRY_POINT_GROUP)) == expected  # a hit


def test_a_hit_reads_the_file_not_the_metadata(cache_dir: Path, site: Path) -> None:
    write_distribution(site, "myutils-ext-cachea", "1.0", {"cachea_mod.py": "X = 1\n"}, {"a": "cachea_mod"},
                       group=GROUP)
    first = cached_entry_points(GROUP)
    (written,) = _cache_files(cache_dir)
    data = json.loads(written.read_text())
    data["groups"][GROUP][0][0] = "renamed-in-the-cache"  # only the file can say this
    written.write_text(json.dumps(data))
    assert [ep.name for ep in cached_entry_points(GROUP)] == ["renamed-in-the-cache"]
    assert [ep.name for ep in first] == ["a"]


def test_installing_rewriting_and_removing_a_distribution_renews_the_answer(cache_dir: Path, site: Path) -> None:
    assert cached_entry_points(GROUP) == []
    info = write_distribution(site, "myutils-ext-cacheb", "1.0", {"cacheb_mod.py": "X = 1\n"}, {"b": "cacheb_mod"},
                              group=GROUP)
    assert _rows(cached_entry_points(GROUP)) == [("b", "cacheb_mod", "myutils-ext-cacheb", "1.0")]
    # entry_points.txt rewritten in place (the folder's own mtime does not change)
    stat = (info / "entry_points.txt").stat()
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nb2 = cacheb_mod:X\n")
    os.utime(info / "entry_points.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _rows(cached_entry_points(GROUP)) == [("b2", "cacheb_mod:X", "myutils-ext-cacheb", "1.0")]
    for path in sorted(info.iterdir()):
        path.unlink()
    info.rmdir()
    assert cached_entry_points(GROUP) == []
    assert _rows(cached_entry_points(GROUP)) == _from_metadata(GROUP)


def test_a_damaged_or_foreign_file_is_a_miss_and_is_rewritten(cache_dir: Path, site: Path) -> None:
    write_distribution(site, "myutils-ext-cachec", "2.0", {"cachec_mod.py": ""}, {"c": "cachec_mod"}, group=GROUP)
    expected = _from_metadata(GROUP)
    cached_entry_points(GROUP)
    (written,) = _cache_files(cache_dir)
    for damage in ("{not json", json.dumps({"key": "another environment"}), json.dumps([1, 2]),
                   json.dumps({**json.loads(written.read_text()), "groups": {GROUP: [["only", "two"]]}})):
        written.write_text(damage)
        assert _rows(cached_entry_points(GROUP)) == expected
        assert json.loads(written.read_text())["groups"][GROUP] == [["c", "cachec_mod", ["myutils-ext-cachec", "2.0"]]]


def test_no_cache_and_an_unwritable_folder_only_cost_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _from_metadata(ENTRY_POINT_GROUP)
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "c"))
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    assert cache.cache_dir() is None
    assert _rows(cached_entry_points(ENTRY_POINT_GROUP)) == expected
    assert not (tmp_path / "c").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "cache"))
    monkeypatch.setenv(cache.NO_CACHE_ENV, "0")
    assert _rows(cached_entry_points(ENTRY_POINT_GROUP)) == expected


def test_cache_folder_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache.cache_dir() == os.path.join("/xdg", "myutils")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", "/home/someone")
    assert cache.cache_dir() == os.path.join("/home/someone", ".cache", "myutils")


@pytest.mark.parametrize("value", ["json", "json:dumps", "json:JSONDecoder.decode", "json:dumps [extra1, extra2]",
                                   "json : dumps"])
def test_load_resolves_like_importlib_metadata(value: str) -> None:
    ours = CachedEntryPoint("x", value, GROUP).load()
    theirs = importlib.metadata.EntryPoint("x", value, GROUP).load()
    assert ours is theirs


def test_load_refuses_a_malformed_value_naming_it() -> None:
    with pytest.raises(ValueError, match="entry point 'x': 'not a module' is not of the form"):
        CachedEntryPoint("x", "not a module", GROUP).load()


def test_the_fingerprint_names_every_metadata_folder(site: Path) -> None:
    before = metadata_fingerprint([str(site)])
    write_distribution(site, "myutils-ext-cached", "1.0", {"cached_mod.py": ""}, {"d": "cached_mod"}, group=GROUP)
    after = metadata_fingerprint([str(site)])
    assert before == [str(site)] and after[0] == str(site)
    assert len(after) == 2 and after[1].startswith("\tmyutils_ext_cached-1.0.dist-info\0")
    missing = str(site / "absent")
    assert metadata_fingerprint([missing]) == [f"{missing}\0-"]


def test_a_start_that_hits_imports_no_importlib_metadata(tmp_path: Path) -> None:
    env = {**os.environ, cache.CACHE_DIR_ENV: str(tmp_path / "c")}
    env.pop(cache.NO_CACHE_ENV, None)
    code = ("import sys\nfrom my_utils.core.entry_point_cache import cached_entry_points\n"
            "eps = cached_entry_points('my_utils.plugins')\n"
            "print(len(eps), 'importlib.metadata' in sys.modules)\n")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    count, imported = first.stdout.split()
    assert int(count) >= 1 and imported == "True"  # the miss read the metadata
    assert second.stdout.split() == [count, "False"]


def test_a_reused_fingerprint_is_taken_until_withdrawn(cache_dir: Path, site: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write_distribution(site, "reuse-a", "1.0", {}, {"a": "mod_a:plugin"}, group=GROUP)
    prints = metadata_fingerprint()
    calls: list[int] = []
    real = cache.metadata_fingerprint
    monkeypatch.setattr(cache, "metadata_fingerprint", lambda paths=None: calls.append(1) or real(paths))
    cache.reuse_fingerprint(prints)
    try:
        assert [ep.name for ep in cached_entry_points(GROUP)] == ["a"] and calls == []
        # a distribution installed after the fingerprint was taken: this command keeps its start's answer
        write_distribution(site, "reuse-b", "1.0", {}, {"b": "mod_b:plugin"}, group=GROUP)
        assert [ep.name for ep in cached_entry_points(GROUP)] == ["a"] and calls == []
    finally:
        cache.reuse_fingerprint(None)
    assert sorted(ep.name for ep in cached_entry_points(GROUP)) == ["a", "b"] and calls == [1]


_COUNT_FINGERPRINTS = """
import sys
from my_utils.core import entry_point_cache as cache
calls = []
real = cache.metadata_fingerprint
cache.metadata_fingerprint = lambda paths=None: calls.append(1) or real(paths)
sys.argv = ["myutils", "plugins", "list"]
try:
    from my_utils.core.cli import entry
    entry.main()
except SystemExit as exc:  # typer ends its run so
    assert exc.code in (0, None), exc.code
finally:
    sys.stderr.write(f"FINGERPRINTS {len(calls)} LEFT {cache._reused is not None}\\n")
"""


def test_a_cli_command_takes_the_fingerprint_once_and_withdraws_it(cache_dir: Path) -> None:
    # in a child: the CLI switches process-wide settings (plugin output to stderr, quiet warnings)
    for _ in range(2):  # the first records the start (under typer), the second answers from the record
        proc = subprocess.run([sys.executable, "-c", _COUNT_FINGERPRINTS], capture_output=True, text=True,
                              env={**os.environ, cache.CACHE_DIR_ENV: str(cache_dir)}, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "torch_profiler" in proc.stdout
        assert "FINGERPRINTS 1 LEFT False" in proc.stderr, proc.stderr[-2000:]
