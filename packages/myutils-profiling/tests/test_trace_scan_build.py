"""The compiled scanner the tests run is the one its source describes.

Without a C compiler the install goes on pure Python and ``test_trace_scan.py`` has nothing to
compare: on a newcomer's machine it skips saying so, but where CI requires every input
(``$MYUTILS_REQUIRE_REAL_FIXTURES=1``) a missing scanner fails. An editable install compiles
``_kineto_scan.c`` once; editing the C file afterwards leaves the old binary in place, and the
tests would go on testing it. The build records the sha256 of the source it compiled
(``hatch_build.py``), and a difference fails here, naming the command that rebuilds it.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto.read import scan as trace_scan

SOURCE = Path(trace_scan.__file__).with_name("_kineto_scan.c")
PACKAGE = Path(trace_scan.__file__).resolve().parents[5]  # packages/myutils-profiling in a checkout
REINSTALL = f"{sys.executable} -m pip install --no-deps -e {PACKAGE}"


def scanner_missing_reason() -> str | None:
    """Why ``trace_scan`` runs without the compiled scanner, or None when it has it."""
    if trace_scan.compiled():
        return None
    try:
        module = importlib.import_module("my_utils.profiling.kineto.read._kineto_scan")
    except ImportError as exc:
        return (f"the compiled scanner (_kineto_scan) is not installed ({exc}); it is built at install when a C "
                f"compiler and Python.h are there: {REINSTALL}")
    return (f"the installed scanner has interface {getattr(module, 'ABI', None)!r}, this source expects "
            f"{trace_scan.ABI}: it was built from another version of _kineto_scan.c; rebuild it: {REINSTALL}")


def test_the_scanner_is_installed(real_fixtures: Any) -> None:
    reason = scanner_missing_reason()
    if reason is not None:
        real_fixtures.unavailable(reason)


def test_the_installed_scanner_was_built_from_this_source(real_fixtures: Any) -> None:
    if not SOURCE.is_file():
        pytest.skip(f"no C source beside the module ({SOURCE}): an installed wheel, built from its own source")
    reason = scanner_missing_reason()
    if reason is not None:
        real_fixtures.unavailable(reason)
    built = trace_scan.built_from()
    want = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    assert built == want, (
        f"the installed scanner was built from another _kineto_scan.c (sha256 {built or 'not recorded'}; the source "
        f"now: {want}): the tests would run the old binary; rebuild it: {REINSTALL}")
