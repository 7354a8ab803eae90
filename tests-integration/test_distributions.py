"""Every distribution keeps the packaging promises (version in one place, plugin, light import)."""

from collections.abc import Callable

import pytest


@pytest.mark.parametrize("name", ["core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy"])
def test_distribution_promises(name: str, check_distribution: Callable[[str], None]) -> None:
    check_distribution(name)


def test_plugin_discovery_imports_only_plugin_modules() -> None:
    """`myutils --help` and `plugins list` load each distribution's plugin module and nothing else.

    A facade (`my_utils.<name>/__init__.py`) that eagerly imports its implementation makes every
    CLI start pay for it: plugins are imported through their package.
    """
    import ast
    import subprocess
    import sys

    code = (
        "import sys, runpy\n"
        "sys.argv = ['myutils', 'plugins', 'list']\n"
        "try:\n    runpy.run_module('my_utils.core', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('my_utils.') and not m.startswith('my_utils.core')))\n"
    )
    import os

    # a warm start (the start record current) loads the plugin modules only; a cold one (the record stale: a fresh
    # install, an edited module, MYUTILS_NO_CACHE) also builds the typer app from each plugin's command modules.
    # Both are checked: CI's first start is a cold one, and only a warm one ran here before.
    for cold in (True, False):
        env = {**os.environ, "MYUTILS_NO_CACHE": "1"} if cold else {k: v for k, v in os.environ.items()
                                                                     if k != "MYUTILS_NO_CACHE"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
        loaded = ast.literal_eval(out.strip().splitlines()[-1])
        allowed_suffixes = ("", "._version", ".plugin")
        extra = [m for m in loaded
                 if not any(m == f"my_utils.{n}{s}" for n in ("tracing", "hooks", "distributed", "memory", "profiling",
                                                              "legacy") for s in allowed_suffixes)
                 and not (m == "my_utils.profiling.cli" or m.startswith("my_utils.profiling.cli."))
                 and m != "my_utils.tracing.launch_cli"]
        # (profiling mounts its CLI group, one module per command, and tracing its launch commands, through
        # myutils_cli; a command module imports what its commands use inside them)
        assert extra == [], f"plugin discovery ({'cold' if cold else 'warm'} start) imported implementation modules: {extra}"
