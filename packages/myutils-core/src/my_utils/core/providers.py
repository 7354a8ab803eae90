"""The metrics-provider contract, and running one provider over a file or folder.

Concrete providers live in myutils-profiling (and in third-party plugins); they are
found through the ``myutils_metrics_providers`` hook. A provider reads either a live
object (a running MyTimer, a profiler) or files. File readers also implement
``from_input``, which the ``myutils plugins run`` command and the collector use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from my_utils.core.errors import ConfigError, InputError, MyUtilsError, ProviderError, UsageError
from my_utils.core.events import MetricEvent, events_path, write_events
from my_utils.core.plugin_calls import contained, plugin_output
from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind

_EXPECTED = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             list: "a list of strings (or one string)"}


@runtime_checkable
class MetricsProvider(Protocol):
    """Something that turns a source of measurements into metric events.

    ``collect(step)`` returns the events that appeared since the previous call (a live
    provider must never lose or repeat events between calls); ``step`` tags events
    that carry no step of their own.
    """

    name: str

    def collect(self, step: int | None = None) -> Sequence[MetricEvent]:
        """Return the events new since the last call."""
        ...


@runtime_checkable
class FileMetricsProvider(MetricsProvider, Protocol):
    """A provider that reads files written by a tool (CSV, traces, databases...)."""

    @classmethod
    def from_input(cls, path: Path, **options: Any) -> FileMetricsProvider:
        """Build a provider for ``path`` (a file or folder).

        Raises ``UnsupportedInputError`` when the input is not something this provider
        reads, and ``InputError`` (file, place, what was expected) when it is malformed.
        """
        ...


def _coerce(spec: OptionSpec, value: Any) -> Any:
    """``value`` converted to ``spec.type``, or raise ValueError with what was expected."""
    expected = _EXPECTED.get(spec.type, spec.type.__name__)
    if value is None:
        if spec.default is None:
            return None
        raise ValueError(expected)
    if spec.type is list:
        if isinstance(value, str):
            value = [value]  # one column name, never its characters
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(expected)
        value = list(value)
    elif spec.type is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(expected)
        value = float(value)
    elif spec.type is int or spec.type is bool:
        if type(value) is not spec.type:  # bool is an int subclass: neither stands for the other
            raise ValueError(expected)
    elif not isinstance(value, spec.type):
        raise ValueError(expected)
    if spec.choices and value not in spec.choices:
        raise ValueError(f"one of {', '.join(repr(c) for c in spec.choices)}")
    return value


def check_options(description: PluginDescription, options: Mapping[str, Any], where: str | Path,
                  place: str = "") -> dict[str, Any]:
    """The options for ``description``'s component, checked against its declared ``options``.

    Unknown keys and values of the wrong type raise ``ConfigError`` on one line naming the
    component, the key, what was expected and the known keys; ``where``/``place`` locate
    them (``--option`` and ``""``, or a config file and ``"providers[0].options."``).
    Values are converted where that loses nothing (an integer for a number, one string
    for a list). A component that declares no options gets its options unchanged.
    """
    specs = {spec.name: spec for spec in description.options}
    if not specs:
        return dict(options)
    label = f"{description.kind.value.replace('_', ' ')} {description.name!r}"
    known = ", ".join(sorted(specs))
    out: dict[str, Any] = {}
    for key, value in options.items():
        spec = specs.get(key)
        if spec is None:
            raise ConfigError(where, f"{place}{key}", f"{label} has no option {key!r}; known options: {known}")
        try:
            out[key] = _coerce(spec, value)
        except ValueError as exc:
            raise ConfigError(
                where, f"{place}{key}",
                f"{label} option {key!r} must be {exc}, got {value!r} ({type(value).__name__}); "
                f"known options: {known}",
            ) from None
    return out


def run_provider_on_input(
    name: str, input_path: str | Path, output_dir: str | Path, options: Mapping[str, Any] | None = None
) -> tuple[Path, int]:
    """Run the metrics provider plugin ``name`` over ``input_path``.

    ``options`` are checked against the provider's declared options (``check_options``)
    and passed to its ``from_input`` as keyword arguments. Writes
    ``<output_dir>/metrics_events.jsonl`` atomically (nothing is written when reading
    fails) and returns its path and the number of events.
    """
    from my_utils.core.plugins import get_registry, load_component

    checked = check_options(get_registry().get(PluginKind.METRICS_PROVIDER, name), options or {}, "--option")
    factory = load_component(PluginKind.METRICS_PROVIDER, name)
    source = Path(input_path)
    from my_utils.core.safe_io import path_problem, refuse_overwriting_inputs

    if not (source.is_file() or source.is_dir()):
        raise InputError(source, None, path_problem(source))

    # before any work: the events file must never replace the file it is read from
    refuse_overwriting_inputs([events_path(output_dir)], [source] if source.is_file() else [], what="--output-dir file")
    from_input = getattr(factory, "from_input", None)
    if not callable(from_input):
        raise UsageError(
            f"metrics provider {name!r} reads live objects, not files; "
            "use it from Python with MetricsCollector.register_provider(...)"
        )
    from my_utils.core.plugins import options_mismatch

    mismatch = options_mismatch(from_input, source, **checked)
    if mismatch is not None:  # the signature refuses them; a TypeError inside from_input is a bug
        raise UsageError(f"metrics provider {name!r} rejected its options ({mismatch}); "
                         "see `myutils plugins show` for what it reads")
    try:
        # contained: sys.exit or another BaseException in the provider is its failure (exit 1), and
        # what it prints goes to stderr in the CLI
        with plugin_output(), contained():
            provider = from_input(source, **checked)
    except MyUtilsError:
        raise
    except Exception as exc:  # a bug or library error while checking the input: one line, cause chained
        raise ProviderError(name, source, exc) from exc
    try:
        with plugin_output(), contained():
            events = list(provider.collect(None))
    except MyUtilsError:
        raise
    except Exception as exc:  # a bug or library error: one line naming the provider, the cause chained
        raise ProviderError(name, source, exc) from exc
    for i, event in enumerate(events):
        if not isinstance(event, MetricEvent):  # the provider's bug, said before anything is written
            wrong = TypeError(f"collect() returned a {type(event).__name__} as item {i}; expected MetricEvent")
            raise ProviderError(name, source, wrong)
    out = events_path(output_dir)
    count = write_events(out, events)
    return out, count
