"""The body of ``myutils plugins run``, without typer: the typer command and ``cli.run_fast`` both call it.

One body for both runners, so that what a provider run does — the ``--option`` values, the
registry's verdict on the name, the guard around the provider, the progress bar, the final
line — cannot drift between them. Only the writer of that final line is the runner's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from my_utils.core.cli.guard import exit_on_error, plugin_guard
from my_utils.core.errors import InputError
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry, owner_label

__all__ = ["parse_options", "run_metrics_provider"]


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs of ``--option`` as provider options: the value as JSON, else as text; the last wins.

    Raises ``InputError`` for a pair without ``=`` or whose key is not a Python identifier.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputError("--option", None, f"expected KEY=VALUE with a Python identifier as KEY, got {pair!r}")
        try:
            options[key.strip()] = json.loads(raw)
        except ValueError:
            options[key.strip()] = raw  # plain text
    return options


@exit_on_error
def run_metrics_provider(name: str, input_path: Path, output_dir: Path, option: list[str], quiet: bool,
                         echo: Callable[[str], None]) -> None:
    """Run metrics provider ``name`` on ``input_path``, write its events under ``output_dir``, say so with ``echo``.

    Bad input exits with 2; a provider that breaks exits with 1 naming its plugin
    (``cli.guard``).
    """
    from my_utils.core.progress import progress
    from my_utils.core.providers import run_provider_on_input

    options = parse_options(option)
    record = get_registry().record(PluginKind.METRICS_PROVIDER, name)  # unknown/disabled/clash first
    with plugin_guard(f"metrics provider {name!r} from {owner_label(record)}"), \
            progress(None, f"{name}", enabled=not quiet) as bar:
        bar.note(str(input_path))
        out, count = run_provider_on_input(name, input_path, output_dir, options)
        bar.advance(1)
    echo(f"wrote {count} metric events to {out}")
