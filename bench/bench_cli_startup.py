"""Start-up cost of ``myutils --help`` and ``myutils plugins list`` against ``python -c pass``, in the same run.

    python bench/bench_cli_startup.py [--quick] [--samples N] [--plugins N] [--json OUT]

Goals (issue 22, after issue 2): ``myutils --help`` <= 150 ms above a bare interpreter start,
``myutils plugins list`` <= 250 ms, *with any set of installed plugins*. Two plugin sets run:

* ``built-ins``: the seven my_utils distributions of this interpreter;
* ``+N plugins``: the same plus N third-party plugins (default 20), each a real installed
  distribution (``.dist-info`` with an entry point, in a folder on ``PYTHONPATH``) offering a
  metrics provider and adding a command with two options.

``myutils plugins run torch_profiler`` on a 7-event trace (when myutils-profiling is installed)
is timed too, for information: with the start recorded it runs without typer (``cli.run_fast``).

Each set runs as a user meets it: ``recorded`` (the usual start: entry points from the cache,
the clean start recorded, see ``my_utils.core.cli.start_cache``; the warm-up round records it),
and ``no cache`` (``MYUTILS_NO_CACHE=1``: what a first start after an install costs, and every
start while a plugin is broken). The cache lives in a temporary folder, never the user's.

Every command runs once per round, rounds interleaved, after one warm-up round (file cache,
records). Each run gives two figures: wall time, and the child's own CPU time (user + system,
from ``os.wait4``), which a busy shared machine disturbs far less. Differences and ratios to
the anchor are taken per round, then the median. The ``myutils`` script used is the one beside
this interpreter (the venv's); when there is none, ``python -m my_utils.core``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from _report import (
    Report,
    at_most,
    at_most_above,
    common_args,
    interleave,
    interpreter_label,
    require,
    versions_label,
)
from _temp import bench_tempdir

DEFAULT_SAMPLES, QUICK_SAMPLES = 15, 3
DEFAULT_PLUGINS = 20
#: a 7-event Kineto trace: ``plugins run`` on it is the command's fixed cost
TINY = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
                        for i in range(7)]}

PLUGIN = '''
from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind


@hookimpl
def myutils_metrics_providers():
    return [PluginDescription("bench{i}_kv", PluginKind.METRICS_PROVIDER, "my_utils_ext_bench{i}.provider:Provider",
                              "reads key=value lines", inputs=("*.kv",))]


@hookimpl
def myutils_cli(app):
    from pathlib import Path

    import typer

    @app.command("bench{i}-count")
    def count(path: Path = typer.Argument(..., help="a text file"),
              limit: int = typer.Option(10, help="lines to show")) -> None:
        """Count the lines of a text file."""
        typer.echo(str(sum(1 for _ in path.open())))
'''


def _myutils_command() -> tuple[list[str], str]:
    """The ``myutils`` command to time, and a label saying which one it is and why."""
    beside = Path(sys.executable).parent / "myutils"
    if beside.is_file():
        return [str(beside)], f"myutils = {beside} (beside the interpreter)"
    on_path = shutil.which("myutils")
    if on_path:
        return [on_path], f"myutils = {on_path} (from PATH: not this interpreter's; check it is the same install)"
    return ([sys.executable, "-m", "my_utils.core"],
            "myutils = python -m my_utils.core (no myutils script beside the interpreter or on PATH)")


def _install_plugins(site: Path, count: int) -> None:
    from my_utils.core.testing.plugin_env import write_distribution

    for i in range(count):
        module = f"my_utils_ext_bench{i}"
        write_distribution(site, f"myutils-ext-bench{i}", "1.0", {
            f"{module}/__init__.py": "",
            f"{module}/plugin.py": PLUGIN.format(i=i),
            f"{module}/provider.py": "class Provider:\n    pass\n",
        }, {f"ext_bench{i}": f"{module}.plugin"})


def _timer(cmd: list[str], env: Mapping[str, str]) -> Callable[[], tuple[float, float]]:
    """A sampler: (wall ms, child CPU ms) of one run of ``cmd``."""
    def run() -> tuple[float, float]:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(env))
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stderr.close()
        if proc.returncode != 0:
            last = (err.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {last[:160]}")
        return elapsed * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3
    return run


def main(argv: list[str]) -> int:
    parser = common_args(__doc__ or "")
    parser.add_argument("--plugins", type=int, default=DEFAULT_PLUGINS,
                        help=f"third-party plugins of the second set (default {DEFAULT_PLUGINS})")
    args = parser.parse_args(argv)
    require("my_utils.core", "bench_cli_startup")
    rounds = args.samples or (QUICK_SAMPLES if args.quick else DEFAULT_SAMPLES)
    myutils, which = _myutils_command()
    shown = "myutils" if myutils[0].endswith("myutils") else "python -m my_utils.core"
    report = Report("bench_cli_startup", "CLI start-up against a bare interpreter", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("ran", which)
    report.label("versions", versions_label("myutils-core", "typer", "click", "pluggy"))
    report.label("load", f"load average {os.getloadavg()[0]:.2f} (1 min) at the start")
    with bench_tempdir("bench_cli_startup_") as tmp:
        site = tmp / "site"
        _install_plugins(site, args.plugins)
        base = {k: v for k, v in os.environ.items() if not k.startswith("MYUTILS_")}
        base["MYUTILS_CACHE_DIR"] = str(tmp / "cache")
        loaded = {**base, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [base.get("PYTHONPATH")])])}
        sets = {"built-ins": base, f"+{args.plugins} plugins": loaded}
        report.label("plugin sets", f"built-ins (7 distributions); +{args.plugins} plugins: each an installed "
                                    "distribution with a provider and a command")
        commands: dict[str, tuple[list[str], Mapping[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], base),
            "python -c 'import my_utils.core'": ([sys.executable, "-c", "import my_utils.core"], base),
        }
        tiny = tmp / "tiny_rank_0.json"
        tiny.write_text(json.dumps(TINY))
        can_run = importlib.util.find_spec("my_utils.profiling") is not None
        if not can_run:
            report.skip("plugins run", "myutils-profiling (its torch_profiler provider) is not installed here")
        for label, env in sets.items():
            no_cache = {**env, "MYUTILS_NO_CACHE": "1"}
            commands[f"{shown} --help [{label}, recorded]"] = ([*myutils, "--help"], env)
            commands[f"{shown} plugins list [{label}, recorded]"] = ([*myutils, "plugins", "list"], env)
            commands[f"{shown} --help [{label}, no cache]"] = ([*myutils, "--help"], no_cache)
            commands[f"{shown} plugins list [{label}, no cache]"] = ([*myutils, "plugins", "list"], no_cache)
            if can_run:
                run = [*myutils, "plugins", "run", "torch_profiler", "--input", str(tiny), "-q", "--output-dir"]
                commands[f"{shown} plugins run, 7 events [{label}, recorded]"] = (
                    [*run, str(tmp / f"out_{len(commands)}")], env)
                commands[f"{shown} plugins run, 7 events [{label}, no cache]"] = (
                    [*run, str(tmp / f"out_{len(commands)}")], no_cache)
        try:
            samples = interleave({name: _timer(cmd, env) for name, (cmd, env) in commands.items()}, rounds,
                                 warmup=1)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            report.skip("all commands", f"a command failed, no figures: {exc}")
            report.finish(args.json)
            return 0
    anchor = "python -c pass"
    for what, index, unit in (("wall", 0, "ms"), ("CPU", 1, "ms")):
        anchor_name = f"{anchor} ({what})"
        report.add(anchor_name, [s[index] for s in samples[anchor]], unit, note="anchor")
        for name in list(commands)[1:]:
            goals = []
            if "--help" in name and "recorded" in name:
                goals = [at_most_above(150, "issue 22")]
            elif "plugins list" in name and "recorded" in name:
                goals = [at_most(250, "issue 22"), at_most_above(250, "issue 22, above the anchor")]
            report.add(f"{name} ({what})", [s[index] for s in samples[name]], unit, anchor=anchor_name,
                       goals=goals)
    report.note("time per command includes interpreter start; '--help' is judged on the per-round difference to "
                "the anchor, 'plugins list' on its own time and on that difference; CPU is the child's user + "
                "system time (os.wait4)")
    report.note("'no cache' is a first start after an install (or any start while a plugin is broken): "
                "importlib.metadata and typer, no goal")
    report.label("load after", f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
