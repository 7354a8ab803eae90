"""Hook implementations of the demo plugin (light: descriptions only)."""

from __future__ import annotations

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers() -> list[PluginDescription]:
    return [
        PluginDescription(
            name="demo_kv",
            kind=PluginKind.METRICS_PROVIDER,
            factory="my_utils_ext_demo.provider:KeyValueProvider",
            summary="Reads NAME=VALUE lines from *.kv files.",
            inputs=("*.kv",),
        ),
        PluginDescription(
            name="demo_slow",
            kind=PluginKind.METRICS_PROVIDER,
            factory="my_utils_ext_demo.provider:SlowProvider",
            summary="Takes `seconds` to read anything (progress bar tests).",
            inputs=("*",),
        ),
    ]


@hookimpl
def myutils_cli(app):  # type: ignore[no-untyped-def]
    @app.command("demo-hello")
    def demo_hello(name: str = "world") -> None:
        """Say hello from the demo plugin."""
        print(f"hello {name} from myutils-ext-demo")
