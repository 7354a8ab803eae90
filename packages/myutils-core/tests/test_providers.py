"""Running a metrics provider plugin over a file: the contract `myutils plugins run` uses."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError, InputError, ProviderError, UnsupportedInputError, UsageError
from my_utils.core.events import MetricEvent, read_events
from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind
from my_utils.core.plugins import get_registry, reset_registry
from my_utils.core.providers import (
    FileMetricsProvider,
    MetricsProvider,
    check_options,
    run_provider_on_input,
)


class LineCountProvider:
    """Counts lines of *.txt files: a minimal FileMetricsProvider."""

    name = "linecount"

    def __init__(self, path: Path, encoding: str = "utf-8") -> None:
        self.path = path
        self.encoding = encoding

    @classmethod
    def from_input(cls, path: Path, encoding: str = "utf-8") -> LineCountProvider:
        if path.suffix != ".txt":
            raise UnsupportedInputError(path, None, "expected a .txt file")
        return cls(path, encoding)

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        text = self.path.read_text(encoding=self.encoding)
        if "\x00" in text:
            raise InputError(self.path, "byte 0", "expected text, found a NUL byte")
        return [MetricEvent("lines", float(len(text.splitlines())), kind="counter", source=self.name)]


class BuggyProvider(LineCountProvider):
    """A provider with a bug: a KeyError while reading."""

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        return [{}["missing"]]


class ExitingProvider(LineCountProvider):
    """A provider that ends the process (sys.exit) or returns what is not events, as its input says."""

    @classmethod
    def from_input(cls, path: Path, encoding: str = "utf-8") -> LineCountProvider:
        if path.name == "exit.txt":
            sys.exit(0)
        return cls(path, encoding)

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        return ["not an event"] if self.path.name == "wrong.txt" else 5  # type: ignore[return-value,list-item]


class LiveProvider:
    name = "live"

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        return []


@pytest.fixture
def registry_with_test_providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    plugin = types.ModuleType("core_test_providers_plugin")
    plugin.LineCountProvider = LineCountProvider  # type: ignore[attr-defined]
    plugin.LiveProvider = LiveProvider  # type: ignore[attr-defined]
    plugin.BuggyProvider = BuggyProvider  # type: ignore[attr-defined]
    plugin.ExitingProvider = ExitingProvider  # type: ignore[attr-defined]
    plugin.myutils_metrics_providers = hookimpl(  # type: ignore[attr-defined]
        lambda: [
            PluginDescription("linecount", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:LineCountProvider", "count lines", ("*.txt",)),
            PluginDescription("live", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:LiveProvider", "live object"),
            PluginDescription("declared", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:LineCountProvider", "count lines, options declared",
                              ("*.txt",), options=(OptionSpec("encoding", str, "utf-8", "text encoding"),)),
            PluginDescription("buggy", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:BuggyProvider", "raises a KeyError", ("*.txt",)),
            PluginDescription("exiting", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:ExitingProvider", "calls sys.exit", ("*.txt",)),
        ]
    )
    monkeypatch.setitem(sys.modules, plugin.__name__, plugin)
    reset_registry()
    get_registry().register(plugin, "core_test_providers")
    yield
    reset_registry()


def test_protocols_are_checkable() -> None:
    assert isinstance(LineCountProvider(Path("x.txt")), FileMetricsProvider)
    assert isinstance(LiveProvider(), MetricsProvider)
    assert not isinstance(LiveProvider(), FileMetricsProvider)


@pytest.mark.usefixtures("registry_with_test_providers")
def test_run_writes_events_file(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a\nb\nc\n")
    out, count = run_provider_on_input("linecount", src, tmp_path / "out")
    assert count == 1 and out == tmp_path / "out" / "metrics_events.jsonl"
    (event,) = read_events(out)
    assert (event.name, event.value, event.source) == ("lines", 3.0, "linecount")


@pytest.mark.usefixtures("registry_with_test_providers")
def test_the_events_file_never_replaces_its_input(tmp_path: Path) -> None:
    """Before: ``plugins run P --input d/metrics_events.jsonl --output-dir d`` read the file and wrote over it."""
    src = tmp_path / "metrics_events.jsonl"
    src.write_text("a\nb\n")
    with pytest.raises(UsageError, match="would replace the input"):
        run_provider_on_input("linecount", src, tmp_path)
    assert src.read_text() == "a\nb\n"


@pytest.mark.usefixtures("registry_with_test_providers")
def test_errors_leave_no_output(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    with pytest.raises(InputError, match="no such file or folder"):
        run_provider_on_input("linecount", tmp_path / "absent.txt", out_dir)
    with pytest.raises(UnsupportedInputError, match=r"in\.csv: expected a \.txt file"):
        (tmp_path / "in.csv").write_text("x")
        run_provider_on_input("linecount", tmp_path / "in.csv", out_dir)
    (tmp_path / "nul.txt").write_text("a\x00b")
    with pytest.raises(InputError, match="byte 0: expected text"):
        run_provider_on_input("linecount", tmp_path / "nul.txt", out_dir)
    with pytest.raises(UsageError, match="reads live objects, not files"):
        run_provider_on_input("live", tmp_path / "nul.txt", out_dir)
    assert not out_dir.exists()


@pytest.mark.usefixtures("registry_with_test_providers")
@pytest.mark.parametrize(("name", "cause"), [
    ("exit.txt", "SystemExit: the plugin called sys.exit(0)"),
    ("wrong.txt", "TypeError: collect() returned a str as item 0; expected MetricEvent"),
    ("int.txt", "TypeError: 'int' object is not iterable"),
])
def test_a_provider_exiting_or_returning_no_events_is_its_failure(tmp_path: Path, name: str, cause: str) -> None:
    (tmp_path / name).write_text("x")
    with pytest.raises(ProviderError) as info:
        run_provider_on_input("exiting", tmp_path / name, tmp_path / "out")
    assert str(info.value) == f"{tmp_path / name}: metrics provider 'exiting' failed: {cause}"
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("registry_with_test_providers")
def test_options_reach_the_provider(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes("é\nü\n".encode("latin-1"))
    out, _ = run_provider_on_input("linecount", src, tmp_path / "out", {"encoding": "latin-1"})
    assert read_events(out)[0].value == 2.0
    with pytest.raises(UsageError, match=r"rejected its options \(got an unexpected keyword argument 'colour'; it accepts path, encoding\)"):
        run_provider_on_input("linecount", src, tmp_path / "out2", {"colour": "red"})
    assert not (tmp_path / "out2").exists()


@pytest.mark.usefixtures("registry_with_test_providers")
def test_declared_options_are_checked_before_reading(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    out, _ = run_provider_on_input("declared", src, tmp_path / "out", {"encoding": "ascii"})
    assert read_events(out)[0].value == 1.0
    with pytest.raises(ConfigError) as err:
        run_provider_on_input("declared", src, tmp_path / "out2", {"encodng": "ascii"})
    assert str(err.value) == ("--option:encodng: metrics provider 'declared' has no option 'encodng'; "
                              "known options: encoding")
    with pytest.raises(ConfigError, match=r"--option:encoding: .* must be a string, got 5 \(int\)"):
        run_provider_on_input("declared", src, tmp_path / "out2", {"encoding": 5})
    assert not (tmp_path / "out2").exists()


@pytest.mark.usefixtures("registry_with_test_providers")
def test_a_provider_bug_is_one_line_naming_the_provider(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    with pytest.raises(ProviderError, match=r"in\.txt: metrics provider 'buggy' failed: KeyError: 'missing'"):
        run_provider_on_input("buggy", src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


_SPECS = (
    OptionSpec("columns", list, None, "columns"),
    OptionSpec("scale", float, 1.0, "factor"),
    OptionSpec("rank", int, None, "rank"),
    OptionSpec("strict", bool, False, "strict"),
    OptionSpec("kind", str, "gauge", "kind", ("gauge", "counter")),
    OptionSpec("sep", str, ",", "separator"),
)
_DESC = PluginDescription("t", PluginKind.METRICS_PROVIDER, "m:C", "test", options=_SPECS)


@pytest.mark.parametrize(("given", "expected"), [
    ({"columns": "cpu_ms"}, {"columns": ["cpu_ms"]}),  # one name, not its characters
    ({"columns": ["a", "b"]}, {"columns": ["a", "b"]}),
    ({"columns": None, "rank": None}, {"columns": None, "rank": None}),
    ({"scale": 2}, {"scale": 2.0}),
    ({"strict": True, "kind": "counter", "rank": 3}, {"strict": True, "kind": "counter", "rank": 3}),
])
def test_check_options_accepts_and_converts(given: dict, expected: dict) -> None:
    checked = check_options(_DESC, given, "cfg.yaml", "providers[0].options.")
    assert checked == expected
    assert [type(v) for v in checked.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize(("given", "message"), [
    ({"columns": 5}, "option 'columns' must be a list of strings (or one string), got 5 (int)"),
    ({"columns": ["a", 1]}, "must be a list of strings (or one string)"),
    ({"scale": "x"}, "option 'scale' must be a number, got 'x' (str)"),
    ({"scale": True}, "must be a number, got True (bool)"),
    ({"rank": 1.0}, "option 'rank' must be an integer, got 1.0 (float)"),
    ({"rank": True}, "must be an integer, got True (bool)"),
    ({"strict": 1}, "option 'strict' must be true or false, got 1 (int)"),
    ({"kind": "avg"}, "option 'kind' must be one of 'gauge', 'counter', got 'avg'"),
    ({"sep": None}, "option 'sep' must be a string, got None"),
    ({"exector": "dask"}, "has no option 'exector'"),
])
def test_check_options_refuses_on_one_line(given: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_options(_DESC, given, "cfg.yaml", "providers[0].options.")
    text = str(err.value)
    key = next(iter(given))
    assert text.startswith(f"cfg.yaml:providers[0].options.{key}: metrics provider 't' ")
    assert message in text and "\n" not in text
    assert text.endswith("known options: columns, kind, rank, scale, sep, strict")


def test_undeclared_options_pass_through() -> None:
    desc = PluginDescription("free", PluginKind.METRICS_PROVIDER, "m:C", "no declarations")
    assert check_options(desc, {"anything": object}, "--option") == {"anything": object}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo: no FIFOs on this OS")
@pytest.mark.usefixtures("registry_with_test_providers")
def test_a_pipe_is_named_as_a_pipe_not_as_missing(tmp_path: Path) -> None:
    """Before: a FIFO given as ``--input`` was refused as 'no such file or folder', although it is there."""
    fifo = tmp_path / "in.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file or folder") as caught:
        run_provider_on_input("linecount", fifo, tmp_path / "out")
    assert "no such file" not in str(caught.value)
    assert not (tmp_path / "out").exists()
