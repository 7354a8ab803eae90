"""The repository contract: README's commands, .ci/run, and the CLI commands the README shows."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import venv
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def _readme_commands() -> list[str]:
    block = README.split("## The two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


VENV_GUARD = "test -x .venv/bin/python || python3 -m venv .venv"


def test_readme_has_exactly_two_setup_commands() -> None:
    setup_and_demo, tests = _readme_commands()
    assert "requirements-dev.txt" in setup_and_demo and "unified_metrics_demo" in setup_and_demo
    # in parallel: one xdist worker per CPU, tests sharing a costly or exclusive fixture kept together (conftest.py)
    assert tests.endswith(" && .venv/bin/python -m pytest -n auto --dist loadgroup")


@pytest.mark.parametrize("index", [0, 1])
def test_readme_commands_make_and_use_the_repo_venv(index: int) -> None:
    """A PEP 668 python3 refuses system-wide installs: every step after the guard runs .venv's python."""
    command = _readme_commands()[index]
    assert command.startswith(VENV_GUARD + " && ")
    steps = command.removeprefix(VENV_GUARD + " && ").split(" && ")
    assert steps[0] == ".venv/bin/python -m pip install -r requirements-dev.txt"
    assert all(step.startswith(".venv/bin/python -m ") for step in steps), steps


