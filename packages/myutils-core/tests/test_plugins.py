"""The plugin registry: discovery through entry points, one guard per plugin, disabling."""

from __future__ import annotations

import importlib.metadata
import sys
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UnknownPluginError
from my_utils.core.hookspecs import ENTRY_POINT_GROUP, hookimpl
from my_utils.core.plugin_errors import PluginClashError, PluginDisabledError, PluginLoadError
from my_utils.core.plugin_policy import DisableList
from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind, PluginStatus
from my_utils.core.plugins import (
    PluginRegistry,
    disabled_names,
    get_registry,
    load_component,
    options_mismatch,
    reset_registry,
)


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


def _module(name: str, **hooks: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook, function in hooks.items():
        setattr(module, hook, hookimpl(function))
    return module


def test_a_str_result_is_one_broken_row() -> None:
    reg = PluginRegistry([], disabled=())
    reg.register(_module("s", myutils_metrics_providers=lambda: "json:dumps"), "s", "dist-s", "1")
    rows = reg.records()
    assert [(r.plugin, r.status, r.reason) for r in rows] == [
        ("s", PluginStatus.BROKEN, "hook myutils_metrics_providers must return a list of PluginDescription, got str")
    ]


def test_a_misspelled_hook_refuses_the_plugin_with_a_suggestion() -> None:
    import pluggy

    reg = PluginRegistry([], disabled=())
    plugin = _module("m", myutils_capture_backend=lambda: [_desc("x", PluginKind.CAPTURE_BACKEND)],
                     myutils_metrics_providers=lambda: [_desc("kept_out")])
    with pytest.raises(pluggy.PluginValidationError,
                       match=r"unknown hook 'myutils_capture_backend' \(did you mean 'myutils_capture_backends'\?\)"):
        reg.register(plugin, "m")
    assert reg.records() == []  # nothing of the plugin was registered, not even its valid hook


def test_wrong_hook_arguments_keep_the_whole_reason_on_one_line(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(_eps(("badsig", "fakeplug_badsig")), disabled=())
    (row,) = reg.records()
    assert "\n" not in row.reason
    assert "hookimpl definition: <lambda>(unexpected)" in row.reason
    assert "Argument(s) {'unexpected'} are declared in the hookimpl but can not be found in the hookspec" in row.reason


@pytest.mark.parametrize("builtin_first", [True, False])
def test_a_builtin_is_never_displaced(builtin_first: bool) -> None:
    reg = PluginRegistry([], disabled=())
    plugins = [(_module("b", myutils_metrics_providers=lambda: [_desc("mytimer")]), "profiling", "myutils-profiling"),
               (_module("t", myutils_metrics_providers=lambda: [_desc("mytimer")]), "ext_t", "myutils-ext-t")]
    for module, name, dist in plugins if builtin_first else plugins[::-1]:
        reg.register(module, name, dist, "1.0")
    assert reg.record(PluginKind.METRICS_PROVIDER, "mytimer").distribution == "myutils-profiling"
    (loser,) = [r for r in reg.records() if r.status is PluginStatus.BROKEN]
    assert loser.distribution == "myutils-ext-t"
    assert loser.reason.startswith("name clash: 'mytimer' is the built-in metrics provider of myutils-profiling")


def test_names_are_per_kind() -> None:
    reg = PluginRegistry([], disabled=())
    reg.register(_module("k", myutils_metrics_providers=lambda: [_desc("torch_profiler")],
                         myutils_capture_backends=lambda: [_desc("torch_profiler", PluginKind.CAPTURE_BACKEND)]), "k")
    assert all(r.status is PluginStatus.OK for r in reg.records()) and len(reg.records()) == 2


def test_disabled_and_broken_components_say_so() -> None:
    reg = PluginRegistry([], disabled={"alpha"})
    reg.register(_module("d", myutils_metrics_providers=lambda: [
        _desc("alpha"), PluginDescription("bad name", PluginKind.METRICS_PROVIDER, "json:dumps", "s"),
        PluginDescription("nofactory", PluginKind.METRICS_PROVIDER, "json.dumps", "s")]), "d", "dist-d", "2")
    with pytest.raises(PluginDisabledError, match=r"metrics provider 'alpha' is installed but disabled by "
                                                  r"MYUTILS_DISABLE_PLUGINS \(entry 'alpha'\)"):
        reg.get(PluginKind.METRICS_PROVIDER, "alpha")
    reasons = {r.name: r.reason for r in reg.records() if r.status is PluginStatus.BROKEN}
    assert "no blanks, commas or colons" in reasons["bad name"]
    assert "factory 'json.dumps' is not of the form 'module:attribute'" in reasons["nofactory"]
    with pytest.raises(PluginLoadError, match=r"metrics provider 'nofactory' from plugin 'd' \(dist-d 2\) is broken"):
        reg.get(PluginKind.METRICS_PROVIDER, "nofactory")


def test_unknown_name_mentions_disabled_plugins(fake_plugins: dict[str, types.ModuleType]) -> None:
    reg = PluginRegistry(_eps(("good", "fakeplug_good"), ("ghost", "fakeplug_absent")), disabled={"ghost"})
    with pytest.raises(UnknownPluginError) as info:
        reg.get(PluginKind.METRICS_PROVIDER, "gamma")
    assert str(info.value) == ("no metrics provider named 'gamma' is installed; installed: alpha, beta "
                               "(not searched: plugins ghost are disabled by MYUTILS_DISABLE_PLUGINS)")


def test_check_imports_every_factory_and_load_component_names_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = PluginRegistry([], disabled=())
    reg.register(_module("f", myutils_event_sinks=lambda: [
        PluginDescription("fine", PluginKind.EVENT_SINK, "json:dumps", "s"),
        PluginDescription("gone", PluginKind.EVENT_SINK, "my_utils_nowhere.sink:Sink", "s")]), "f", "dist-f", "3")
    assert {r.name: r.status for r in reg.records()} == {"fine": PluginStatus.OK, "gone": PluginStatus.OK}
    checked = {r.name: r for r in reg.check()}
    assert checked["fine"].status is PluginStatus.OK and checked["gone"].status is PluginStatus.BROKEN
    assert "No module named 'my_utils_nowhere'" in checked["gone"].reason
    monkeypatch.setattr("my_utils.core.plugins.get_registry", lambda: reg)
    with pytest.raises(PluginLoadError) as info:
        load_component(PluginKind.EVENT_SINK, "gone")
    assert str(info.value).startswith("event sink 'gone' from plugin 'f' (dist-f 3) cannot be imported: "
                                      "ModuleNotFoundError: No module named 'my_utils_nowhere'")


def test_disable_list_scopes() -> None:
    rules = DisableList.parse(["ext_a", "ext_b:foo", "myutils-ext-c:bar", " "])
    assert rules.plugin_entry("ext_a") == "ext_a" and rules.plugin_entry("ext_b") is None
    assert rules.component_entry("ext_a", "other", None) == "ext_a"  # a bare name: every kind, every plugin
    assert rules.component_entry("foo", "ext_b", None) == "ext_b:foo"
    assert rules.component_entry("foo", "ext_x", None) is None
    assert rules.component_entry("bar", "ext_c", "myutils-ext-c") == "myutils-ext-c:bar"


def test_options_mismatch_tells_a_bad_call_from_a_bug_inside() -> None:
    class Backend:
        def __init__(self, output_dir: str = ".", *, every: int = 1) -> None:
            raise TypeError("a bug inside __init__")

    assert options_mismatch(Backend, output_dir="x", every=2) is None  # the TypeError inside is not ours
    why = options_mismatch(Backend, outptu_dir="x")
    assert why == "got an unexpected keyword argument 'outptu_dir'; it accepts output_dir, every"
    assert options_mismatch(len) == "missing a required argument: 'obj'; it accepts no options"


# -- rule 4: a plugin cannot take the host down (in-process; the CLI side is test_cli_isolation) -----


def _plugin_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **sources: str) -> None:
    """Importable modules ``NAME`` written from ``sources`` (imported only when an entry point loads them)."""
    for name, text in sources.items():
        (tmp_path / f"{name}.py").write_text(text)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))


