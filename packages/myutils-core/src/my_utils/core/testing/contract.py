"""Contract checks a plugin author calls from their own tests, one per plugin kind.

Each ``check_*`` function builds the component the way my_utils does, drives it through the
contract of its kind and raises ``ContractError`` (an ``AssertionError``, so pytest shows it
as a test failure) naming the component and the rule it broke. On success it returns a small
report with what was observed, for further assertions.

Pass either the class (or factory) itself, or the registered component name: the name also
proves the entry point and the plugin hook work (``my_utils.core.plugins.load_component``).
"""

from __future__ import annotations

import json
import unittest
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import options_mismatch

__all__ = [
    "BackendReport",
    "ContractError",
    "ProviderReport",
    "check_analysis_rule",
    "check_capture_backend",
    "check_event_sink",
    "check_metrics_provider",
]

FINDING_KEYS = ("id", "category", "severity", "title", "detail", "evidence", "suggestion")
SEVERITIES = ("info", "warning", "critical")


class ContractError(AssertionError):
    """A component breaks the contract of its kind; the message names it and the rule."""


def _factory(component: Any, kind: PluginKind) -> tuple[Callable[..., Any], str]:
    if isinstance(component, str):
        from my_utils.core.plugins import load_component

        return load_component(kind, component), component
    return component, getattr(component, "__qualname__", repr(component))


def _one_line(label: str, exc: BaseException) -> None:
    text = str(exc)
    if "\n" in text:
        raise ContractError(f"{label}: error messages must be one line, got {text!r}")


@dataclass(frozen=True)
class ProviderReport:
    """What ``check_metrics_provider`` saw: the events of the first ``collect()`` and the second's."""

    name: str
    events: tuple[MetricEvent, ...]
    second_collect: tuple[MetricEvent, ...] = ()


def _event_key(event: MetricEvent) -> str:
    return json.dumps(event.to_dict(), sort_keys=True, default=str)


def check_metrics_provider(
    provider: type | str,
    sample: str | Path,
    *,
    options: Mapping[str, Any] | None = None,
    bad_input: str | Path | None = None,
    unsupported_input: str | Path | None = None,
    min_events: int = 1,
) -> ProviderReport:
    """Check a file-reading metrics provider on ``sample`` (a file or folder it reads).

    Rules: ``from_input(path, **options)`` builds it; it has a ``name``; ``collect()``
    returns at least ``min_events`` valid ``MetricEvent`` (each survives the JSONL round
    trip, ``source`` is the provider's name); a second ``collect()`` returns nothing it
    returned before; ``bad_input`` (a malformed file) raises ``InputError`` naming the file
    and a place, on one line; ``unsupported_input`` raises ``UnsupportedInputError``.
    """
    factory, label = _factory(provider, PluginKind.METRICS_PROVIDER)
    label = f"metrics provider {label}"
    from_input = getattr(factory, "from_input", None)
    if not callable(from_input):
        raise ContractError(f"{label}: a file-reading provider needs a classmethod from_input(path, **options)")
    opts = dict(options or {})
    instance = from_input(Path(sample), **opts)
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name:
        raise ContractError(f"{label}: instances need a non-empty str attribute 'name', got {name!r}")
    first = tuple(instance.collect(None))
    if len(first) < min_events:
        raise ContractError(f"{label}: collect() on {sample} returned {len(first)} events, expected >= {min_events}")
    for i, event in enumerate(first):
        if not isinstance(event, MetricEvent):
            raise ContractError(f"{label}: collect() item {i} is {type(event).__name__}, expected MetricEvent")
        try:
            MetricEvent.from_dict(json.loads(json.dumps(event.to_dict(), default=str)), "<collect()>", f"event {i}")
        except InputError as exc:
            raise ContractError(f"{label}: event {i} would not be read back: {exc}") from None
        if event.source != name:
            raise ContractError(f"{label}: event {i} has source {event.source!r}; set source={name!r} "
                                "(the provider's name) on every event")
    seen = {_event_key(e) for e in first}
    second = tuple(instance.collect(None))
    repeated = [e for e in second if _event_key(e) in seen]
    if repeated:
        raise ContractError(f"{label}: the second collect() repeated {len(repeated)} event(s) of the first "
                            f"(e.g. {repeated[0].name!r}); collect() returns only events new since the last call")
    if bad_input is not None:
        _expect_input_error(label, from_input, Path(bad_input), opts, InputError, need_place=True)
    if unsupported_input is not None:
        _expect_input_error(label, from_input, Path(unsupported_input), opts, UnsupportedInputError,
                            need_place=False)
    return ProviderReport(name, first, second)


