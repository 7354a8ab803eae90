"""Imports fine but raises inside its hook."""

from my_utils.core.hookspecs import hookimpl


@hookimpl
def myutils_metrics_providers():  # type: ignore[no-untyped-def]
    raise RuntimeError("demo failure inside the hook")


@hookimpl
def myutils_cli(app):  # type: ignore[no-untyped-def]
    raise RuntimeError("demo failure while adding commands")
