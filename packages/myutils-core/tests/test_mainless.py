"""``spawn_pool`` from a script with no ``if __name__ == "__main__":`` guard (``my_utils.core.mainless``).

Each script appends a line to a marker file every time its body runs: with the default spawn
context, each worker re-ran the body, started a pool while bootstrapping and died
(``BrokenProcessPool``); with the mainless context the body runs once and the pool works.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_BODY = """
    import os
    from pathlib import Path

    from my_utils.core.lifecycle import spawn_pool

    marker = Path({marker!r})
    with marker.open("a") as fh:
        fh.write("ran\\n")
    {guard}
    {indent}with spawn_pool(2) as pool:
    {indent}    pids = {{pool.submit(os.getpid).result() for _ in range(4)}}
    {indent}print("workers", len(pids), os.getpid() not in pids)
"""


def _run(tmp_path: Path, guarded: bool, as_module: bool = False) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    marker = tmp_path / "marker.txt"
    guard = 'if __name__ == "__main__":' if guarded else ""
    text = textwrap.dedent(_BODY.format(marker=str(marker), guard=guard, indent="    " if guarded else ""))
    script = tmp_path / "job_script.py"
    script.write_text(text)
    cmd = [sys.executable, "-m", "job_script"] if as_module else [sys.executable, str(script)]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return res, marker.read_text().splitlines() if marker.exists() else []


@pytest.mark.parametrize("as_module", [False, True], ids=["script", "python-m"])
def test_an_unguarded_script_gets_a_working_pool_and_runs_once(tmp_path: Path, as_module: bool) -> None:
    res, runs = _run(tmp_path, guarded=False, as_module=as_module)
    assert res.returncode == 0, res.stderr
    assert "BrokenProcessPool" not in res.stderr
    assert res.stdout.split()[0] == "workers" and res.stdout.split()[2] == "True"
    assert runs == ["ran"]  # the workers never ran the script's body


def test_a_guarded_script_still_hands_its_own_functions_to_the_pool(tmp_path: Path) -> None:
    """Guarded, the workers import the script as multiprocessing always did: a function defined in it runs."""
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent("""
        from my_utils.core.lifecycle import spawn_pool

        def square(x):
            return x * x

        if __name__ == "__main__":
            with spawn_pool(2) as pool:
                print(sorted(pool.map(square, range(4))))
    """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[0, 1, 4, 9]"


def test_the_guard_is_read_from_the_script() -> None:
    import ast

    from my_utils.core.mainless import _is_main_guard

    guard, reversed_guard, other = (ast.parse(t).body[0] for t in (
        'if __name__ == "__main__":\n    pass', 'if "__main__" == __name__:\n    pass', 'if x == "__main__":\n    pass'))
    assert _is_main_guard(guard) and _is_main_guard(reversed_guard) and not _is_main_guard(other)


def test_main_is_restored_after_a_worker_starts() -> None:
    from my_utils.core.lifecycle import spawn_pool

    before = sys.modules["__main__"]
    with spawn_pool(1) as pool:
        assert pool.submit(abs, -3).result() == 3
    assert sys.modules["__main__"] is before
