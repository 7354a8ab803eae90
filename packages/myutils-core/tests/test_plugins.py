"""The plugin registry: discovery through entry points, one guard per plugin, disabling."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from collections.abc import Iterator

import pytest

from my_utils.core.errors import UnknownPluginError
from my_utils.core.hookspecs import ENTRY_POINT_GROUP, hookimpl
from my_utils.core.plugin_errors import PluginClashError
from my_utils.core.plugin_types import PluginDescription, PluginKind, PluginStatus
from my_utils.core.plugins import PluginRegistry, disabled_names, get_registry, reset_registry


def _desc(name: str, kind: PluginKind = PluginKind.METRICS_PROVIDER) -> PluginDescription:
    return PluginDescription(name=name, kind=kind, factory="json:dumps", summary=f"{name} summary")


@pytest.fixture
def fake_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, types.ModuleType]]:
    """Importable plugin modules living only in sys.modules."""
    good = types.ModuleType("fakeplug_good")
    good.myutils_metrics_providers = hookimpl(lambda: [_desc("alpha"), _desc("beta")])  # type: ignore[attr-defined]
    good.myutils_capture_backends = hookimpl(  # type: ignore[attr-defined]
        lambda: [_desc("rec", PluginKind.CAPTURE_BACKEND)]
    )
    hook_fails = types.ModuleType("fakeplug_hookfails")

    def explode() -> list[PluginDescription]:
        raise RuntimeError("boom in hook")

    hook_fails.myutils_metrics_providers = hookimpl(explode)  # type: ignore[attr-defined]
    wrong_type = types.ModuleType("fakeplug_wrongtype")
    wrong_type.myutils_metrics_providers = hookimpl(lambda: ["not a description"])  # type: ignore[attr-defined]
    dup = types.ModuleType("fakeplug_dup")
    dup.myutils_metrics_providers = hookimpl(lambda: [_desc("alpha")])  # type: ignore[attr-defined]
    bad_sig = types.ModuleType("fakeplug_badsig")
    bad_sig.myutils_metrics_providers = hookimpl(lambda unexpected: [])  # type: ignore[attr-defined]
    modules = {m.__name__: m for m in (good, hook_fails, wrong_type, dup, bad_sig)}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    yield modules


def _eps(*pairs: tuple[str, str]) -> list[importlib.metadata.EntryPoint]:
    return [importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in pairs]


def test_good_plugin_components_are_listed(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(_eps(("good", "fakeplug_good")), disabled=())
    assert sorted(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["alpha", "beta"]
    assert list(reg.descriptions(PluginKind.CAPTURE_BACKEND)) == ["rec"]
    rows = reg.records()
    assert [(r.name, r.kind, r.status) for r in rows] == [
        ("rec", "capture_backend", PluginStatus.OK),
        ("alpha", "metrics_provider", PluginStatus.OK),
        ("beta", "metrics_provider", PluginStatus.OK),
    ]


def test_each_plugin_fails_alone(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(
        _eps(
            ("missing", "fakeplug_does_not_exist"),
            ("hookfails", "fakeplug_hookfails"),
            ("good", "fakeplug_good"),
            ("wrongtype", "fakeplug_wrongtype"),
            ("badsig", "fakeplug_badsig"),
        ),
        disabled=(),
    )
    assert sorted(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["alpha", "beta"]
    broken = {r.plugin: r.reason for r in reg.records() if r.status is PluginStatus.BROKEN}
    assert set(broken) == {"missing", "hookfails", "wrongtype", "badsig"}
    assert "ModuleNotFoundError" in broken["missing"] and "fakeplug_does_not_exist" in broken["missing"]
    assert broken["hookfails"] == "RuntimeError: boom in hook"
    assert "expected PluginDescription" in broken["wrongtype"]
    assert "PluginValidationError" in broken["badsig"]


@pytest.mark.parametrize("order", [("good", "dup"), ("dup", "good")])
def test_third_party_clash_is_never_settled_by_order(
    fake_plugins: dict[str, types.ModuleType], order: tuple[str, str]
) -> None:
    reg = PluginRegistry(_eps(*[(n, f"fakeplug_{n}") for n in order]), disabled=())
    alpha = [r for r in reg.records() if r.name == "alpha"]
    assert sorted(r.plugin for r in alpha) == ["dup", "good"]
    assert all(r.status is PluginStatus.BROKEN and r.reason.startswith("name clash") for r in alpha)
    assert "alpha" not in reg.descriptions(PluginKind.METRICS_PROVIDER)
    with pytest.raises(PluginClashError) as info:
        reg.get(PluginKind.METRICS_PROVIDER, "alpha")
    assert "plugin 'good'" in str(info.value) and "plugin 'dup'" in str(info.value)
    assert "MYUTILS_DISABLE_PLUGINS=" in str(info.value)
    # disabling one side, by PLUGIN:NAME, settles it for that name only
    settled = PluginRegistry(_eps(*[(n, f"fakeplug_{n}") for n in order]), disabled={"dup:alpha"})
    assert settled.record(PluginKind.METRICS_PROVIDER, "alpha").plugin == "good"


def test_duplicate_entry_point_names(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(_eps(("same", "fakeplug_good"), ("same", "fakeplug_dup")), disabled=())
    rows = [r for r in reg.records() if r.plugin == "same" and r.status is PluginStatus.BROKEN]
    assert rows and "already used" in rows[0].reason


def test_disable_by_plugin_or_component_name(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(
        _eps(("good", "fakeplug_good"), ("hookfails", "fakeplug_hookfails"), ("ghost", "fakeplug_absent")),
        disabled={"hookfails", "beta", "ghost"},
    )
    assert list(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["alpha"]
    statuses = {r.name: r.status for r in reg.records()}
    # "ghost" points at a module that does not exist: disabled means it was never imported
    assert statuses == {
        "alpha": PluginStatus.OK, "rec": PluginStatus.OK, "hookfails": PluginStatus.DISABLED,
        "beta": PluginStatus.DISABLED, "ghost": PluginStatus.DISABLED,
    }


def test_disabled_names_parsing() -> None:
    assert disabled_names({"MYUTILS_DISABLE_PLUGINS": " a, b ,,c "}) == {"a", "b", "c"}
    assert disabled_names({}) == frozenset()


def test_unknown_component_lists_installed(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(_eps(("good", "fakeplug_good")), disabled=())
    with pytest.raises(UnknownPluginError) as info:
        reg.get(PluginKind.CAPTURE_BACKEND, "nsight")
    assert str(info.value) == "no capture backend named 'nsight' is installed; installed: rec"
    assert reg.get(PluginKind.METRICS_PROVIDER, "alpha").load() is __import__("json").dumps


def test_description_load_rejects_malformed_factory() -> None:
    with pytest.raises(ValueError, match="not of the form 'module:attribute'"):
        PluginDescription("x", PluginKind.EVENT_SINK, "no_colon_here", "s").load()


def test_cli_hook_failures_are_isolated(fake_plugins: dict[str, types.ModuleType]) -> None:
    import typer

    calls: list[str] = []
    ok_cli = types.ModuleType("fakeplug_cli_ok")
    ok_cli.myutils_cli = hookimpl(lambda app: calls.append("ok"))  # type: ignore[attr-defined]
    bad_cli = types.ModuleType("fakeplug_cli_bad")

    def bad(app: typer.Typer) -> None:
        raise KeyError("cli boom")

    bad_cli.myutils_cli = hookimpl(bad)  # type: ignore[attr-defined]
    reg = PluginRegistry([], disabled=())
    reg.register(bad_cli, "bad_cli", "dist-bad", "1.0")
    reg.register(ok_cli, "ok_cli")
    failures = reg.extend_cli(typer.Typer())
    assert calls == ["ok"]
    assert [(f.plugin, f.kind, f.distribution) for f in failures] == [("bad_cli", "cli", "dist-bad")]
    reg.extend_cli(typer.Typer())  # a second app: the failure is still listed once
    assert [r.plugin for r in reg.records() if r.kind == "cli"] == ["bad_cli"]


def test_installed_distributions_register_their_builtins() -> None:
    reset_registry()
    reg = get_registry()
    assert get_registry() is reg  # cached
    rows = {(r.name, r.kind): r for r in reg.records()}
    jsonl = rows[("jsonl", "event_sink")]
    assert jsonl.distribution == "myutils-core" and jsonl.status is PluginStatus.OK
    plugins = {r.plugin for r in reg.records()}
    assert "core" in plugins
    reset_registry()
    assert get_registry() is not reg
