"""The contract kit: each check passes a component that keeps the contract and names the rule
a broken one breaks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import EventLogWriter, MetricEvent
from my_utils.core.testing.contract import (
    ContractError,
    check_analysis_rule,
    check_capture_backend,
    check_event_sink,
    check_metrics_provider,
)


class LinesProvider:
    """Reads NAME VALUE lines from *.txt; the knobs let a test break one rule at a time."""

    name = "lines"
    repeat = False
    source = "lines"
    placeless = False

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = False

    @classmethod
    def from_input(cls, path: Path, **options: Any) -> LinesProvider:
        if path.suffix != ".txt":
            raise UnsupportedInputError(path, None, "expected a .txt file")
        return cls(path)

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        if self.done and not self.repeat:
            return []
        self.done = True
        events = []
        for lineno, line in enumerate(self.path.read_text().splitlines(), 1):
            parts = line.split()
            if len(parts) != 2:
                raise InputError(self.path, None if self.placeless else f"line {lineno}", "expected NAME VALUE")
            events.append(MetricEvent(name=parts[0], value=float(parts[1]), source=self.source, step=step))
        return events


@pytest.fixture
def samples(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.txt"
    good.write_text("loss 0.5\nlr 0.1\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("loss 0.5\ngarbage\n")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n")
    return {"good": good, "bad": bad, "other": other}


def test_provider_keeping_the_contract_passes(samples: dict[str, Path]) -> None:
    report = check_metrics_provider(LinesProvider, samples["good"], bad_input=samples["bad"],
                                    unsupported_input=samples["other"])
    assert report.name == "lines"
    assert [(e.name, e.value) for e in report.events] == [("loss", 0.5), ("lr", 0.1)]
    assert report.second_collect == ()


@pytest.mark.parametrize(
    ("knob", "value", "fragment"),
    [
        ("repeat", True, "second collect() repeated 2 event(s)"),
        ("source", "other", "has source 'other'; set source='lines'"),
        ("placeless", True, "has no place"),
        ("name", "", "non-empty str attribute 'name'"),
    ],
)
def test_provider_breaking_a_rule_is_named(samples: dict[str, Path], knob: str, value: object,
                                           fragment: str) -> None:
    broken = type("Broken", (LinesProvider,), {knob: value})
    with pytest.raises(ContractError, match="metrics provider") as info:
        check_metrics_provider(broken, samples["good"], bad_input=samples["bad"])
    assert fragment in str(info.value)


def test_provider_raising_something_else_on_bad_input(samples: dict[str, Path]) -> None:
    class KeyErrorProvider(LinesProvider):
        def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
            if self.path.name == "bad.txt":
                raise KeyError("column")
            return super().collect(step)

    with pytest.raises(ContractError, match=r"raised KeyError: 'column'; expected InputError"):
        check_metrics_provider(KeyErrorProvider, samples["good"], bad_input=samples["bad"])


def test_provider_needs_from_input(samples: dict[str, Path]) -> None:
    with pytest.raises(ContractError, match="needs a classmethod from_input"):
        check_metrics_provider(object, samples["good"])


def test_capture_backend_through_a_real_controller() -> None:
    pytest.importorskip("my_utils.tracing", reason="myutils-tracing is not installed")
    from my_utils.tracing.capture import RecordingBackend

    report = check_capture_backend(RecordingBackend, windows=3)
    assert report.calls == ("window_opening", "start", "stop", "window_closed") * 3
    assert [info.name for info, _ in report.windows] == ["contract_0", "contract_1", "contract_2"]


def test_capture_backend_failing_in_stop_is_named() -> None:
    pytest.importorskip("my_utils.tracing", reason="myutils-tracing is not installed")
    from my_utils.tracing.capture import CaptureBackend

    class DiskFull(CaptureBackend):
        def start(self) -> None:
            pass

        def stop(self) -> None:
            raise OSError(28, "No space left on device")

    with pytest.raises(ContractError, match=r"backend failure: .*No space left on device"):
        check_capture_backend(DiskFull)
    with pytest.raises(ContractError, match=r"subclass my_utils\.tracing\.capture\.CaptureBackend"):
        check_capture_backend(dict)


def test_event_sink(tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    assert check_event_sink(EventLogWriter, path=out) == 3
    assert len(out.read_text().splitlines()) == 3

    class Silent:
        def __init__(self) -> None:
            pass

        def append(self, events: Sequence[MetricEvent]) -> None:
            return None

        def close(self) -> None:
            pass

    with pytest.raises(ContractError, match=r"append\(\) of 3 events returned None"):
        check_event_sink(Silent)


def test_analysis_rule() -> None:
    class SlowSteps:
        name = "slow_steps"

        def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
            slow = [e for e in events if e.name == "step_time" and e.value > 100]
            if not slow:
                return []
            return [{"id": "slow_steps", "category": "performance", "severity": "warning",
                     "title": f"{len(slow)} slow steps", "detail": "", "evidence": {"steps": [e.step for e in slow]},
                     "suggestion": "profile them"}]

    events = [MetricEvent("step_time", v, step=i) for i, v in enumerate([50, 150, 200])]
    findings = check_analysis_rule(SlowSteps, events)
    assert findings[0]["evidence"] == {"steps": [1, 2]}

    class NoKeys(SlowSteps):
        def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
            return [{"id": "x"}] if events else []

    with pytest.raises(ContractError, match="lacks"):
        check_analysis_rule(NoKeys, events)


def test_check_by_registered_name_uses_the_registry(tmp_path: Path) -> None:
    # core's own event sink, found through its entry point
    assert check_event_sink("jsonl", path=tmp_path / "e.jsonl") == 3


def test_capture_backend_check_skips_without_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import unittest

    monkeypatch.setitem(sys.modules, "my_utils.tracing.capture", None)  # as if not installed
    with pytest.raises(unittest.SkipTest, match=r"myutils-tracing is not installed.*pip install myutils-tracing"):
        check_capture_backend("recording")


def test_capture_backend_options_rejected_only_on_a_real_mismatch() -> None:
    pytest.importorskip("my_utils.tracing", reason="myutils-tracing is not installed")
    from my_utils.tracing.capture import RecordingBackend

    with pytest.raises(ContractError, match=r"options \['outdir'\] rejected: got an unexpected keyword"):
        check_capture_backend(RecordingBackend, options={"outdir": "x"})
