"""Running a metrics provider plugin over a file: the contract `myutils plugins run` uses."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UnsupportedInputError, UsageError
from my_utils.core.events import MetricEvent, read_events
from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind
from my_utils.core.plugins import get_registry, reset_registry
from my_utils.core.providers import FileMetricsProvider, MetricsProvider, run_provider_on_input


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


class LiveProvider:
    name = "live"

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        return []


@pytest.fixture
def registry_with_test_providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    plugin = types.ModuleType("core_test_providers_plugin")
    plugin.LineCountProvider = LineCountProvider  # type: ignore[attr-defined]
    plugin.LiveProvider = LiveProvider  # type: ignore[attr-defined]
    plugin.myutils_metrics_providers = hookimpl(  # type: ignore[attr-defined]
        lambda: [
            PluginDescription("linecount", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:LineCountProvider", "count lines", ("*.txt",)),
            PluginDescription("live", PluginKind.METRICS_PROVIDER,
                              "core_test_providers_plugin:LiveProvider", "live object"),
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
def test_options_reach_the_provider(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes("é\nü\n".encode("latin-1"))
    out, _ = run_provider_on_input("linecount", src, tmp_path / "out", {"encoding": "latin-1"})
    assert read_events(out)[0].value == 2.0
    with pytest.raises(UsageError, match="does not take option 'colour'"):
        run_provider_on_input("linecount", src, tmp_path / "out2", {"colour": "red"})
    assert not (tmp_path / "out2").exists()
