"""Implements a hook that does not exist (one letter short): refused, with a suggestion."""

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_capture_backend():  # type: ignore[no-untyped-def]
    return [PluginDescription("never_seen", PluginKind.CAPTURE_BACKEND, "json:dumps", "never registered")]
