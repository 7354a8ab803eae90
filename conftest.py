"""Repository-wide pytest fixtures: the real third-party files (via the registry) and the shared recipes."""

from __future__ import annotations

import importlib.util
import os
import posixpath
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parent
SHARED_DIR = REPO_ROOT.parent / "shared"
REAL_FIXTURES_MODULE = REPO_ROOT / "fixtures" / "real_fixtures.py"
#: set by .ci/run, where ../shared (fixtures/real, recipes) is present: a test that would skip for want of a
#: real fixture, a shared recipe or the HTA anchor its comparison needs fails instead, naming what is missing
REQUIRE_ENV = "MYUTILS_REQUIRE_REAL_FIXTURES"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C acts in the commands the tests start, also when this run is a background job.

    A shell starts a background job (``pytest ... &``) with SIGINT ignored, and an ignored signal
    stays ignored across ``exec``: the commands the tests interrupt on purpose (the crash matrices,
    the signal tests) then ran to their end. A handler here is reset to the default in each child.
    """
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def real_fixtures_required() -> bool:
    """Whether ``$MYUTILS_REQUIRE_REAL_FIXTURES`` turns "unavailable" from a skip into a failure."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def skip_or_fail_unavailable(message: str) -> NoReturn:
    """Skip with ``message`` (a newcomer's clone), or fail with it where CI requires the real inputs."""
    if real_fixtures_required():
        pytest.fail(f"{message} [{REQUIRE_ENV}=1: CI has the real fixtures and the HTA environment, "
                    "so this may not skip]", pytrace=False)
    pytest.skip(message)