def _expect_input_error(label: str, from_input: Callable[..., Any], path: Path, options: dict[str, Any],
                        expected: type[InputError], need_place: bool) -> None:
    try:
        list(from_input(path, **options).collect(None))
    except expected as exc:
        _one_line(label, exc)
        if str(path) not in str(exc) and path.name not in str(exc):
            raise ContractError(f"{label}: the error for {path} must name the file, got {str(exc)!r}") from None
        if need_place and not exc.place:
            raise ContractError(f"{label}: InputError for {path} has no place; pass e.g. 'line 12' "
                                "as InputError(file, place, expected)") from None
        return
    except Exception as exc:
        raise ContractError(f"{label}: reading {path} raised {type(exc).__name__}: {exc}; expected "
                            f"{expected.__name__}(file, place, expected)") from exc
    raise ContractError(f"{label}: reading {path} raised nothing; expected {expected.__name__}")


@dataclass(frozen=True)
class BackendReport:
    """What ``check_capture_backend`` saw: the calls in order and the windows that completed."""

    calls: tuple[str, ...]
    windows: tuple[Any, ...] = field(default=())


class _RecordingLogger:
    """Stands in for the controller's logger: keeps what it reports (a backend failure)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def exception(self, msg: str, *args: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        self.problems.append((msg % args) + (f": {type(exc).__name__}: {exc}" if exc else ""))

    def warning(self, msg: str, *args: Any) -> None:
        self.problems.append(msg % args)

    error = warning

    def info(self, msg: str, *args: Any) -> None:
        """Debug chatter (``debug_watch``) is not a problem."""

    debug = info


def check_capture_backend(
    backend: type | str | Callable[..., Any], *, options: Mapping[str, Any] | None = None, windows: int = 2
) -> BackendReport:
    """Drive a capture backend through a real ``CaptureController`` for ``windows`` windows.

    Rules: ``factory(**options)`` builds a ``CaptureBackend``; each window calls
    ``window_opening``, ``start``, ``stop``, ``window_closed`` in that order; nothing the
    backend does makes the controller report a failure. Skips (``unittest.SkipTest``, which
    pytest honours) when myutils-tracing is not installed.
    """
    try:
        from my_utils.tracing.capture import CaptureBackend, CaptureController, CaptureSpec
    except ImportError as exc:
        raise unittest.SkipTest(f"myutils-tracing is not installed ({exc}); pip install myutils-tracing "
                                "to check a capture backend through a real CaptureController") from None
    factory, label = _factory(backend, PluginKind.CAPTURE_BACKEND)
    label = f"capture backend {label}"
    why = options_mismatch(factory, **dict(options or {}))
    if why is not None:
        raise ContractError(f"{label}: options {sorted(options or {})} rejected: {why}")
    instance = factory(**dict(options or {}))
    if not isinstance(instance, CaptureBackend):
        raise ContractError(f"{label}: built a {type(instance).__name__}; subclass "
                            "my_utils.tracing.capture.CaptureBackend")
    calls: list[str] = []
    for method in ("window_opening", "start", "stop", "window_closed"):
        original = getattr(instance, method)

        def spy(*args: Any, _name: str = method, _original: Any = original) -> Any:
            calls.append(_name)
            return _original(*args)

        setattr(instance, method, spy)
    logger = _RecordingLogger()
    controller = CaptureController(instance, logger=logger, rank=0)
    for i in range(windows):
        it = 2 + 3 * i
        controller.arm(CaptureSpec(name=f"contract_{i}", start_iter=it, start_mb=0, stop_iter=it, stop_mb=0,
                                   start_names=frozenset({"train_step"}), origin="contract"))
    with controller:
        for it in range(3 * windows + 2):
            with controller.region("train_step", {"iter": it}):
                pass
    if logger.problems:
        raise ContractError(f"{label}: the controller reported a backend failure: {logger.problems[0]}")
    expected = ["window_opening", "start", "stop", "window_closed"] * windows
    if calls != expected:
        raise ContractError(f"{label}: calls were {calls}, expected {expected}")
    return BackendReport(tuple(calls), tuple(controller.completed))


def check_event_sink(sink: type | str | Callable[..., Any], events: Sequence[MetricEvent] | None = None,
                     **options: Any) -> int:
    """Check an event sink: ``factory(**options)``, ``append(events)`` returns how many, ``close()`` twice.

    Returns the count the sink reported for ``events`` (default: three sample events).
    """
    factory, label = _factory(sink, PluginKind.EVENT_SINK)
    label = f"event sink {label}"
    batch = list(events) if events is not None else [
        MetricEvent(name="step_time", value=12.5, kind="duration", unit="ms", source="contract", step=s)
        for s in range(3)
    ]
    instance = factory(**options)
    for method in ("append", "close"):
        if not callable(getattr(instance, method, None)):
            raise ContractError(f"{label}: needs a method {method}()")
    written = instance.append(batch)
    if written != len(batch):
        raise ContractError(f"{label}: append() of {len(batch)} events returned {written!r}; return the count")
    if instance.append([]) != 0:
        raise ContractError(f"{label}: append([]) must return 0")
    instance.close()
    instance.close()  # closing twice is allowed: hosts close sinks at exit and on errors
    return int(written)


def check_analysis_rule(rule: type | str | Callable[..., Any], events: Sequence[MetricEvent],
                        **options: Any) -> list[Mapping[str, Any]]:
    """Check an analysis rule on ``events`` and return its findings.

    Rules: ``factory(**options)`` has a ``name``; ``evaluate(events)`` returns findings, each
    a mapping with the report's keys (``id``, ``category``, ``severity``, ``title`` non-empty
    strings, ``severity`` one of info/warning/critical, ``detail``/``suggestion`` strings,
    ``evidence`` a mapping); ``evaluate([])`` returns none. Given by name, and with
    myutils-profiling installed, the rule also runs inside a real ``MetricsAnalyzer``, which
    must report no rule error.
    """
    factory, label = _factory(rule, PluginKind.ANALYSIS_RULE)
    label = f"analysis rule {label}"
    why = options_mismatch(factory, **options)
    if why is not None:
        raise ContractError(f"{label}: options {sorted(options)} rejected: {why}")
    instance = factory(**options)
    if not isinstance(getattr(instance, "name", None), str):
        raise ContractError(f"{label}: instances need a str attribute 'name'")
    findings = list(instance.evaluate(list(events)))
    for i, finding in enumerate(findings):
        _check_finding(label, i, finding)
    if list(instance.evaluate([])):
        raise ContractError(f"{label}: evaluate([]) must return no findings")
    if isinstance(rule, str):
        _run_in_analyzer(label, rule, events, options, len(findings))
    return findings


def _check_finding(label: str, i: int, finding: Any) -> None:
    if not isinstance(finding, Mapping):
        raise ContractError(f"{label}: finding {i} is {type(finding).__name__}, expected a mapping")
    missing = [k for k in FINDING_KEYS if k not in finding]
    if missing:
        raise ContractError(f"{label}: finding {i} lacks {missing}; findings carry {list(FINDING_KEYS)}")
    for key in ("id", "category", "severity", "title"):
        if not isinstance(finding[key], str) or not finding[key]:
            raise ContractError(f"{label}: finding {i} key {key!r} must be a non-empty str")
    if finding["severity"] not in SEVERITIES:
        raise ContractError(f"{label}: finding {i} severity {finding['severity']!r} is not one of {list(SEVERITIES)}")
    for key in ("detail", "suggestion"):
        if not isinstance(finding[key], str):
            raise ContractError(f"{label}: finding {i} key {key!r} must be a str")
    if not isinstance(finding["evidence"], Mapping):
        raise ContractError(f"{label}: finding {i} evidence must be a mapping")


def _run_in_analyzer(label: str, name: str, events: Sequence[MetricEvent], options: Mapping[str, Any],
                     expected: int) -> None:
    try:
        from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
    except ImportError:
        return  # the checks above are the contract; the analyzer is one host of it
    report = MetricsAnalyzer(list(events), rules=[name], rule_options={name: dict(options)}).analyze()
    errors = report.summary.get("rule_errors") or []
    if errors:
        raise ContractError(f"{label}: MetricsAnalyzer reported {errors[0]}")
    mine = [f for f in report.findings if f.id]
    if len(mine) != expected:
        raise ContractError(f"{label}: MetricsAnalyzer kept {len(mine)} finding(s), evaluate() returned {expected}; "
                            "finding ids must be unique")
