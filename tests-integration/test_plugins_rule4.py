"""Rule 4, as a property: whatever an installed plugin does wrong, and wherever, every command stays up.

``myutils-ext-chaos`` (``plugins/myutils-ext-chaos``) is installed once per session into a
``PluginEnv``; ``MYUTILS_CHAOS`` tells it what to do wrong (``sys.exit`` with various codes,
a ``BaseException`` of its own, ``GeneratorExit``, an ordinary exception, printing to stdout,
hanging, returning wrong types or huge data) and where (its import, a hook, the provider's
import, ``from_input`` or ``collect``). Hypothesis picks the cases; each runs the commands a
user runs and checks the exit codes an independent oracle expects, that stdout holds only the
command's result (JSON where asked), and that no traceback is printed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from my_utils.core.testing.plugin_env import PluginEnv

HERE = Path(__file__).resolve().parent
OWNER = "plugin 'ext_chaos' (myutils-ext-chaos 0.1.0)"
MARK = "chaos:"  # every line the plugin prints starts with it
IMPORT_TIMEOUT_S = 1

FAILING = ("exit", "base", "genexit", "raise")
EXIT_ARGS = (0, 1, 2, 3, None, "bye")
WRONG = ("a string", 5, {"k": 1}, [1, 2])


@dataclass(frozen=True)
class Chaos:
    """One misbehaviour: what goes wrong (``kind``, ``arg``) and where."""

    where: str
    kind: str
    arg: Any = None

    @property
    def fails(self) -> bool:
        return self.kind in (*FAILING, "hang", "wrong", "huge")


def _cases() -> st.SearchStrategy[Chaos]:
    everywhere = ("import", "hook", "cli_hook", "factory_import", "from_input", "collect")
    failing = st.builds(Chaos, st.sampled_from(everywhere), st.sampled_from(FAILING), st.sampled_from(EXIT_ARGS))
    printing = st.builds(Chaos, st.sampled_from(everywhere), st.just("print"))
    wrong = st.builds(Chaos, st.sampled_from(("hook", "from_input", "collect")), st.just("wrong"),
                      st.sampled_from(WRONG))
    huge = st.builds(Chaos, st.just("hook"), st.just("huge"), st.sampled_from((300_000, -100_000_000)))
    hang = st.builds(Chaos, st.sampled_from(("import", "factory_import")), st.just("hang"))
    return st.one_of(failing, printing, wrong, huge, hang)


@pytest.fixture(scope="session")
def chaos_env(tmp_path_factory: pytest.TempPathFactory) -> PluginEnv:
    env = PluginEnv.create(tmp_path_factory.mktemp("chaos-venv"))
    env.install(HERE / "plugins" / "myutils-ext-chaos")
    return env


@pytest.fixture(scope="session")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chaos-data") / "input.txt"
    path.write_text("twelve bytes")
    return path


def _run(env: PluginEnv, chaos: Chaos, *args: str) -> subprocess.CompletedProcess[str]:
    plan = json.dumps({"where": chaos.where, "kind": chaos.kind, "arg": chaos.arg})
    proc = env.myutils(*args, env={"MYUTILS_CHAOS": plan, "MYUTILS_PLUGIN_IMPORT_TIMEOUT": str(IMPORT_TIMEOUT_S)},
                       timeout=120)
    assert "Traceback" not in proc.stderr, (chaos, args, proc.stderr)
    assert MARK not in proc.stdout, (chaos, args, proc.stdout)  # what the plugin prints never reaches stdout
    return proc


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(MARK)]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _check_case(env: PluginEnv, data: Path, out: Path, chaos: Chaos) -> None:
    where, fails = chaos.where, chaos.fails
    # --version reads metadata only: whatever the plugin does, it is never imported
    version = _run(env, chaos, "--version")
    assert version.returncode == 0 and "myutils-core " in version.stdout and MARK not in version.stderr

    listed = _run(env, chaos, "plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {(r["name"], r["kind"]): r for r in json.loads(listed.stdout)}
    assert rows[("jsonl", "event_sink")]["status"] == "ok"  # everything else keeps working
    provider = rows.get(("chaos_kv", "metrics_provider"))
    if fails and where == "import":
        assert rows[("ext_chaos", "plugin")]["status"] == "BROKEN"
        assert rows[("ext_chaos", "plugin")]["distribution"] == "myutils-ext-chaos"
        assert provider is None
    elif fails and where == "hook":
        assert provider is None or provider["status"] == "BROKEN"
        assert any(r["plugin"] == "ext_chaos" and r["status"] == "BROKEN" for r in rows.values())
    else:
        assert provider is not None and provider["status"] == "ok", rows
    cli_row = rows.get(("ext_chaos", "cli"))
    assert (cli_row is not None and cli_row["status"] == "BROKEN") is (fails and where == "cli_hook")

    checked = _run(env, chaos, "plugins", "check", "--json")
    check_rows = json.loads(checked.stdout)
    assert checked.returncode == (1 if any(r["status"] == "BROKEN" for r in check_rows) else 0)
    imported = next((r for r in check_rows if (r["name"], r["kind"]) == ("chaos_kv", "metrics_provider")), None)
    if where == "factory_import" and fails:
        assert imported is not None and imported["status"] == "BROKEN" and checked.returncode == 1

    helped = _run(env, chaos, "--help")
    assert helped.returncode == 0 and "Usage:" in helped.stdout
    assert ("chaos-hello" in helped.stdout) is not (fails and where in ("import", "cli_hook"))

    ran = _run(env, chaos, "plugins", "run", "chaos_kv", "--input", str(data), "--output-dir", str(out))
    written = out / "metrics_events.jsonl"
    if not fails or where == "cli_hook":
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == f"wrote 1 metric events to {written}\n"
        written.unlink()
    elif chaos.kind == "huge" and chaos.arg < 0:  # offered under its name, refused: a broken component
        assert ran.returncode == 1
        assert _error_line(ran).startswith(f"error: metrics provider 'chaos_kv' from {OWNER} is broken: hook ")
    elif where in ("import", "hook"):  # the plugin broke before offering chaos_kv
        assert ran.returncode == 2
        line = _error_line(ran)
        assert line.startswith("error: no metrics provider named 'chaos_kv'") and OWNER in line and "BROKEN" in line
    elif where == "factory_import":
        assert ran.returncode == 1
        assert _error_line(ran).startswith(f"error: metrics provider 'chaos_kv' from {OWNER} cannot be imported: ")
    else:  # from_input, collect
        assert ran.returncode == 1, ran.stderr
        assert _error_line(ran).startswith(f"error: metrics provider 'chaos_kv' from {OWNER} failed on {data}: ")
    assert not written.exists() and ran.stdout in ("", f"wrote 1 metric events to {written}\n")


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(chaos=_cases())
@example(chaos=Chaos("collect", "exit", 0))  # the reported case: exit 0, no output, no message
@example(chaos=Chaos("import", "hang"))
@example(chaos=Chaos("import", "print"))
@example(chaos=Chaos("from_input", "exit", 3))
@example(chaos=Chaos("factory_import", "hang"))
@example(chaos=Chaos("cli_hook", "exit", "bye"))
@example(chaos=Chaos("hook", "huge", -100_000_000))
def test_no_plugin_misbehaviour_takes_a_command_down(chaos_env: PluginEnv, data_file: Path, tmp_path: Path,
                                                     chaos: Chaos) -> None:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    _check_case(chaos_env, data_file, out, chaos)


def test_a_rule_calling_sys_exit_fails_analyze_naming_the_plugin(chaos_env: PluginEnv, tmp_path: Path) -> None:
    from my_utils.core.events import MetricEvent, write_events

    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [MetricEvent("step_time", 10.0 + i % 3, kind="duration", unit="ms", source="mytimer",
                                      step=i, rank=0) for i in range(20)])
    out = tmp_path / "report"
    proc = _run(chaos_env, Chaos("rule", "exit", 0), "profile", "analyze", "--events", str(events),
                "--output-dir", str(out), "--formats", "json", "--quiet")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert _error_line(proc) == f"error: {OWNER} failed: SystemExit: the plugin called sys.exit(0)"
    assert not out.exists() or not any(out.iterdir())
