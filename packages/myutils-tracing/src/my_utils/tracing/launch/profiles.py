"""Launch profiles: per framework, the nsys options, environment and launcher a profile of it needs.

A profile is a YAML file (read with ``yaml.safe_load``)::

    framework: vllm
    description: one line
    launcher: the framework's own launch command, as an example
    env: {VLLM_WORKER_MULTIPROC_METHOD: spawn}
    nsys: {trace: [cuda, nvtx, osrt], cuda_graph_trace: node, trace_fork_before_exec: true, ...}
    notes: [what to know when profiling it]
    sources: [where the settings come from]

The shipped ones are in ``profiles/`` (DeepSpeed, Megatron-LM, torchtitan, vLLM, SGLang, the
Hugging Face Trainer); a file of yours with the same keys works the same way. A bad file is a
``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from my_utils.core.errors import ConfigError, UsageError
from my_utils.tracing.launch.nsys_command import NsysOptions

KEYS = frozenset({"framework", "description", "launcher", "env", "nsys", "notes", "sources"})


@dataclass(frozen=True)
class LaunchProfile:
    """One framework's launch profile (see the module docstring)."""

    framework: str
    description: str
    launcher: str
    env: dict[str, str]
    nsys: NsysOptions
    notes: tuple[str, ...]
    sources: tuple[str, ...]
    path: str


def _texts(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(where, f"key {key}", f"a list of text lines; found {value!r}")
    return tuple(value)


def parse_profile(data: Any, where: str) -> LaunchProfile:
    """A profile from its YAML mapping; ConfigError naming the key."""
    if not isinstance(data, dict):
        raise ConfigError(where, None, "a mapping with framework, nsys, env, ...")
    unknown = sorted(set(map(str, data)) - KEYS)
    if unknown:
        raise ConfigError(where, f"key {unknown[0]}", f"one of {', '.join(sorted(KEYS))}")
    framework = data.get("framework")
    if not isinstance(framework, str) or not framework:
        raise ConfigError(where, "key framework", f"the framework's name; found {framework!r}")
    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, (str, int)) for k, v in env.items()):
        raise ConfigError(where, "key env", f"a mapping NAME: value; found {env!r}")
    nsys = data.get("nsys") or {}
    if not isinstance(nsys, dict):
        raise ConfigError(where, "key nsys", f"a mapping of nsys options; found {nsys!r}")
    return LaunchProfile(framework, str(data.get("description") or ""), str(data.get("launcher") or ""),
                         {k: str(v) for k, v in env.items()}, NsysOptions.from_mapping(nsys, where),
                         _texts(data, "notes", where), _texts(data, "sources", where), where)


def load_profile(path: str | os.PathLike[str]) -> LaunchProfile:
    """Read a profile file of yours (``yaml.safe_load``)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(p), None, f"a readable UTF-8 YAML file ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(str(p), f"line {mark.line + 1}" if mark else None, f"valid YAML ({exc})") from None
    return parse_profile(data, str(p))


def framework_profiles() -> dict[str, LaunchProfile]:
    """The shipped profiles by framework name."""
    import yaml

    out = {}
    for entry in sorted(resources.files("my_utils.tracing.launch").joinpath("profiles").iterdir(),
                        key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            profile = parse_profile(yaml.safe_load(entry.read_text(encoding="utf-8")), f"profiles/{entry.name}")
            out[profile.framework] = profile
    return out


def profile_named(name_or_path: str) -> LaunchProfile:
    """A shipped profile by framework name, else a profile file; UsageError listing the shipped ones."""
    shipped = framework_profiles()
    if name_or_path in shipped:
        return shipped[name_or_path]
    if Path(name_or_path).suffix in (".yaml", ".yml"):
        return load_profile(name_or_path)
    raise UsageError(f"no launch profile {name_or_path!r}; shipped: {', '.join(sorted(shipped))}, or give a "
                     "profile .yaml file")
