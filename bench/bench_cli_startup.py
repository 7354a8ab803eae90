"""Start-up cost of `myutils --help` against `python -c pass`, measured in the same run.

Goal (foundation issue): `myutils --help` < 150 ms above a bare interpreter start.
Each command runs N times alternately; the median of each is reported.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

RUNS = 15


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    myutils = shutil.which("myutils")
    commands = {
        "python -c pass (anchor)": [sys.executable, "-c", "pass"],
        "python -c 'import my_utils.core'": [sys.executable, "-c", "import my_utils.core"],
        "myutils --help": [myutils, "--help"] if myutils else [sys.executable, "-m", "my_utils.core", "--help"],
        "myutils plugins list": ([myutils] if myutils else [sys.executable, "-m", "my_utils.core"])
        + ["plugins", "list"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():  # warm the file cache once
        _time(cmd)
    for _ in range(RUNS):
        for name, cmd in commands.items():
            samples[name].append(_time(cmd))
    anchor = statistics.median(samples["python -c pass (anchor)"])
    print(f"{'command':40} {'median ms':>10} {'above anchor ms':>16}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:40} {med * 1e3:10.1f} {(med - anchor) * 1e3:16.1f}")
    help_over = (statistics.median(samples["myutils --help"]) - anchor) * 1e3
    print(f"\nmyutils --help costs {help_over:.1f} ms above `python -c pass` (goal < 150 ms)")


if __name__ == "__main__":
    main()
