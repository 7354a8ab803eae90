"""Built wheels: what each distribution ships, and what `pip install myutils-tracing` gives.

Only myutils-core ships files directly in ``my_utils/``; every other distribution ships
exactly ``my_utils/<name>/`` (the namespace rule in the root README, "Installing parts"). torch is never a hard dependency.
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
NAMES = ["core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy"]
FLAT_MODULES = {
    "utils", "logger", "nvtx_utils", "moduleProfiler", "profilerwrapper", "memory_snapshot",
    "gpu_mem_tracker", "DITProfiler", "clockSyncUtils", "legacy_profilers",
}
HEAVY = {"torch", "numpy", "pandas", "plotly"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    for name in NAMES:
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
             str(REPO / "packages" / f"myutils-{name}")],
            check=True, capture_output=True, text=True, timeout=300,
        )
    return out


def _wheel(wheelhouse: Path, name: str) -> zipfile.ZipFile:
    (path,) = wheelhouse.glob(f"myutils_{name}-*.whl")
    return zipfile.ZipFile(path)


def _metadata(zf: zipfile.ZipFile) -> tuple[list[str], list[str]]:
    meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(zf.read(meta_name).decode())
    files = [n for n in zf.namelist() if ".dist-info/" not in n]
    return files, msg.get_all("Requires-Dist") or []


def test_core_owns_the_namespace_root(wheelhouse: Path) -> None:
    files, _ = _metadata(_wheel(wheelhouse, "core"))
    root_files = {Path(f).name for f in files if f.count("/") == 1}
    assert root_files == {"__init__.py", "py.typed"} | {f"{m}.py" for m in FLAT_MODULES}
    assert all(f.startswith("my_utils/") for f in files)
    assert "my_utils/core/py.typed" in files or "my_utils/py.typed" in files
    assert "my_utils/core/plugins.py" in files and "my_utils/core/cli/app.py" in files


@pytest.mark.parametrize("name", [n for n in NAMES if n != "core"])
def test_other_distributions_ship_one_subpackage(wheelhouse: Path, name: str) -> None:
    files, _ = _metadata(_wheel(wheelhouse, name))
    assert files, f"myutils-{name} wheel is empty"
    outside = [f for f in files if not f.startswith(f"my_utils/{name}/")]
    assert outside == [], f"myutils-{name} ships files outside my_utils/{name}/: {outside}"
    assert f"my_utils/{name}/py.typed" in files and f"my_utils/{name}/plugin.py" in files


@pytest.mark.parametrize("name", NAMES)
def test_no_heavy_hard_dependency(wheelhouse: Path, name: str) -> None:
    _, requires = _metadata(_wheel(wheelhouse, name))
    unconditional = {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower()
                     for r in requires if "extra ==" not in r}
    assert "torch" not in unconditional
    if name in ("core", "tracing", "distributed", "memory"):
        assert not unconditional & HEAVY, f"myutils-{name} hard-depends on {unconditional & HEAVY}"
    assert any(r.startswith("torch") and r.replace('"', "'").endswith("extra == 'torch'") for r in requires)


def test_pip_install_one_part(wheelhouse: Path, tmp_path: Path, index_unreachable: Any) -> None:
    """A fresh venv (no system site) installs tracing + core only, nothing heavy.

    The third-party requirements come from the package index; the test skips only when none
    answered. A my_utils requirement no wheel satisfies (a wrongly declared dependency) fails.
    """
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--find-links", str(wheelhouse), "myutils-tracing"],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0 and (reason := index_unreachable(proc.stderr)):
        pytest.skip(f"pip install myutils-tracing: {reason}")
    assert proc.returncode == 0, proc.stderr
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert {"myutils-core", "myutils-tracing"} <= installed
    assert not installed & (HEAVY | {"myutils-hooks", "myutils-profiling"})
    code = (
        "import my_utils\n"
        "try:\n    from my_utils import ForwardProfilerHook\nexcept ImportError as e:\n    print(e)\n"
        "try:\n    import my_utils.moduleProfiler\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Run: pip install myutils-hooks" in out.splitlines()[0]
    assert out.splitlines()[1].startswith("my_utils.moduleProfiler now lives in my_utils.hooks.module_profiler")
    cli = subprocess.run([str(env_dir / "bin" / "myutils"), "--version"], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout.split() == ["myutils-core", "0.1.0", "myutils-tracing", "0.1.0"]


def test_umbrella_offers_the_seed_extras(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(zf.read(meta_name).decode())
    assert msg["Name"] not in ("myutils", "my-utils", "my_utils")  # taken on PyPI by other projects
    extras = set(msg.get_all("Provides-Extra") or [])
    assert extras == {"profiling", "tensordict", "etcd", "nvml", "nvtx", "system", "megatron", "torch", "all",
                      "all-with-torch"}
    requires = msg.get_all("Requires-Dist") or []
    members = {r.split(" @ ")[0] for r in requires if " @ " in r}
    assert members == {f"myutils-{n}" for n in NAMES}
    assert not [r for r in requires if r.startswith("torch") and "extra == 'all'" in r.replace('"', "'")]
    assert [r for r in requires if r.startswith("torch") and "extra == 'all-with-torch'" in r.replace('"', "'")]


def test_profiling_wheel_carries_the_compiled_scanner(wheelhouse: Path) -> None:
    # compilers and Python.h are on every machine this suite runs on (README): the build hook compiles
    (path,) = wheelhouse.glob("myutils_profiling-*.whl")
    assert not path.name.endswith("-none-any.whl"), f"{path.name}: a pure-Python tag on a wheel with a C module"
    modules = [n for n in zipfile.ZipFile(path).namelist() if Path(n).name.startswith("_kineto_scan.")]
    assert len(modules) == 1 and modules[0].startswith("my_utils/profiling/kineto/read/") and \
        modules[0].endswith((".so", ".pyd")), modules


def test_profiling_wheel_without_a_compiler_is_pure_python(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "MYUTILS_NO_COMPILE": "1"}
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
                    str(REPO / "packages" / "myutils-profiling")], check=True, capture_output=True, text=True,
                   timeout=300, env=env)
    (path,) = tmp_path.glob("myutils_profiling-*.whl")
    assert path.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(path).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert "my_utils/profiling/kineto/read/scan.py" in names  # the pure path says the scanner is absent


def test_the_dist_session_gives_a_folder_one_part_installs_from(tmp_path: Path, index_unreachable: Any,
                                                                 real_fixtures: Any) -> None:
    """`nox -s dist -- FOLDER` then `pip install --find-links FOLDER myutils-profiling` in a fresh venv (the root
    README's "Installing one part"): core and profiling only, and the installed command analyses a real trace.

    Before the session, `pip install myutils-profiling` from a checkout failed: myutils-core is on no index.
    """
    folder = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "nox", "-s", "dist", "--", str(folder)], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0 and (reason := index_unreachable(proc.stdout + proc.stderr)):
        pytest.skip(f"nox -s dist: {reason}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name.split("-")[0] for p in folder.glob("*.whl")) == sorted(f"myutils_{n}" for n in NAMES)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--find-links", str(folder), "myutils-profiling"], capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0 and (reason := index_unreachable(proc.stderr)):
        pytest.skip(f"pip install myutils-profiling: {reason}")
    assert proc.returncode == 0, proc.stderr
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.lower()
    mine = {line.split("==")[0] for line in listed.splitlines() if line.startswith("myutils")}
    assert mine == {"myutils-core", "myutils-profiling"}
    trace = real_fixtures / "kineto/hta/trace_filter__sampled_rank-0.json.gz"
    out = tmp_path / "out"
    run = subprocess.run([str(env_dir / "bin" / "myutils-profile"), "analyze", str(trace), "--output-dir", str(out),
                          "-q", "--formats", "json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert (out / "analysis_report.json").is_file()
