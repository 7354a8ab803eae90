"""Names a provider like the built-in ``mytimer`` and another like clash-b's ``kv_twin``."""

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers():  # type: ignore[no-untyped-def]
    return [
        PluginDescription("mytimer", PluginKind.METRICS_PROVIDER, "my_utils_ext_demo.provider:KeyValueProvider",
                          "would shadow the built-in mytimer"),
        PluginDescription("kv_twin", PluginKind.METRICS_PROVIDER, "my_utils_ext_demo.provider:KeyValueProvider",
                          "kv reader of clash-a"),
    ]
