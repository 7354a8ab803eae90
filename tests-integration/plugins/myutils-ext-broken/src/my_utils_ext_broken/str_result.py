"""Returns a str instead of a list: one BROKEN row, not one per character."""

from my_utils.core.hookspecs import hookimpl


@hookimpl
def myutils_metrics_providers():  # type: ignore[no-untyped-def]
    return "my_utils_ext_broken.provider:Provider"
