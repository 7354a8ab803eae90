"""Repository-wide pytest fixtures: where the shared real fixtures and recipes live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (where README.md and packages/ live)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """``../shared/fixtures/real``: files written by other tools; skip when absent."""
    path = SHARED_DIR / "fixtures" / "real"
    if not path.is_dir():
        pytest.skip(f"real fixtures not found at {path}: the ../shared folder is absent in this checkout")
    return path


@pytest.fixture(scope="session")
def shared_recipes() -> Path:
    """``../shared/recipes``: tested ways to run real components (NVTX injection, NVML stub...)."""
    path = SHARED_DIR / "recipes"
    if not path.is_dir():
        pytest.skip(f"recipes not found at {path}: the ../shared folder is absent in this checkout")
    return path


HEAVY_MODULES = ("torch", "numpy", "pandas", "plotly")


def _check_distribution(name: str) -> None:
    """Assert the packaging promises of ``myutils-<name>``: one version, its plugin, light import."""
    import importlib
    import importlib.metadata
    import subprocess
    import sys

    dist = importlib.metadata.distribution(f"myutils-{name}")
    version_module = importlib.import_module(f"my_utils.{name}._version")
    assert dist.version == version_module.__version__
    eps = [ep for ep in dist.entry_points if ep.group == "my_utils.plugins"]
    assert [(ep.name, ep.value) for ep in eps] == [(name, f"my_utils.{name}.plugin")]
    assert eps[0].load() is importlib.import_module(f"my_utils.{name}.plugin")
    code = (
        f"import sys, my_utils.{name}, my_utils.{name}.plugin; "
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"import my_utils.{name} pulled in {out.stdout.strip()}"


@pytest.fixture(scope="session")
def check_distribution():  # type: ignore[no-untyped-def]
    """A function asserting the packaging promises of one distribution (see ``_check_distribution``)."""
    return _check_distribution


def _cuda_available() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, f"no CUDA GPU (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return True, ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip hardware- and service-bound tests with a reason where the machine lacks them."""
    import shutil

    checks = {
        "etcd": lambda: (shutil.which("etcd") is not None, "the etcd server binary is not on PATH "
                         "(apt-get install etcd-server; .ci/run installs it)"),
        "browser": lambda: (any(shutil.which(b) for b in ("chromium", "chromium-browser")),
                            "headless Chromium is not installed (apt-get install chromium; .ci/run installs it)"),
        "cuda": _cuda_available,
    }
    verdicts: dict[str, tuple[bool, str]] = {}
    for item in items:
        for marker, check in checks.items():
            if item.get_closest_marker(marker) is None:
                continue
            if marker not in verdicts:
                verdicts[marker] = check()
            ok, reason = verdicts[marker]
            if not ok:
                item.add_marker(pytest.mark.skip(reason=f"[{marker}] {reason}"))
