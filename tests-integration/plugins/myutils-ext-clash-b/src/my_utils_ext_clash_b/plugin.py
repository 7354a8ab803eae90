"""Offers ``kv_twin`` too: a clash between two third parties."""

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers():  # type: ignore[no-untyped-def]
    return [
        PluginDescription("kv_twin", PluginKind.METRICS_PROVIDER, "my_utils_ext_demo.provider:KeyValueProvider",
                          "kv reader of clash-b"),
    ]
