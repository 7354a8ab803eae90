"""What a plugin's hook may return: well-formed descriptions, of bounded size.

A hook's result is stored, listed and printed by every command. A plugin returning a million
descriptions or a 100 MB summary would make ``myutils plugins list`` (and each command that
discovers plugins) slow or kill it for memory, so results beyond these bounds are refused
before anything is copied or printed, and the plugin is listed BROKEN saying which bound.
The bounds are far above what a real plugin returns (the seven my_utils distributions
return at most 16 descriptions per hook, with summaries under 200 characters).
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Sequence
from typing import Any

from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind

__all__ = ["MAX_DESCRIPTIONS", "description_problem", "result_problem"]

MAX_DESCRIPTIONS = 256  # per hook and plugin
MAX_NAME = 100
MAX_FACTORY = 300
MAX_SUMMARY = 2000
MAX_ITEMS = 64  # inputs, extras, options, choices
MAX_ITEM = 300  # one input pattern, extra, option name or option help
MAX_DEFAULT = 1000  # the characters of an option's default shown by `plugins show`

# fullmatch only: ``$`` would also accept a final newline
_FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_NAME = re.compile(r"[\w.\-]+")  # no blanks, commas or colons: names are typed in MYUTILS_DISABLE_PLUGINS
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def _short(value: Any) -> str:
    """A bounded repr for built-in values; only the type of anything else (its repr is plugin code)."""
    if value is None or isinstance(value, (str, bytes, int, float, bool, list, tuple, dict)):
        return _REPR.repr(value)
    return f"a {type(value).__name__}"


def result_problem(result: Any, hook: str) -> str | None:
    """Why a hook's whole result is refused (not a list, or too long), or None."""
    # a str is a Sequence too: without this check each character became a BROKEN row
    if isinstance(result, (str, bytes, PluginDescription)) or not isinstance(result, Sequence):
        return f"hook {hook} must return a list of PluginDescription, got {type(result).__name__}"
    try:
        count = len(result)
    except Exception as exc:  # a Sequence whose __len__ fails is the plugin's bug
        return f"hook {hook} returned a {type(result).__name__} whose len() raised {type(exc).__name__}"
    if count > MAX_DESCRIPTIONS:
        return f"hook {hook} returned {count} descriptions; at most {MAX_DESCRIPTIONS} are accepted"
    return None


def _text_problem(value: Any, what: str, limit: int) -> str | None:
    if not isinstance(value, str):
        return f"{what} must be a str, got {type(value).__name__}"
    if len(value) > limit:
        return f"{what} is {len(value)} characters long; at most {limit} are accepted"
    return None


def _texts_problem(values: Any, what: str) -> str | None:
    if not isinstance(values, (tuple, list)):
        return f"{what} must be a tuple of str, got {type(values).__name__}"
    if len(values) > MAX_ITEMS:
        return f"{what} has {len(values)} items; at most {MAX_ITEMS} are accepted"
    for value in values:
        problem = _text_problem(value, f"each of {what}", MAX_ITEM)
        if problem:
            return problem
    return None


def _option_problem(spec: Any) -> str | None:
    if not isinstance(spec, OptionSpec):
        return f"each option must be an OptionSpec, got {type(spec).__name__}"
    problem = _text_problem(spec.name, "an option name", MAX_NAME) or _text_problem(
        spec.help, f"the help of option {spec.name!r}", MAX_SUMMARY)
    if problem:
        return problem
    if not isinstance(spec.choices, (tuple, list)) or len(spec.choices) > MAX_ITEMS:
        return f"option {spec.name!r}: choices must be a tuple of at most {MAX_ITEMS} values"
    if isinstance(spec.default, (str, bytes)) and len(spec.default) > MAX_DEFAULT:
        return f"option {spec.name!r}: its default is {len(spec.default)} characters long; at most {MAX_DEFAULT}"
    return None


def description_problem(kind: PluginKind, desc: Any) -> str | None:
    """Why one description returned by the hook of ``kind`` is refused, or None."""
    if not isinstance(desc, PluginDescription):
        return f"returned {_short(desc)}; expected PluginDescription(kind={kind})"
    problem = _text_problem(desc.name, "the name", MAX_NAME)
    if problem:
        return problem
    if desc.kind is not kind:
        return f"returned {desc.name!r} of kind {desc.kind}; expected kind {kind}"
    if not _NAME.fullmatch(desc.name):
        return f"name {desc.name!r} must be letters, digits, '_', '-' or '.' (no blanks, commas or colons)"
    problem = _text_problem(desc.factory, f"{desc.name!r}: the factory", MAX_FACTORY)
    if problem:
        return problem
    if not _FACTORY.fullmatch(desc.factory):
        return f"{desc.name!r}: factory {desc.factory!r} is not of the form 'module:attribute'"
    problem = (_text_problem(desc.summary, f"{desc.name!r}: the summary", MAX_SUMMARY)
               or _texts_problem(desc.inputs, f"{desc.name!r}: inputs")
               or _texts_problem(desc.extras, f"{desc.name!r}: extras"))
    if problem:
        return problem
    if not isinstance(desc.options, (tuple, list)) or len(desc.options) > MAX_ITEMS:
        return f"{desc.name!r}: options must be a tuple of at most {MAX_ITEMS} OptionSpec"
    for spec in desc.options:
        problem = _option_problem(spec)
        if problem:
            return f"{desc.name!r}: {problem}"
    return None
