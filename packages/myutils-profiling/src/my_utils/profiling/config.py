"""Collector configuration files (JSON or YAML) and building a collector from them.

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

``provider`` is a plugin name (``myutils plugins list``); ``input`` is a file or folder,
relative to the config file's folder; ``options`` go to the provider's ``from_input``.
Errors raise ``ConfigError`` naming the file and the key (``providers[1].input``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError, InputError, PluginError, UnknownPluginError
from my_utils.core.plugin_types import PluginKind

_log = logging.getLogger("my_utils.profiling.config")

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
    if not isinstance(data, dict):
        raise ConfigError(p, None, f"a mapping at the top level; found {type(data).__name__}")
    return data


def build_collector(cls: Any, cfg: Mapping[str, Any] | str | Path, *, ignore_provider_errors: bool = False,
                    **overrides: Any) -> Any:
    """Build ``cls`` (a MetricsCollector) and its providers from a config."""
    from my_utils.profiling.collector import ProviderFailure

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
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        raise ConfigError(where, "rank", f"an integer; found {rank!r}")
    output_dir = overrides.pop("output_dir", None) or data.get("output_dir") or "./metrics_out"
    if not isinstance(output_dir, (str, Path)):
        raise ConfigError(where, "output_dir", f"a path string; found {output_dir!r}")
    collector = cls(output_dir, run_id=overrides.pop("run_id", None) or run_id, rank=rank)
    providers = data.get("providers", [])
    if not isinstance(providers, list):
        raise ConfigError(where, "providers", f"a list of provider entries; found {type(providers).__name__}")
    for i, entry in enumerate(providers):
        key = f"providers[{i}]"
        try:
            provider = _build_provider(where, base, key, entry)
        except (InputError, PluginError) as exc:
            if not ignore_provider_errors:
                raise
            name = entry.get("provider") if isinstance(entry, Mapping) else None
            _log.warning("skipping %s (%s): %s", key, name, exc)
            collector.failures.append(ProviderFailure(str(name), key, str(exc)))
            continue
        if provider is not None:
            collector.register_provider(provider)
    return collector


def _build_provider(where: str, base: Path, key: str, entry: Any) -> Any:
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
    factory = desc.load()
    from_input = getattr(factory, "from_input", None)
    if not callable(from_input):
        raise ConfigError(where, f"{key}.provider",
                          f"a provider that reads files; {name!r} reads live objects: register it from Python")
    raw_input = entry.get("input")
    if not isinstance(raw_input, str) or not raw_input:
        raise ConfigError(where, f"{key}.input", "the path of a file or folder to read")
    options = entry.get("options", {})
    if not isinstance(options, Mapping):
        raise ConfigError(where, f"{key}.options", f"an object of provider options; found {type(options).__name__}")
    path = Path(raw_input).expanduser()
    if not path.is_absolute():
        path = base / path
    if not path.exists():
        raise ConfigError(where, f"{key}.input", f"an existing file or folder; {path} does not exist")
    try:
        return from_input(path, **options)
    except TypeError as exc:
        raise ConfigError(where, f"{key}.options", f"options accepted by {name!r} ({exc})") from None
