#!/usr/bin/env python3
"""Hand-written mutation run: plant each plausible bug of ``.ci/mutants.toml``, run the tests meant to catch it.

A mutant is one exact text replacement in one source file (the text must occur exactly once,
so a list that went stale after a refactor says so instead of silently testing nothing). The
file is restored after each run, also on Ctrl-C; bytecode of the mutated module is deleted
before and after, so a same-size edit within one second can never run the stale original.

    .venv/bin/python .ci/mutants.py                 # every mutant; exit 1 when one survives
    .venv/bin/python .ci/mutants.py --only diff-    # the mutants whose id starts with diff-
    .venv/bin/python .ci/mutants.py --list
    .venv/bin/python .ci/mutants.py --file .ci/mutants/providers.toml   # another list (one per area)

A mutant the tests cannot kill because it does not change behaviour carries ``equivalent =
"why"`` in the list; it is reported, never counted as a failure. Not run by CI (a few minutes
per mutant on two cores): ``nox -s mutants`` runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test requirements bring tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LIST = Path(__file__).with_name("mutants.toml")
#: more lists, one per area (``providers.toml``: the four newer providers; ``diagnosis``, ``kineto``, ``nsys``,
#: ``ncu``: the analyses of issue 36; ``trace``: the merged trace)
LISTS = Path(__file__).with_name("mutants")


@dataclass(frozen=True)
class Mutant:
    """One planted bug: where, what, why it is plausible, which tests must catch it."""

    id: str
    file: str
    find: str
    replace: str
    why: str
    tests: tuple[str, ...]
    slow: bool = False
    equivalent: str = ""


def load(path: Path = LIST) -> list[Mutant]:
    """The mutants of ``path``, each checked to apply exactly once."""
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for row in raw["mutant"]:
        m = Mutant(row["id"], row["file"], row["find"], row["replace"], row["why"], tuple(row["tests"]),
                   row.get("slow", False), row.get("equivalent", ""))
        count = (ROOT / m.file).read_text(encoding="utf-8").count(m.find)
        if count != 1:
            raise SystemExit(f"{path}: mutant {m.id}: the text to replace occurs {count} times in {m.file} "
                             "(expected once): update the list")
        out.append(m)
    return out


def _drop_bytecode(source: Path) -> None:
    cache = source.parent / "__pycache__"
    for pyc in cache.glob(f"{source.stem}.*.pyc") if cache.is_dir() else ():
        pyc.unlink(missing_ok=True)


def run(m: Mutant, timeout: float) -> tuple[str, float, str]:
    """Plant ``m``, run its tests, restore: (outcome, seconds, last output line)."""
    source = ROOT / m.file
    original = source.read_bytes()
    text = original.decode("utf-8")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MYUTILS_MUTANT=m.id)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests]
    if not m.slow:
        cmd += ["-m", "not slow"]
    started = time.monotonic()
    try:
        source.write_text(text.replace(m.find, m.replace, 1), encoding="utf-8")
        _drop_bytecode(source)
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed (timeout)", time.monotonic() - started, f"no result within {timeout:.0f} s"
    finally:
        source.write_bytes(original)
        _drop_bytecode(source)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode == 0:
        return "SURVIVED", time.monotonic() - started, last
    if proc.returncode in (1,):
        return "killed", time.monotonic() - started, last
    return f"error (pytest exit {proc.returncode})", time.monotonic() - started, last


def main(argv: list[str] | None = None) -> int:
    """Run the list; print one row per mutant and a summary; exit 1 when a non-equivalent mutant survives."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutants whose id starts with this")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant's test run")
    parser.add_argument("--file", type=Path, action="append", default=[],
                        help=f"a list of mutants (repeatable; default {LIST.relative_to(ROOT)} and every "
                             f"{LISTS.relative_to(ROOT)}/*.toml)")
    args = parser.parse_args(argv)
    # a kill (SIGTERM, a closed terminal) must restore the mutated file like Ctrl-C does: raising
    # SystemExit here runs run()'s finally
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    lists = args.file or [LIST, *sorted(LISTS.glob("*.toml"))]
    mutants = [m for path in lists for m in load(path) if m.id.startswith(args.only)]
    if args.list:
        for m in mutants:
            print(f"{m.id:32} {m.file}\n{'':32} {m.why}")
        return 0
    bad = 0
    counts: dict[str, int] = {}
    for m in mutants:
        outcome, seconds, last = run(m, args.timeout)
        if outcome == "SURVIVED" and m.equivalent:
            outcome = "survived (equivalent)"
        counts[outcome] = counts.get(outcome, 0) + 1
        bad += outcome == "SURVIVED" or outcome.startswith("error")
        print(f"{m.id:32} {outcome:22} {seconds:6.0f} s  {last}", flush=True)
        if m.equivalent and outcome.startswith("survived"):
            print(f"{'':32} equivalent: {m.equivalent}")
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f" of {len(mutants)} mutants")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
