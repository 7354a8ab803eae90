"""Hooks of the chaos plugin: a provider, a rule and a command, each misbehaving on demand."""

from __future__ import annotations

from typing import Any

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind
from my_utils_ext_chaos import _NOTHING, act


@hookimpl
def myutils_metrics_providers() -> Any:
    instead = act("hook")
    if instead is _NOTHING:
        return [PluginDescription("chaos_kv", PluginKind.METRICS_PROVIDER, "my_utils_ext_chaos.provider:ChaosProvider",
                                  "Reads any file into one event, unless told to misbehave.", ("*",))]
    if instead.kind == "huge" and instead.arg > 0:  # that many descriptions
        return [PluginDescription(f"chaos_{i}", PluginKind.METRICS_PROVIDER, "m:C", "s") for i in range(instead.arg)]
    if instead.kind == "huge":  # one summary of -arg characters
        return [PluginDescription("chaos_kv", PluginKind.METRICS_PROVIDER, "m:C", "x" * -instead.arg)]
    return instead.arg  # "wrong": a str, a number, a dict, a list of numbers...


@hookimpl
def myutils_analysis_rules() -> list[PluginDescription]:
    return [PluginDescription("chaos_rule", PluginKind.ANALYSIS_RULE, "my_utils_ext_chaos.provider:ChaosRule",
                              "Finds nothing, unless told to misbehave.")]


@hookimpl
def myutils_cli(app: Any) -> None:
    act("cli_hook")

    @app.command("chaos-hello")
    def chaos_hello() -> None:
        """Say hello from the chaos plugin."""
        print("hello from myutils-ext-chaos")
