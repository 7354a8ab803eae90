"""Seed top-level names and flat legacy modules resolve lazily to their new homes."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import subprocess
import sys

import pytest

import my_utils
from my_utils.core import _legacy
from my_utils.core._legacy import LEGACY_MODULES, LEGACY_NAMES


def _home_built(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _hint(dist: str) -> str:
    """The pip command a missing home module must name, given whether ``dist`` is installed."""
    return f"pip install --upgrade {dist}" if _legacy._dist_installed(dist) else f"pip install {dist}"


@pytest.mark.parametrize("flat", sorted(LEGACY_MODULES))
def test_flat_module_is_its_home(flat: str) -> None:
    """A built home is the flat module itself; a missing one (skeleton or absent dist) names the dist."""
    home, dist = LEGACY_MODULES[flat]
    if not _home_built(home):
        with pytest.raises(ImportError, match=f"my_utils.{flat} now lives in {home}.*Run: {_hint(dist)}$"):
            importlib.import_module(f"my_utils.{flat}")
        assert f"my_utils.{flat}" not in sys.modules
        return
    legacy = importlib.import_module(f"my_utils.{flat}")
    assert legacy is importlib.import_module(home)
    assert getattr(my_utils, flat) is legacy


@pytest.mark.parametrize("name", sorted(LEGACY_NAMES))
def test_top_level_name_resolves(name: str) -> None:
    home, dist = LEGACY_NAMES[name]
    if not _home_built(home):  # a skeleton or absent distribution: hasattr answers, the error names it
        assert hasattr(my_utils, name) is False
        assert getattr(my_utils, name, None) is None
        with pytest.raises(AttributeError, match=f"now lives in {home}.*Run: {_hint(dist)}$"):
            getattr(my_utils, name)
        with pytest.raises(ImportError, match=f"my_utils.{name} now lives in {home}.*Run: {_hint(dist)}$"):
            __import__("my_utils", fromlist=[name])
        return
    assert hasattr(my_utils, name)
    assert getattr(my_utils, name) is getattr(importlib.import_module(home), name)
    assert name in dir(my_utils)


def test_unknown_name_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        my_utils.no_such_thing  # noqa: B018
    assert not hasattr(my_utils, "no_such_thing")


def test_missing_distribution_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LEGACY_NAMES, "FakeThing", ("my_utils.fakehome.module", "myutils-fakehome"))
    message = ("my_utils.FakeThing now lives in my_utils.fakehome.module, shipped by the 'myutils-fakehome' "
               "distribution, which is not installed. Run: pip install myutils-fakehome")
    with pytest.raises(ImportError) as info:
        _legacy.resolve_legacy_name("FakeThing")
    assert str(info.value) == message
    assert "FakeThing" not in _legacy.available_legacy_names()
    # hasattr answers (pitfall P6: an ImportError from __getattr__ made it raise)
    assert hasattr(my_utils, "FakeThing") is False
    with pytest.raises(AttributeError) as attr_info:
        my_utils.FakeThing  # noqa: B018
    assert str(attr_info.value) == message and isinstance(attr_info.value.__cause__, ImportError)
    with pytest.raises(ImportError) as from_info:
        from my_utils import FakeThing  # noqa: F401
    assert str(from_info.value) == message  # not CPython's bare "cannot import name"
    assert dict(inspect.getmembers(my_utils)).get("FakeThing") is None


def test_installed_distribution_lacking_the_module_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed release without the home module (a skeleton, an old version) says what to upgrade."""
    monkeypatch.setitem(LEGACY_NAMES, "Ghost", ("my_utils.core.no_such_module", "myutils-core"))
    version = importlib.metadata.version("myutils-core")
    message = (f"my_utils.Ghost now lives in my_utils.core.no_such_module, which the installed 'myutils-core' "
               f"{version} does not ship (a release without it). Run: pip install --upgrade myutils-core")
    with pytest.raises(ImportError) as info:
        from my_utils import Ghost  # noqa: F401
    assert str(info.value) == message
    assert not hasattr(my_utils, "Ghost")


def test_missing_torch_is_not_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a missing home gets the pip hint; other import errors surface unchanged (hasattr still answers)."""
    monkeypatch.setitem(LEGACY_NAMES, "Thing", ("my_utils.core.home_needing_torch", "myutils-core"))

    def fake_import(name: str) -> object:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(_legacy.importlib, "import_module", fake_import)
    with pytest.raises(ModuleNotFoundError, match="No module named 'torch'") as info:
        _legacy.resolve_legacy_name("Thing")
    assert "pip install" not in str(info.value)
    assert hasattr(my_utils, "Thing") is False
    with pytest.raises(ModuleNotFoundError, match=r"^No module named 'torch'$"):
        from my_utils import Thing  # noqa: F401


def test_import_my_utils_has_no_side_effects() -> None:
    code = (
        "import sys, my_utils; "
        "print(sorted(m for m in sys.modules if m.startswith('my_utils')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['my_utils']"


def test_dir_lists_installed_names_without_importing() -> None:
    code = (
        "import sys, my_utils; names = dir(my_utils); "
        "print('MyTimer' in names, 'create_labeler' in names, "
        "sorted(m for m in sys.modules if m.startswith('my_utils.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    tracing = _legacy._dist_installed("myutils-tracing")  # absent in `nox -s isolated(member='core')`
    assert out.stdout.strip() == (
        f"True {tracing} ['my_utils.core', 'my_utils.core._legacy', 'my_utils.core._version', 'my_utils.core.lazy']"
    )
