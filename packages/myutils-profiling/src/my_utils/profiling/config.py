"""Collector configuration files (JSON or YAML): reading and checking them.

This module owns the config format; ``MetricsCollector.from_config`` (collector.py) turns a
checked config into a collector (config.py never imports the collector).

Format (every key but ``providers`` optional)::

    {
      "output_dir": "./metrics_out",        # relative to the current directory
      "run_id": "baseline",
      "rank": 0,
      "providers": [
        {"provider": "mytimer", "input": "data/profile_rank_0.csv"},
        {"provider": "table_csv", "input": "data/modules.csv",
         "options": {"name_column": "module", "unit": "ms"}},
        {"provider": "torch_profiler", "input": "traces/", "enabled": false}
      ]
    }

``analysis`` (optional) sets what ``collector.analyze()`` and ``ingest --analyze`` use::

      "analysis": {"workload": "inference", "rules": ["bottleneck", "anomalies"],
                   "rule_options": {"bottleneck": {"share": 0.2}}}

``provider`` is a plugin name (``myutils plugins list``); ``input`` is a file or folder,
relative to the config file's folder; ``options`` go to the provider's ``from_input``,
checked against the options it declares (``myutils plugins show NAME`` lists them).
Errors raise ``ConfigError`` naming the file and the key (``providers[1].input``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from my_utils.core.errors import (
    ConfigError,
    InputError,
    MyUtilsError,
    PluginError,
    ProviderError,
    UnknownPluginError,
)
from my_utils.core.plugin_types import PluginKind
from my_utils.core.providers import check_options

TOP_KEYS = ("output_dir", "run_id", "rank", "providers", "analysis", "description")
PROVIDER_KEYS = ("provider", "input", "options", "enabled", "description")


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML (``.yaml``/``.yml``, safe_load) config file into a dict."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(p, None, f"a readable UTF-8 config file ({exc})") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except RecursionError:
            raise ConfigError(p, None, "a config nested less deeply than the YAML reader allows") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            place = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(p, place, f"valid YAML ({problem})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(p, f"line {exc.lineno}, column {exc.colno}", f"valid JSON ({exc.msg})") from None
        except RecursionError:
            raise ConfigError(p, None, "a config nested less deeply than the JSON reader allows") from None
        except ValueError as exc:  # e.g. an integer longer than Python converts
            raise ConfigError(p, None, f"valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(p, None, f"a mapping at the top level; found {type(data).__name__}")
    return data


@dataclass(frozen=True)
class ProviderEntry:
    """One ``providers[i]`` entry of a config, checked: which provider reads which input, with what options."""

    key: str  # "providers[1]": where the entry is in its config
    provider: str
    input: Path
    options: Mapping[str, Any]


ANALYSIS_KEYS = ("workload", "rules", "rule_options")


@dataclass(frozen=True)
class AnalysisSettings:
    """The ``analysis`` section: workload profile, rules to run (None: all) and options per rule."""

    workload: str = "pretrain"
    rules: tuple[str, ...] | None = None
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectorConfig:
    """A checked collector config. Entries that could not be checked are in ``errors`` (key, name, error)."""

    where: str
    output_dir: str | Path
    run_id: str | None
    rank: int | None
    providers: tuple[ProviderEntry, ...]
    errors: tuple[tuple[str, str | None, MyUtilsError], ...] = ()
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)


def parse_config(cfg: Mapping[str, Any] | str | Path, *, keep_going: bool = False) -> CollectorConfig:
    """Read and check a config (dict, or a JSON/YAML file); errors are ``ConfigError`` naming the key.

    With ``keep_going`` an entry that fails its checks is put in ``errors`` instead of
    raising (``ignore_provider_errors``); a malformed top level always raises.
    """
    if isinstance(cfg, (str, Path)):
        where, base = str(cfg), Path(cfg).resolve().parent
        data = load_config(cfg)
    elif isinstance(cfg, Mapping):
        where, base, data = "<config>", Path.cwd(), dict(cfg)
    else:
        raise ConfigError("<config>", None, f"a mapping or the path of a JSON/YAML file; got {type(cfg).__name__}")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(where, f"key {unknown[0]!r}", f"one of {', '.join(TOP_KEYS)}")
    run_id = data.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise ConfigError(where, "run_id", f"a string; found {run_id!r}")
    rank = data.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 2 ** 31):
        shown = f"an integer of {len(str(abs(rank)))} digits" if isinstance(rank, int) and abs(rank) > 2 ** 63 \
            else repr(rank)
        raise ConfigError(where, "rank", f"a rank, an integer from 0 to 2**31-1; found {shown}")
    output_dir = data.get("output_dir", "./metrics_out")
    if output_dir is None:
        output_dir = "./metrics_out"
    if not isinstance(output_dir, (str, Path)) or not str(output_dir):
        shown = f"a {type(output_dir).__name__}" if isinstance(output_dir, (dict, list)) else repr(output_dir)
        raise ConfigError(where, "output_dir", f"a path string; found {shown}")
    providers = data.get("providers", [])
    if not isinstance(providers, list):
        raise ConfigError(where, "providers", f"a list of provider entries; found {type(providers).__name__}")
    entries: list[ProviderEntry] = []
    errors: list[tuple[str, str | None, MyUtilsError]] = []
    for i, raw in enumerate(providers):
        key = f"providers[{i}]"
        try:
            entry = _entry(where, base, key, raw)
        except (InputError, PluginError) as exc:
            if not keep_going:
                raise
            name = raw.get("provider") if isinstance(raw, Mapping) else None
            errors.append((key, name if isinstance(name, str) else None, exc))
            continue
        if entry is not None:
            entries.append(entry)
    analysis = _analysis(where, data.get("analysis"))
    return CollectorConfig(where, output_dir, run_id, rank, tuple(entries), tuple(errors), analysis)


def _analysis(where: str, raw: Any) -> AnalysisSettings:
    """Check the ``analysis`` section: a known workload, installed rules, options each rule declares."""
    from my_utils.core.plugins import get_registry
    from my_utils.profiling.analysis.workloads import WORKLOADS

    if raw is None:
        return AnalysisSettings()
    if not isinstance(raw, Mapping):
        raise ConfigError(where, "analysis", f"an object with {', '.join(ANALYSIS_KEYS)}; found {type(raw).__name__}")
    unknown = sorted(set(raw) - set(ANALYSIS_KEYS))
    if unknown:
        raise ConfigError(where, f"analysis.{unknown[0]}", f"one of {', '.join(ANALYSIS_KEYS)}")
    workload = raw.get("workload", "pretrain")
    if workload not in WORKLOADS:
        raise ConfigError(where, "analysis.workload", f"one of {', '.join(WORKLOADS)}; found {workload!r}")
    installed = get_registry().descriptions(PluginKind.ANALYSIS_RULE)
    rules = raw.get("rules")
    if rules is not None:
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ConfigError(where, "analysis.rules", f"a list of rule names; found {rules!r}")
        for i, name in enumerate(rules):
            if name not in installed:
                raise ConfigError(where, f"analysis.rules[{i}]",
                                  f"an installed analysis rule ({', '.join(sorted(installed))}); found {name!r}")
    options = raw.get("rule_options", {})
    if not isinstance(options, Mapping):
        raise ConfigError(where, "analysis.rule_options", "an object of rule name -> options")
    checked: dict[str, dict[str, Any]] = {}
    for name, opts in options.items():
        if name not in installed:
            raise ConfigError(where, f"analysis.rule_options.{name}",
                              f"an installed analysis rule ({', '.join(sorted(installed))})")
        if not isinstance(opts, Mapping):
            raise ConfigError(where, f"analysis.rule_options.{name}", f"an object of options; found {opts!r}")
        checked[name] = check_options(installed[name], opts, where, f"analysis.rule_options.{name}.")
    return AnalysisSettings(workload, tuple(rules) if rules is not None else None, checked)


def _entry(where: str, base: Path, key: str, entry: Any) -> ProviderEntry | None:
    from my_utils.core.plugins import get_registry

    if not isinstance(entry, Mapping):
        raise ConfigError(where, key, f"an object with 'provider' and 'input'; found {type(entry).__name__}")
    unknown = sorted(set(entry) - set(PROVIDER_KEYS))
    if unknown:
        raise ConfigError(where, f"{key}.{unknown[0]}", f"one of {', '.join(PROVIDER_KEYS)}")
    if entry.get("enabled", True) is False:
        return None
    name = entry.get("provider")
    if not isinstance(name, str) or not name:
        raise ConfigError(where, f"{key}.provider", "a provider plugin name (see `myutils plugins list`)")
    try:
        desc = get_registry().get(PluginKind.METRICS_PROVIDER, name)
    except UnknownPluginError as exc:
        raise ConfigError(where, f"{key}.provider", str(exc)) from None
    raw_input = entry.get("input")
    if not isinstance(raw_input, str) or not raw_input:
        raise ConfigError(where, f"{key}.input", "the path of a file or folder to read")
    options = entry.get("options", {})
    if not isinstance(options, Mapping):
        raise ConfigError(where, f"{key}.options", f"an object of provider options; found {type(options).__name__}")
    checked = check_options(desc, options, where, f"{key}.options.")
    path = Path(raw_input).expanduser()
    if not path.is_absolute():
        path = base / path
    if not path.exists():
        from my_utils.core.safe_io import path_problem

        problem = path_problem(path)  # absent, or a link that loops or leads nowhere: said as what it is
        what = "does not exist" if problem == "no such file or folder" else f"is {problem}"
        raise ConfigError(where, f"{key}.input", f"an existing file or folder; {path} {what}")
    return ProviderEntry(key, name, path, checked)


def open_provider(entry: ProviderEntry, where: str) -> Any:
    """Build the file provider of a checked entry (the provider checks its input's kind at once)."""
    from my_utils.core.plugins import load_component

    factory = load_component(PluginKind.METRICS_PROVIDER, entry.provider)
    from_input = getattr(factory, "from_input", None)
    if not callable(from_input):
        raise ConfigError(where, f"{entry.key}.provider", f"a provider that reads files; {entry.provider!r} reads "
                          "live objects: register it from Python")
    try:
        return from_input(entry.input, **entry.options)
    except MyUtilsError:
        raise
    except TypeError as exc:  # a third-party provider that declares no options
        raise ConfigError(where, f"{entry.key}.options", f"options accepted by {entry.provider!r} ({exc})") from None
    except Exception as exc:  # a bug or library error while checking the input: name the provider
        raise ProviderError(entry.provider, entry.input, exc) from exc