PROVIDES = ("from my_utils.core.hookspecs import hookimpl\n"
            "from my_utils.core.plugin_types import PluginDescription, PluginKind\n"
            "@hookimpl\n"
            "def myutils_metrics_providers():\n"
            "    return [PluginDescription('{name}', PluginKind.METRICS_PROVIDER, 'json:dumps', 's')]\n")


def test_base_exceptions_at_import_and_in_hooks_are_broken_rows(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin_modules(
        tmp_path, monkeypatch,
        r4_exit="import sys\nsys.exit(0)\n",
        r4_boom="class Boom(BaseException):\n    pass\nraise Boom('at import')\n",
        r4_interrupt="raise KeyboardInterrupt\n",  # in the import thread only the plugin can raise it
        r4_genexit=PROVIDES.format(name="g").replace("    return [", "    raise GeneratorExit\n    return ["),
        r4_hookexit=PROVIDES.format(name="h").replace("    return [", "    raise SystemExit(4)\n    return ["),
        r4_good=PROVIDES.format(name="good_one"),
    )
    monkeypatch.setenv("MYUTILS_PLUGIN_IMPORT_TIMEOUT", "30")
    reg = PluginRegistry(_eps(*[(n, f"r4_{n}") for n in ("exit", "boom", "interrupt", "genexit", "hookexit",
                                                          "good")]), disabled=())
    assert list(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["good_one"]
    broken = {r.plugin: r.reason for r in reg.records() if r.status is PluginStatus.BROKEN}
    assert broken == {
        "exit": "SystemExit: the plugin called sys.exit(0)",
        "boom": "Boom: at import",
        "interrupt": "KeyboardInterrupt: raised with no message",
        "genexit": "GeneratorExit: raised with no message",
        "hookexit": "SystemExit: the plugin called sys.exit(4)",
    }


def test_an_import_that_hangs_is_abandoned_after_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the "hang" ends by itself after 3 s, so the abandoned thread does not outlive the test session
    _plugin_modules(tmp_path, monkeypatch, r4_slow="import time\ntime.sleep(3)\n", r4_fine=PROVIDES.format(name="fine"))
    monkeypatch.setenv("MYUTILS_PLUGIN_IMPORT_TIMEOUT", "0.3")
    started = time.monotonic()
    reg = PluginRegistry(_eps(("slow", "r4_slow"), ("fine", "r4_fine")), disabled=())
    assert time.monotonic() - started < 2.5
    assert list(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["fine"]
    (row,) = [r for r in reg.records() if r.status is PluginStatus.BROKEN]
    assert (row.plugin, row.reason) == ("slow", "PluginTimeout: import of 'r4_slow' did not finish within 0.3 s "
                                                "(set MYUTILS_PLUGIN_IMPORT_TIMEOUT to wait longer)")


class _Endless(Sequence[PluginDescription]):
    """A lazy Sequence claiming 10**9 items: refused by its length, never iterated."""

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("iterated")


BIG = "x" * 3_000_000


@pytest.mark.parametrize(("result", "reason"), [
    ([_desc(f"n{i}") for i in range(257)], "hook myutils_metrics_providers returned 257 descriptions; "
                                           "at most 256 are accepted"),
    (_Endless(), "hook myutils_metrics_providers returned 1000000000 descriptions; at most 256 are accepted"),
    ((x for x in ()), "hook myutils_metrics_providers must return a list of PluginDescription, got generator"),
    ([BIG], f"hook myutils_metrics_providers: returned '{'x' * 37}...{'x' * 38}'; "
            "expected PluginDescription(kind=PluginKind.METRICS_PROVIDER)"),
    ([PluginDescription("big", PluginKind.METRICS_PROVIDER, "json:dumps", BIG)],
     "hook myutils_metrics_providers: 'big': the summary is 3000000 characters long; at most 2000 are accepted"),
    ([PluginDescription("big", PluginKind.METRICS_PROVIDER, "json:dumps", "s", inputs=BIG)],  # type: ignore[arg-type]
     "hook myutils_metrics_providers: 'big': inputs must be a tuple of str, got str"),
    ([PluginDescription("big", PluginKind.METRICS_PROVIDER, "json:dumps", "s", inputs=("*.x",) * 65)],
     "hook myutils_metrics_providers: 'big': inputs has 65 items; at most 64 are accepted"),
    ([PluginDescription("big", PluginKind.METRICS_PROVIDER, "json:dumps", "s",
                        options=(OptionSpec("o", str, BIG, "h"),))],
     "hook myutils_metrics_providers: 'big': option 'o': its default is 3000000 characters long; at most 1000"),
    ([PluginDescription("n" * 101, PluginKind.METRICS_PROVIDER, "json:dumps", "s")],
     "hook myutils_metrics_providers: the name is 101 characters long; at most 100 are accepted"),
    ([PluginDescription("alpha\n", PluginKind.METRICS_PROVIDER, "json:dumps", "s")],
     "hook myutils_metrics_providers: name 'alpha\\n' must be letters, digits, '_', '-' or '.' "
     "(no blanks, commas or colons)"),
    ([PluginDescription("alpha", PluginKind.METRICS_PROVIDER, "json:dumps\n", "s")],
     "hook myutils_metrics_providers: 'alpha': factory 'json:dumps\\n' is not of the form 'module:attribute'"),
])
def test_hook_results_are_bounded_and_well_formed(result: object, reason: str) -> None:
    reg = PluginRegistry([], disabled=())
    reg.register(_module("h", myutils_metrics_providers=lambda: result), "h", "dist-h", "1")
    reg.register(_module("ok", myutils_metrics_providers=lambda: [_desc("fine")]), "ok", "dist-ok", "1")
    assert list(reg.descriptions(PluginKind.METRICS_PROVIDER)) == ["fine"]
    assert [r.reason for r in reg.records() if r.status is PluginStatus.BROKEN] == [reason]


def test_a_huge_exception_message_is_a_bounded_reason() -> None:
    def explode() -> list[PluginDescription]:
        raise RuntimeError(BIG)

    reg = PluginRegistry([], disabled=())
    reg.register(_module("e", myutils_metrics_providers=explode), "e", "dist-e", "1")
    (row,) = reg.records()
    assert row.status is PluginStatus.BROKEN and len(row.reason) <= 520
    assert row.reason.startswith("RuntimeError: xxx") and row.reason.endswith("... (3000000 characters in all)")


def test_an_unknown_name_says_which_plugins_broke_before_saying_what_they_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plugin_modules(tmp_path, monkeypatch, r4_gone="raise ImportError('needs a missing library')\n")
    reg = PluginRegistry(_eps(("gone", "r4_gone")), disabled=())
    reg.register(_module("hk", myutils_metrics_providers=lambda: 5), "hk", "dist-hk", "2")
    with pytest.raises(UnknownPluginError) as info:
        reg.get(PluginKind.METRICS_PROVIDER, "gamma")
    assert str(info.value) == ("no metrics provider named 'gamma' is installed; installed: none (not searched: "
                               "plugin 'gone' (no distribution) and plugin 'hk' (dist-hk 2) are BROKEN; "
                               "`myutils plugins list` says why)")


def test_a_factory_import_that_hangs_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin_modules(tmp_path, monkeypatch, r4_slowfactory="import time\ntime.sleep(3)\nProvider = object\n")
    monkeypatch.setenv("MYUTILS_PLUGIN_IMPORT_TIMEOUT", "0.3")
    reset_registry()
    try:
        get_registry().register(_module("sf", myutils_metrics_providers=lambda: [PluginDescription(
            "slowfactory", PluginKind.METRICS_PROVIDER, "r4_slowfactory:Provider", "s")]), "sf", "dist-sf", "1")
        started = time.monotonic()
        (row,) = [r for r in get_registry().check() if r.name == "slowfactory"]
        assert row.status is PluginStatus.BROKEN and row.reason == (
            "factory 'r4_slowfactory:Provider' cannot be imported: PluginTimeout: import of factory "
            "'r4_slowfactory:Provider' did not finish within 0.3 s (set MYUTILS_PLUGIN_IMPORT_TIMEOUT to wait longer)")
        with pytest.raises(PluginLoadError, match=r"^metrics provider 'slowfactory' from plugin 'sf' \(dist-sf 1\) "
                                                  r"cannot be imported: PluginTimeout: import of factory"):
            load_component(PluginKind.METRICS_PROVIDER, "slowfactory")
        assert time.monotonic() - started < 2.5
    finally:
        reset_registry()
