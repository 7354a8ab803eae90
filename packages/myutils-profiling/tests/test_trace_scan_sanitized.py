"""The compiled scanner under AddressSanitizer and UndefinedBehaviorSanitizer, on mutated runs (issue 35).

``_kineto_scan.c`` reads untrusted bytes with pointer arithmetic; the last reliability round ran it under
``-fsanitize=address,undefined`` by hand. This keeps that check as a test CI runs in a few minutes: the
module is built twice here (the SSE2 build and the portable one, ``MYUTILS_SCAN_PORTABLE``) with the
sanitizers, then ``scan_fuzz_driver.py`` runs thousands of mutated runs of real trace events through each
build, in a process with the ASan runtime preloaded, and compares every run the scanner takes with the
pure path (``json.loads`` + ``TraceAggregator.add``): same columns, same metric events. A sanitizer
report aborts that process; the test fails with the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.read import scan as trace_scan

RUNS = 2500  # per build
TRACES = ["kineto/kineto_repo/after_fix_trace.json", "kineto/hta/critical_path__alexnet_trace.json.gz"]
SANITIZE = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
DRIVER = Path(__file__).resolve().with_name("scan_fuzz_driver.py")


def _runtime(compiler: str) -> str | None:
    """The compiler's ASan runtime library (preloaded: the interpreter itself is not built with it)."""
    try:
        found = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True, text=True,
                               timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return found if found and os.path.isabs(found) and os.path.exists(found) else None


@pytest.fixture(scope="module", params=["sse2", "portable"])
def sanitized(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(module path, ASan runtime) of a sanitized build of the scanner."""
    root = Path(trace_scan.__file__).resolve().parents[5]  # packages/myutils-profiling
    if not (root / "hatch_build.py").is_file():
        pytest.skip(f"the package's source tree (hatch_build.py) is not at {root}: an installed wheel")
    sys.path.insert(0, str(root))
    try:
        import hatch_build
    finally:
        sys.path.remove(str(root))
    target = tmp_path_factory.mktemp(request.param) / ("_kineto_scan" + (sysconfig.get_config_var("EXT_SUFFIX")
                                                                         or ".so"))
    command = hatch_build._compile_command(root / hatch_build.SOURCE, target)
    if isinstance(command, str):
        pytest.skip(f"the scanner cannot be compiled here: {command}")
    runtime = _runtime(command[0])
    if runtime is None:
        pytest.skip(f"{command[0]} has no AddressSanitizer runtime (libasan.so) here")
    extra = ["-DMYUTILS_SCAN_PORTABLE"] if request.param == "portable" else []
    # the sanitizer flags last: they win over the -O2 of Python's own flags
    done = subprocess.run([*command[:-3], *extra, *SANITIZE, *command[-3:]], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return target, runtime


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES)
def test_mutated_runs_under_the_sanitizers_read_as_the_pure_path(sanitized: tuple[Path, str], trace: str,
                                                                 real_fixtures: Any) -> None:
    module, runtime = sanitized
    env = {**os.environ, "LD_PRELOAD": runtime,
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=99",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=98",
           "PYTHONMALLOC": "malloc"}  # Python's own allocator hides its blocks from ASan
    seed = sum(map(ord, module.parent.name + trace))
    res = subprocess.run([sys.executable, str(DRIVER), str(module), str(real_fixtures / trace), str(RUNS), str(seed)],
                         capture_output=True, text=True, timeout=900, env=env)
    report = res.stderr[-6000:]
    assert "Sanitizer" not in res.stderr and "runtime error" not in res.stderr, report
    assert res.returncode == 0, (res.stdout[-2000:], report)
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    assert stats["runs"] == RUNS
    # the mutations must reach both outcomes: runs taken (compared) and runs declined
    assert stats["taken"] > RUNS // 10 and stats["declined"] > RUNS // 10, stats
    print(f"\nsanitized scan {module.parent.name} {Path(trace).name}: {stats}")


def test_the_driver_catches_a_disagreement(tmp_path: Path, real_fixtures: Any) -> None:
    """The comparison can fail: a scanner that reads every duration twice is caught at once (no sanitizer)."""
    if not trace_scan.compiled():
        pytest.skip("the C scanner was not built at install (no C compiler or Python.h)")
    wrapper = tmp_path / "doubled.py"
    wrapper.write_text(
        "from array import array\n"
        "from my_utils.profiling.kineto.read import _kineto_scan as real\n"
        "ABI = real.ABI\n"
        "def scan(*args):\n"
        "    got = real.scan(*args)\n"
        "    if got is None:\n        return None\n"
        "    cols = list(got)\n"
        "    d = array('d'); d.frombytes(cols[5]); cols[5] = array('d', [x * 2 for x in d]).tobytes()\n"
        "    return tuple(cols)\n"
        "def __getattr__(name):\n    return getattr(real, name)\n")
    res = subprocess.run([sys.executable, str(DRIVER), str(wrapper), str(real_fixtures / TRACES[0]), "300", "1"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "DISAGREE columns" in res.stdout, (res.stdout[-1000:], res.stderr[-2000:])
