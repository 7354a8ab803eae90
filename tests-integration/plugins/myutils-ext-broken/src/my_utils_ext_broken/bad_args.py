"""A hook implementation asking for an argument the specification does not pass."""

from my_utils.core.hookspecs import hookimpl


@hookimpl
def myutils_metrics_providers(config):  # type: ignore[no-untyped-def]
    return []
