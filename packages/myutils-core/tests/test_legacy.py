"""Seed top-level names and flat legacy modules resolve lazily to their new homes."""

from __future__ import annotations

import importlib
import importlib.util
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


@pytest.mark.parametrize("flat", sorted(LEGACY_MODULES))
def test_flat_module_is_its_home(flat: str) -> None:
    home, dist = LEGACY_MODULES[flat]
    if not _home_built(home):
        pytest.skip(f"{home} ({dist}) is not built in this checkout yet")
    legacy = importlib.import_module(f"my_utils.{flat}")
    assert legacy is importlib.import_module(home)
    assert getattr(my_utils, flat) is legacy


@pytest.mark.parametrize("name", sorted(LEGACY_NAMES))
def test_top_level_name_resolves(name: str) -> None:
    home, dist = LEGACY_NAMES[name]
    if not _home_built(home):
        pytest.skip(f"{home} ({dist}) is not built in this checkout yet")
    assert getattr(my_utils, name) is getattr(importlib.import_module(home), name)
    assert name in dir(my_utils)


def test_unknown_name_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        my_utils.no_such_thing  # noqa: B018
    assert not hasattr(my_utils, "no_such_thing")


def test_missing_distribution_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LEGACY_NAMES, "FakeThing", ("my_utils.fakehome.module", "myutils-fakehome"))
    with pytest.raises(ImportError) as info:
        _legacy.resolve_legacy_name("FakeThing")
    assert str(info.value) == (
        "my_utils.FakeThing now lives in my_utils.fakehome.module, shipped by the 'myutils-fakehome' "
        "distribution, which is not installed. Run: pip install myutils-fakehome"
    )
    assert "FakeThing" not in _legacy.available_legacy_names()


def test_missing_torch_is_not_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only an absent distribution gets the pip hint; other import errors surface unchanged."""
    monkeypatch.setitem(LEGACY_NAMES, "Thing", ("my_utils.core.home_needing_torch", "myutils-core"))

    def fake_import(name: str) -> object:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(_legacy.importlib, "import_module", fake_import)
    with pytest.raises(ModuleNotFoundError, match="No module named 'torch'") as info:
        _legacy.resolve_legacy_name("Thing")
    assert "pip install" not in str(info.value)


def test_installed_dist_with_missing_module_is_not_misreported(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution lacking the module is a bug to surface, not a pip hint."""
    monkeypatch.setitem(LEGACY_NAMES, "Ghost", ("my_utils.core.no_such_module", "myutils-core"))
    with pytest.raises(ModuleNotFoundError) as info:
        _legacy.resolve_legacy_name("Ghost")
    assert "pip install" not in str(info.value)


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