def load_real_fixtures_module() -> ModuleType:
    """``fixtures/real_fixtures.py`` (not a package: loaded by file path, once per process)."""
    name = "myutils_real_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REAL_FIXTURES_MODULE)
        assert spec is not None and spec.loader is not None, REAL_FIXTURES_MODULE
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class RealFixtures:
    """The registry's real files: ``real_fixtures / "kineto/hta/x.json.gz"`` is a local ``Path``.

    A file is fetched when a test names it (mirror, cache, download: see fixtures/real_fixtures.py);
    unavailable -> the test skips saying which file, where it looked and why (it fails instead when
    ``$MYUTILS_REQUIRE_REAL_FIXTURES=1``, as in CI); a copy with the wrong sha256 -> the test
    fails. ``real_fixtures / "kineto"`` is the folder prefix (``/`` again
    names a file in it); :meth:`names` lists registry paths without fetching anything.
    """

    def __init__(self, module: ModuleType, prefix: str = "") -> None:
        self._module = module
        self._prefix = prefix

    def __repr__(self) -> str:
        return f"RealFixtures({self._prefix or '.'!r})"

    @staticmethod
    def unavailable(message: str) -> NoReturn:
        """A real input this test needs is missing (``message`` names it): skip, or fail where CI requires it."""
        skip_or_fail_unavailable(message)

    def names(self, prefix: str = "") -> list[str]:
        """Registry paths (relative to ``fixtures/real``) under this folder that start with ``prefix``."""
        start = posixpath.join(self._prefix, prefix) if self._prefix else prefix
        return list(self._module.names(start))

    def __truediv__(self, part: str | os.PathLike[str]) -> Path | RealFixtures:
        relpath = posixpath.normpath(posixpath.join(self._prefix, os.fspath(part)))
        if self._module.names(relpath + "/"):
            return RealFixtures(self._module, relpath)
        try:
            return Path(self._module.fetch(relpath))
        except self._module.FixtureUnavailable as exc:
            missing = f"real fixture {relpath} unavailable: {exc}"
        except self._module.FixtureHashMismatch as exc:
            pytest.fail(f"real fixture {relpath}: {exc}", pytrace=False)
        self.unavailable(missing)  # outside the except: the report is this one line, not a chain


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (where README.md and packages/ live)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def real_fixtures() -> RealFixtures:
    """The real third-party files of ``fixtures/registry.toml``, fetched lazily (see :class:`RealFixtures`)."""
    return RealFixtures(load_real_fixtures_module())


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh empty folder with a short path (``/tmp/mu-XXXXXXXX``), removed after the test.

    For ``$TMPDIR`` of a command that starts a multiprocessing fork server or a local Dask cluster:
    the server's unix socket lives in ``$TMPDIR``, and a socket's path holds at most 107 bytes.
    ``tmp_path`` is ``/tmp/pytest-of-<user>/pytest-<n>/<test name, 30 characters>``, and 10
    characters longer under pytest-xdist (``popen-gw<n>/``): enough to pass that limit
    ("AF_UNIX path too long").
    """
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="mu-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_recipes() -> Path:
    """``../shared/recipes``: tested ways to run real components (NVTX injection, NVML stub...)."""
    path = SHARED_DIR / "recipes"
    if not path.is_dir():
        skip_or_fail_unavailable(f"recipes not found at {path}: the ../shared folder is absent in this checkout")
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


# pip's words for "the package index did not answer" (urllib3/requests errors it logs while retrying)
_NO_INDEX = re.compile(r"NewConnectionError|Failed to establish a new connection|Name or service not known|"
                       r"Temporary failure in name resolution|Network is unreachable|Connection refused|"
                       r"ConnectTimeoutError|ReadTimeoutError|ProxyError|Max retries exceeded")
_NOT_FOUND = re.compile(r"Could not find a version that satisfies the requirement (\S+)")


def pip_index_unreachable(stderr: str) -> str | None:
    """Why pip failed for want of a package index, or ``None`` when its failure is anything else.

    A test that needs the index may skip on this reason only. "Could not find a version" alone is
    no proof of it: pip says the same for a requirement no release satisfies (a wrongly declared
    dependency), and a dependency conflict (ResolutionImpossible) is never the network. So: pip
    must have logged a connection error, failed to find some requirement, and that requirement is
    no my_utils distribution (those come from the repository or its wheels, never the index).
    pip logs the connection error while it retries (5 times by default; ``--retries 0`` or ``-qq``
    silence it, and then a failure is reported as one).
    """
    if "ResolutionImpossible" in stderr or "conflicting dependencies" in stderr:
        return None
    network = _NO_INDEX.search(stderr)
    missing = _NOT_FOUND.findall(stderr)
    if network is None or not missing:
        return None
    if any(re.match(r"myutils[-_.]", name, re.IGNORECASE) for name in missing):
        return None
    return f"no package index answered ({network[0]}), so pip could not get {', '.join(sorted(set(missing)))}"


@pytest.fixture(scope="session")
def index_unreachable():  # type: ignore[no-untyped-def]
    """:func:`pip_index_unreachable`: the one reason a pip-driven test may skip."""
    return pip_index_unreachable


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


HTA_MISSING = ("[hta] Holistic Trace Analysis (the `hta` package) is not installed here: it is a bench anchor, "
               "not a test requirement (pip install -r bench/requirements.txt); .ci/run runs these tests in .venv-hta")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """``hta``-marked tests compare with Holistic Trace Analysis: skip where it is absent, fail where CI needs it."""
    if item.get_closest_marker("hta") is not None:
        import importlib.util

        if importlib.util.find_spec("hta") is None:
            skip_or_fail_unavailable(HTA_MISSING)


#: scopes whose fixture instance is shared by the tests of one module (or class, or package)
_SHARED_SCOPES = ("module", "class", "package")


def xdist_group(item: pytest.Item) -> str | None:
    """The worker group of ``item`` under ``pytest -n N --dist loadgroup`` (README's test command), or None.

    Tests run on any worker unless they share something costly or exclusive:
    - ``browser`` tests share one headless Chromium (the session fixture ``chromium``): one worker
      starts it once, instead of one browser per worker;
    - a test that uses a module-, class- or package-scoped fixture, or a session-scoped one its own
      module defines (a venv, a demo run, a cluster), runs beside the other tests of its module, so
      the fixture is built once, not once per worker.
    Anything else a test shares (a port, a folder, the cwd, the environment) is its own and safe in
    parallel: ports are free ones, folders come from ``tmp_path``, and the rest is per process.
    """
    if item.get_closest_marker("browser") is not None:
        return "browser"
    module = item.nodeid.split("::", 1)[0]
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if not defs:
            continue
        fixture = defs[-1]  # the definition this test gets (the closest one)
        if fixture.scope in _SHARED_SCOPES or (fixture.scope == "session" and fixture.baseid == module):
            return module
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its worker hook turns them into node ids)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip hardware- and service-bound tests with a reason where the machine lacks them; group for xdist."""
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            group = xdist_group(item)
            if group is not None and item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(group))
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # xdist hands out work in this order (groups first, the largest first): the slow tests of no
            # group start early, so that the run does not end with one worker busy on a long test. The
            # same order on every worker (a stable sort), as xdist requires
            items.sort(key=lambda item: item.get_closest_marker("slow") is None
                       or item.get_closest_marker("xdist_group") is not None)
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
