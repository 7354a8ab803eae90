"""Valid descriptions and commands; the failures happen only when a component is used."""

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind

_P = "my_utils_ext_faulty.providers"


@hookimpl
def myutils_metrics_providers():  # type: ignore[no-untyped-def]
    def provider(name: str, factory: str) -> PluginDescription:
        return PluginDescription(name, PluginKind.METRICS_PROVIDER, factory, f"fails: {name}", ("*",))

    return [
        provider("faulty_import", "my_utils_ext_faulty.needs_missing:Provider"),
        provider("faulty_keyerror", f"{_P}:KeyErrorProvider"),
        provider("faulty_json", f"{_P}:JsonProvider"),
        provider("faulty_typeerror", f"{_P}:TypeErrorProvider"),
    ]


@hookimpl
def myutils_capture_backends():  # type: ignore[no-untyped-def]
    return [PluginDescription("faulty_backend", PluginKind.CAPTURE_BACKEND,
                              "my_utils_ext_faulty.backend:TypeErrorBackend", "fails: a TypeError in __init__")]


@hookimpl
def myutils_cli(app):  # type: ignore[no-untyped-def]
    from my_utils.core.errors import InputError

    @app.command("faulty-input")
    def faulty_input(path: str) -> None:
        """Reports bad input the documented way."""
        raise InputError(path, "line 3", "expected a number")

    @app.command("faulty-crash")
    def faulty_crash() -> None:
        """Has a bug."""
        raise KeyError("missing_column")
