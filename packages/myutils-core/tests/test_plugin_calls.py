"""plugin_calls: BaseExceptions contained, stdout kept for results, imports bounded, reasons bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from my_utils.core.plugin_calls import (
    MAX_REASON_CHARS,
    PluginAbort,
    PluginTimeout,
    call_bounded,
    contained,
    describe_failure,
    import_timeout,
    plugin_output,
    send_plugin_output_to_stderr,
)


class Boom(BaseException):
    """A plugin's own BaseException subclass."""


@pytest.mark.parametrize(("raised", "reason"), [
    (SystemExit(0), "SystemExit: the plugin called sys.exit(0)"),
    (SystemExit(None), "SystemExit: the plugin called sys.exit(None)"),
    (SystemExit("bye"), "SystemExit: the plugin called sys.exit('bye')"),
    (GeneratorExit(), "GeneratorExit: raised with no message"),
    (Boom("a\nb"), "Boom: a; b"),
])
def test_base_exceptions_become_plugin_failures(raised: BaseException, reason: str) -> None:
    with pytest.raises(PluginAbort) as info, contained():
        raise raised
    assert info.value.original is raised and info.value.__cause__ is raised
    assert describe_failure(info.value) == reason


def test_keyboard_interrupt_and_exceptions_pass_unchanged() -> None:
    with pytest.raises(KeyboardInterrupt), contained():
        raise KeyboardInterrupt
    error = KeyError("k")
    with pytest.raises(KeyError) as info, contained():
        raise error
    assert info.value is error


def test_reasons_are_bounded_and_one_line() -> None:
    reason = describe_failure(RuntimeError("x" * 10_000_000 + "\nmore"))
    assert len(reason) <= MAX_REASON_CHARS + 20 and "\n" not in reason
    assert reason.startswith("RuntimeError: xxx") and reason.endswith("... (10000005 characters in all)")
    assert describe_failure(PluginAbort(SystemExit("y" * 10_000))).endswith("... (10030 characters in all)")

    class BadStr(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    assert describe_failure(BadStr()) == "BadStr: <str() of the exception raised ValueError>"


def test_a_bounded_call_returns_raises_or_gives_up() -> None:
    assert call_bounded(lambda: 42, 5, "answer") == 42
    with pytest.raises(KeyError):
        call_bounded(lambda: {}["k"], 5, "lookup")

    def interrupt() -> None:
        raise KeyboardInterrupt  # in a worker thread only the plugin can have raised it

    with pytest.raises(PluginAbort, match="raised with no message"):
        call_bounded(interrupt, 5, "interrupt")
    release = threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(PluginTimeout, match=r"^import of 'x' did not finish within 0.2 s \(set "
                                                 r"MYUTILS_PLUGIN_IMPORT_TIMEOUT to wait longer\)$"):
            call_bounded(release.wait, 0.2, "import of 'x'")
        assert time.monotonic() - started < 5
    finally:
        release.set()


@pytest.mark.parametrize(("raw", "seconds"), [("", 30.0), ("2.5", 2.5), ("0", 0.0), ("nan", 30.0), ("x", 30.0)])
def test_import_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float) -> None:
    monkeypatch.setenv("MYUTILS_PLUGIN_IMPORT_TIMEOUT", raw)
    assert import_timeout() == seconds


def test_plugin_output_goes_to_stderr_only_when_switched_on() -> None:
    # in a child: the test goes through the real file descriptors 1 and 2
    code = (
        "import os, subprocess, sys\n"
        "from my_utils.core.plugin_calls import plugin_output, send_plugin_output_to_stderr\n"
        "print('result 1')\n"
        "with plugin_output():\n"
        "    print('library mode')\n"
        "send_plugin_output_to_stderr(True)\n"
        "with plugin_output():\n"
        "    print('plugin print'); sys.__stdout__.write('plugin dunder\\n'); os.write(1, b'plugin fd\\n')\n"
        f"    subprocess.run([{sys.executable!r}, '-c', 'print(\"plugin child\")'])\n"
        "    with plugin_output():\n"
        "        print('nested')\n"
        "print('result 2')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["result 1", "library mode", "result 2"]
    assert sorted(proc.stderr.splitlines()) == ["nested", "plugin child", "plugin dunder", "plugin fd", "plugin print"]


def test_the_switch_returns_its_previous_setting() -> None:
    assert send_plugin_output_to_stderr(True) is False
    try:
        assert send_plugin_output_to_stderr(True) is True
        out = sys.stdout
        with plugin_output():
            assert sys.stdout is sys.stderr
        assert sys.stdout is out
    finally:
        send_plugin_output_to_stderr(False)
    assert os.get_blocking(1) in (True, False)  # fd 1 is still open and usable