def _run_guard(cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(["bash", "-c", VENV_GUARD], cwd=cwd, env=env, check=True, capture_output=True, timeout=300)


@pytest.mark.slow
def test_venv_guard_creates_once_and_ignores_an_active_venv(tmp_path: Path) -> None:
    """Run as written from a shell whose active venv is another one: .venv is made once, then reused."""
    other = tmp_path / "other-venv"
    venv.EnvBuilder(with_pip=False).create(other)
    repo = tmp_path / "clone"
    repo.mkdir()
    env = {**os.environ, "VIRTUAL_ENV": str(other), "PATH": f"{other / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    _run_guard(repo, env)
    cfg = repo / ".venv" / "pyvenv.cfg"
    assert (repo / ".venv" / "bin" / "python").is_file() and cfg.is_file()
    first = cfg.stat().st_mtime_ns
    _run_guard(repo, env)
    assert cfg.stat().st_mtime_ns == first  # reused, not rebuilt
    out = subprocess.run([str(repo / ".venv/bin/python"), "-c", "import sys; print(sys.prefix)"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out) == repo / ".venv"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """.ci/run holds the README's test command as written, runs it, and fails when it fails."""
    ci = (REPO / ".ci" / "run").read_text()
    body = re.search(r"^readme_test_command\(\) \{\n(.*)\n\}$", ci, re.MULTILINE)
    assert body is not None and body[1] == _readme_commands()[1], ci
    calls = [line for line in ci.splitlines() if re.search(r"\breadme_test_command\b(?!\(\))", line)]
    assert calls == ["PYTEST_ADDOPTS=\"-m 'not hta'\" readme_test_command || failed=1"], calls
    assert ci.splitlines()[-1] == 'exit "$failed"'


def _requirement_files() -> list[Path]:
    """The project's requirements*.txt, not those of installed packages (.venv, .nox, build folders)."""
    found = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "site-packages", "node_modules")]
        found += [Path(folder) / f for f in files if f.startswith("requirements") and f.endswith(".txt")]
    return found


def test_requirements_pin_torch_exactly() -> None:
    pins = [line for path in _requirement_files() for line in path.read_text().splitlines()
            if re.match(r"\s*torch\b", line)]
    assert pins and all(line.strip() == "torch==2.13.0" for line in pins), pins


@pytest.mark.parametrize(
    "command",
    [line.split("#")[0].strip() for line in
     README.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0].splitlines()
     if line.strip()],
)
def test_readme_cli_commands_exist(command: str) -> None:
    words = [w for w in shlex.split(command) if not w.startswith("[") and w.upper() != w]
    program, *sub = [w for w in words if not w.startswith("--")]
    module = {"myutils": "my_utils.core", "myutils-profile": "my_utils.profiling.cli"}[program]
    runner = ["-m", module] if program == "myutils" else ["-c", f"import {module} as m; m.main()"]
    proc = subprocess.run([sys.executable, *runner, *sub, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout


# --- the registry of real third-party fixtures (fixtures/registry.toml + fixtures/real_fixtures.py) ---

def _fixtures_module() -> ModuleType:
    """``fixtures/real_fixtures.py``, loaded by file path under the name the root conftest uses."""
    name = "myutils_real_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "fixtures" / "real_fixtures.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def rf(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The registry module with a clean per-process memory (verified copies, unreachable hosts)."""
    module = _fixtures_module()
    monkeypatch.setattr(module, "_VERIFIED", set())
    monkeypatch.setattr(module, "_UNREACHABLE", {})
    return module


def _registry(tmp_path: Path, files: dict[str, tuple[str, bytes]]) -> Path:
    """A registry TOML naming ``files`` (relpath -> (url, content whose sha256 is recorded))."""
    lines = []
    for relpath, (url, content) in files.items():
        lines += [f'[files."{relpath}"]', f'url = "{url}"', f'sha256 = "{hashlib.sha256(content).hexdigest()}"',
                  'license = "MIT"', 'source = "T"', f"size = {len(content)}", ""]
    path = tmp_path / "registry.toml"
    path.write_text("\n".join(lines))
    return path


def test_registry_names_every_real_file_with_a_pinned_source(rf: ModuleType) -> None:
    import tomllib

    data = tomllib.loads((REPO / "fixtures" / "registry.toml").read_text())
    sources = data["sources"]
    names = rf.names()
    assert len(names) == 50 and names == sorted(data["files"])
    assert {n.split("/")[0] for n in names} == {"kineto", "ncu", "nsys", "cprofile", "nccl", "perf", "memory"}
    for name in names:
        item = rf.entry(name)
        source = sources[item.source]
        prefix = f"https://raw.githubusercontent.com/{source['repo']}/"
        assert item.url.startswith(prefix), (name, item.url)
        commit = item.url.removeprefix(prefix).split("/", 1)[0]
        assert re.fullmatch(r"[0-9a-f]{40}", commit) and (commit == source["commit"] or commit in source["note"])
        assert re.fullmatch(r"[0-9a-f]{64}", item.sha256) and item.size > 0
        assert item.license == source["license"]
    unlicensed = {rf.entry(n).source for n in names if rf.entry(n).license == "NONE"}
    assert unlicensed == {"AI4", "DSL", "NTR", "EOR"} and all("no licence" in sources[s]["note"] for s in unlicensed)
    assert rf.names("nsys/") == [n for n in names if n.startswith("nsys/")]


def test_unknown_name_says_where_to_add_it(rf: ModuleType) -> None:
    with pytest.raises(KeyError, match=r"'kineto/nope\.json' is not listed in .*registry\.toml; add it there"):
        rf.fetch("kineto/nope.json")


def test_mirror_hit_needs_no_cache_or_network(rf: ModuleType, tmp_path: Path) -> None:
    content = b"real bytes\n"
    registry = _registry(tmp_path, {"kineto/a.json": ("http://127.0.0.1:9/a.json", content)})
    (tmp_path / "mirror" / "kineto").mkdir(parents=True)
    (tmp_path / "mirror" / "kineto" / "a.json").write_bytes(content)
    got = rf.fetch("kineto/a.json", registry=registry, mirror=tmp_path / "mirror", cache=tmp_path / "cache")
    assert got == tmp_path / "mirror" / "kineto" / "a.json"
    assert not (tmp_path / "cache").exists()


def test_wrong_hash_in_the_mirror_is_an_error(rf: ModuleType, tmp_path: Path) -> None:
    registry = _registry(tmp_path, {"ncu/b.csv": ("http://127.0.0.1:9/b.csv", b"good")})
    (tmp_path / "mirror" / "ncu").mkdir(parents=True)
    (tmp_path / "mirror" / "ncu" / "b.csv").write_bytes(b"damaged")
    with pytest.raises(rf.FixtureHashMismatch, match=r"b\.csv: sha256 [0-9a-f]{64} differs from .*replace it with "
                       r"http://127\.0\.0\.1:9/b\.csv"):
        rf.fetch("ncu/b.csv", registry=registry, mirror=tmp_path / "mirror", cache=tmp_path / "cache")


def test_absent_mirror_and_no_network_is_unavailable_with_the_reason(rf: ModuleType, tmp_path: Path) -> None:
    registry = _registry(tmp_path, {"nsys/c.sqlite": ("http://127.0.0.1:9/c.sqlite", b"x")})
    with pytest.raises(rf.FixtureUnavailable) as info:
        rf.fetch("nsys/c.sqlite", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache")
    reason = str(info.value)
    assert info.value.relpath == "nsys/c.sqlite" and "\n" not in reason
    assert f"not in the mirror {tmp_path / 'absent'} (no such folder), not in the cache {tmp_path / 'cache'}" in reason
    assert "the download from http://127.0.0.1:9/c.sqlite failed: " in reason
    with pytest.raises(rf.FixtureUnavailable, match="already failed in this process"):  # tried once, not per test
        rf.fetch("nsys/c.sqlite", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache")
    with pytest.raises(rf.FixtureUnavailable, match="downloads are off"):
        rf.fetch("nsys/c.sqlite", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache",
                 offline=True)


@contextlib.contextmanager
def _http_server(folder: Path) -> Iterator[str]:
    """A local HTTP server on 127.0.0.1 serving ``folder``; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_download_through_pooch_then_cache_hit(rf: ModuleType, tmp_path: Path) -> None:
    """pooch downloads from a local server into the cache (hash checked); later reads need no server."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "d.pstats").write_bytes(b"profile bytes")
    (served / "e.pstats").write_bytes(b"tampered")
    with _http_server(served) as base:
        registry = _registry(tmp_path, {"cprofile/d.pstats": (f"{base}/d.pstats", b"profile bytes"),
                                        "cprofile/e.pstats": (f"{base}/e.pstats", b"original")})
        got = rf.fetch("cprofile/d.pstats", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache")
        with pytest.raises(rf.FixtureHashMismatch, match=r"e\.pstats: the file downloaded from .* has another sha256"):
            rf.fetch("cprofile/e.pstats", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache")
    assert got == tmp_path / "cache" / "cprofile" / "d.pstats" and got.read_bytes() == b"profile bytes"
    assert not (tmp_path / "cache" / "cprofile" / "e.pstats").exists()
    again = rf.fetch("cprofile/d.pstats", registry=registry, mirror=tmp_path / "absent", cache=tmp_path / "cache")
    assert again == got  # the server is gone: this came from the cache


def test_the_pytest_fixture_skips_or_fails(real_fixtures: Any, rf: ModuleType, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``real_fixtures / name``: unavailable -> skip naming the file and places (fail where CI requires it);
    wrong hash -> fail."""
    name = "cprofile/gprof2dot__print1.pstats"
    monkeypatch.setenv("MYUTILS_REAL_FIXTURES", str(tmp_path / "nowhere"))
    monkeypatch.setenv("MYUTILS_REAL_FIXTURES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MYUTILS_REAL_FIXTURES_OFFLINE", "1")
    monkeypatch.delenv("MYUTILS_REQUIRE_REAL_FIXTURES", raising=False)  # .ci/run sets it
    assert real_fixtures.names("cprofile/") == rf.names("cprofile/")
    assert (real_fixtures / "cprofile").names() == rf.names("cprofile/")
    with pytest.raises(pytest.skip.Exception, match=f"real fixture {name} unavailable: not in the mirror "
                       f"{tmp_path / 'nowhere'} .*downloads are off"):
        real_fixtures / "cprofile" / "gprof2dot__print1.pstats"
    monkeypatch.setenv("MYUTILS_REQUIRE_REAL_FIXTURES", "1")
    with pytest.raises(pytest.fail.Exception, match=f"real fixture {name} unavailable: not in the mirror .*"
                       r"downloads are off .*\[MYUTILS_REQUIRE_REAL_FIXTURES=1: "):
        real_fixtures / "cprofile" / "gprof2dot__print1.pstats"
    monkeypatch.setenv("MYUTILS_REQUIRE_REAL_FIXTURES", "0")
    with pytest.raises(pytest.skip.Exception):
        real_fixtures / "cprofile" / "gprof2dot__print1.pstats"
    (tmp_path / "nowhere" / "cprofile").mkdir(parents=True)
    (tmp_path / "nowhere" / name).write_bytes(b"not the real profile")
    with pytest.raises(pytest.fail.Exception, match=f"real fixture {name}: .*sha256 .* differs"):
        real_fixtures / name


def test_every_registry_file_is_in_the_mirror_with_its_hash(real_fixtures: Any, rf: ModuleType) -> None:
    """Through the fixture as a test reads it: each of the 31 files is fetched and its hash checked."""
    paths = [real_fixtures / name for name in rf.names()]
    assert all(isinstance(p, Path) and p.is_file() for p in paths)
    assert sum(p.stat().st_size for p in paths) == sum(rf.entry(n).size for n in rf.names())


def test_registry_cli_lists_and_refuses_bad_use(rf: ModuleType) -> None:
    script = REPO / "fixtures" / "real_fixtures.py"
    listed = subprocess.run([sys.executable, str(script), "list"], capture_output=True, text=True, check=True)
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == rf.names()
    bad = subprocess.run([sys.executable, str(script), "fetchall"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == "usage: real_fixtures.py list | fetch [RELPATH ...]\n"


def test_no_registry_file_is_committed(rf: ModuleType) -> None:
    """The third-party files stay out of the repository (one source has no licence)."""
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout here ({proc.stderr.strip()})")
    committed = {Path(p).name for p in proc.stdout.split("\0") if p}
    assert not committed & {Path(n).name for n in rf.names()}


@pytest.mark.slow
def test_test_requirements_keep_the_torch_pin(tmp_path: Path, index_unreachable: Any) -> None:
    """pip, asked for requirements-test.txt in this environment, replaces no torch (tensordict needs one).

    A dependency conflict fails this test (that is what it is for); it skips only when pip needed
    the package index for something this environment lacks and no index answered.
    """
    if not importlib.metadata.version("torch").startswith("2.13.0"):
        pytest.skip(f"this environment has torch {importlib.metadata.version('torch')}, not the pinned 2.13.0")
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
                           "-r", str(REPO / "requirements-test.txt")], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and (reason := index_unreachable(proc.stderr)):
        pytest.skip(f"requirements-test.txt: {reason}")
    assert proc.returncode == 0, f"pip could not resolve requirements-test.txt:\n{proc.stderr[-3000:]}"
    planned = {item["metadata"]["name"].lower(): item["metadata"]["version"]
               for item in json.loads(report.read_text())["install"]}
    assert "torch" not in planned, planned
    assert importlib.metadata.version("tensordict") == "0.15.3"


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    """A minimal wheel (metadata only: pip's resolver reads nothing else in a dry run)."""
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
                 name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)


def _pip_without_index(tmp_path: Path, *args: str) -> str:
    """pip's stderr for a dry run whose only index (127.0.0.1:9) refuses connections."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no site or user configuration (find-links, other indexes)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--disable-pip-version-check",
                           "--no-cache-dir", "--retries", "1", "--timeout", "5", "--target", str(tmp_path / "t"),
                           "--index-url", "http://127.0.0.1:9/simple", *args],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


@pytest.mark.slow
def test_pip_skips_only_for_an_index_that_does_not_answer(tmp_path: Path, index_unreachable: Any) -> None:
    """Real pip failures: no index -> the reason; a conflict or a my_utils requirement nothing satisfies -> None."""
    reason = index_unreachable(_pip_without_index(tmp_path, "six"))
    assert reason is not None and reason.startswith("no package index answered (") and reason.endswith("get six")
    # a wrongly declared dependency of ours: pip also says "Could not find a version", but it is no network matter
    assert index_unreachable(_pip_without_index(tmp_path, "myutils-core>=999")) is None
    # a dependency conflict among wheels at hand, while the index is down too: the conflict decides
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "conflict_a", "1.0", ["conflict_b<1"])
    _wheel(wheels, "conflict_b", "1.0", [])
    stderr = _pip_without_index(tmp_path, "--find-links", str(wheels), "conflict_a", "conflict_b>=1")
    assert "ResolutionImpossible" in stderr and "Connection refused" in stderr, stderr
    assert index_unreachable(stderr) is None


# --- CI may not skip what it has: MYUTILS_REQUIRE_REAL_FIXTURES (set by .ci/run) ---

TINY_TESTS = '''
import sys

import pytest

sys.modules["hta"] = None  # Holistic Trace Analysis absent, whatever this environment holds


def test_reads_a_real_file(real_fixtures):
    assert (real_fixtures / "cprofile/gprof2dot__print1.pstats").stat().st_size > 0


@pytest.mark.hta
def test_compares_with_hta():
    import hta  # noqa: F401
'''


def _run_tiny_clone(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    """A tiny test module beside copies of the root conftest and the registry, run with the mirror hidden."""
    clone = tmp_path / ("clone-required" if require else "clone")
    (clone / "fixtures").mkdir(parents=True)
    for name in ("conftest.py", "fixtures/real_fixtures.py", "fixtures/registry.toml"):
        (clone / name).write_bytes((REPO / name).read_bytes())
    (clone / "test_tiny.py").write_text(TINY_TESTS)
    (clone / "pytest.ini").write_text("[pytest]\nmarkers =\n    hta: compares with HTA\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "MYUTILS_REQUIRE_REAL_FIXTURES")}
    env.update(MYUTILS_REAL_FIXTURES=str(tmp_path / "no-mirror"), MYUTILS_REAL_FIXTURES_CACHE=str(tmp_path / "cache"),
               MYUTILS_REAL_FIXTURES_OFFLINE="1", COLUMNS="1000")  # summary lines unabridged
    if require is not None:
        env["MYUTILS_REQUIRE_REAL_FIXTURES"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "--strict-markers",
                           "test_tiny.py"], cwd=clone, env=env, capture_output=True, text=True, timeout=300)


def test_a_newcomer_without_the_real_fixtures_skips_saying_why(tmp_path: Path) -> None:
    proc = _run_tiny_clone(tmp_path, None)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"^=+ 2 skipped in ", proc.stdout, re.MULTILINE), proc.stdout[-3000:]
    assert (f": real fixture cprofile/gprof2dot__print1.pstats unavailable: not in the mirror {tmp_path / 'no-mirror'} "
            f"(no such folder), not in the cache {tmp_path / 'cache'}, and downloads are off "
            "(MYUTILS_REAL_FIXTURES_OFFLINE=1)\n") in proc.stdout, proc.stdout[-3000:]
    assert "[hta] Holistic Trace Analysis (the `hta` package) is not installed here" in proc.stdout


@pytest.mark.parametrize("value", ["1", "true"])
def test_ci_fails_a_test_whose_real_fixture_or_hta_is_missing(tmp_path: Path, value: str) -> None:
    proc = _run_tiny_clone(tmp_path, value)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert re.search(r"^=+ 2 failed in ", proc.stdout, re.MULTILINE), proc.stdout[-3000:]
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 2, proc.stdout[-3000:]
    assert failed[0].startswith("FAILED test_tiny.py::test_reads_a_real_file - Failed: real fixture "
                                "cprofile/gprof2dot__print1.pstats unavailable: not in the mirror"), failed
    assert failed[1].startswith("FAILED test_tiny.py::test_compares_with_hta - Failed: [hta] Holistic Trace "
                                "Analysis"), failed
    assert all(line.endswith("[MYUTILS_REQUIRE_REAL_FIXTURES=1: CI has the real fixtures and the HTA environment, "
                             "so this may not skip]") for line in failed), failed
    assert "Traceback" not in proc.stdout and "During handling" not in proc.stdout


def test_ci_requires_the_real_fixtures_and_runs_the_hta_tests() -> None:
    """.ci/run sets the variable for every test it runs, and runs the ``hta`` tests where HTA is installed."""
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^export MYUTILS_REQUIRE_REAL_FIXTURES=1$", ci, re.MULTILINE)
    assert re.search(r"^\.ci/hta-tests \|\| failed=1$", ci, re.MULTILINE), ci
    hta = (REPO / ".ci" / "hta-tests").read_text()
    assert os.access(REPO / ".ci" / "hta-tests", os.X_OK)
    # HTA at the bench's pin, every version of .venv kept (no CUDA torch, nothing shadowed)
    assert re.search(r"^\.venv-hta/bin/python -m pip install --quiet holistictraceanalysis -c bench/requirements.txt "
                     r"\\\n  -c \.venv-hta/test-env-constraints\.txt$", hta, re.MULTILINE), hta
    assert hta.splitlines()[-1] == '.venv-hta/bin/python -m pytest -m hta "$@"'
    assert re.search(r"^holistictraceanalysis==", (REPO / "bench" / "requirements.txt").read_text(), re.MULTILINE)
