"""Rule 1 of issue 17, as a property: an output never replaces an input, whatever path names it.

For every command that writes files, hypothesis generates the ways a user can point an output
at an input: the very same path, the same path spelled through ``sub/..``, a symbolic link to
the input, a hard link to it, and (``memory cut``) a ``.pt`` output whose ``.pickle`` sibling is
the input; with several inputs or several outputs, which of them collide. Each case runs the
real CLI (``myutils ...`` through typer's runner, in-process: the same code path as the console
script, without an interpreter start per example) and must be refused before any work: exit
2, one line on stderr saying the output would replace the input (the wording of
``my_utils.core.safe_io.refuse_overwriting_inputs``), and every input's bytes unchanged.
A control per command runs the same setup without a collision and must succeed, so a refusal
is the guard's and not a broken setup's.

The commands: ``memory cut -o``, ``profile analyze --output-dir``, ``profile diff --output /
--markdown``, ``profile trace --output``, ``profile ingest --output-dir`` and ``plugins run
--output-dir``. ``memory summarize`` and ``stragglers`` write no file (stdout only).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.profiling.examples import example_config_path

MiB = 1 << 20
REFUSAL = "would replace the input"
KINDS = ("same", "dotdot", "symlink", "hardlink")


# -- materials: real inputs every case starts from --------------------------------------------


def _run(*args: str) -> Any:
    return CliRunner().invoke(build_app(), list(args))


def _snapshot() -> dict[str, Any]:
    base = 0x7F0000000000
    trace = [{"action": "alloc", "addr": base + i * MiB, "size": MiB, "stream": 0, "time_us": i * 1_000_000,
              "frames": [{"name": "forward", "filename": "train.py", "line": 10}]} for i in range(4)]
    blocks = [{"address": base + i * MiB, "size": MiB, "state": "active_allocated", "frames": []} for i in range(4)]
    return {"segments": [{"device": 0, "address": base, "total_size": 8 * MiB, "blocks": blocks}],
            "device_traces": [trace]}


@pytest.fixture(scope="module")
def materials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs made by the real commands: the shipped example data, its events, an analysis report, a snapshot,
    a monitor samples file."""
    root = tmp_path_factory.mktemp("materials")
    for f in (example_config_path().parent / "data").iterdir():
        shutil.copy(f, root / f.name)
    (root / "ingest.json").write_text(
        '{"run_id": "rule1", "providers": [{"provider": "mytimer", "input": "profile_rank_0.csv"}, '
        '{"provider": "torch_profiler", "input": "cpu_trace_rank_0.json.gz"}]}')
    result = _run("profile", "ingest", "--config", str(root / "ingest.json"), "--output-dir", str(root / "ev"), "-q")
    assert result.exit_code == 0, result.output
    shutil.move(root / "ev" / "metrics_events.jsonl", root / "events.jsonl")
    result = _run("profile", "analyze", "--events", str(root / "events.jsonl"), "--output-dir", str(root / "an"),
                  "--formats", "json", "-q")
    assert result.exit_code == 0, result.output
    shutil.move(root / "an" / "analysis_report.json", root / "report.json")
    shutil.copy(root / "report.json", root / "target_report.json")
    (root / "run.pickle").write_bytes(pickle.dumps(_snapshot(), protocol=4))
    from my_utils.memory.samples_file import Sample, SamplesWriter

    writer = SamplesWriter(root / "gpu_rank0_samples.jsonl", {"prefix": "gpu", "rank": 0, "interval_s": 1.0})
    for i in range(5):
        writer.sample(Sample(1_700_000_000.0 + i, float(i), {"host_rss_bytes": 1e8 + i, "host_cpu_pct": 50.0}))
    writer.close()
    for sub in ("ev", "an"):
        shutil.rmtree(root / sub)
    return root


@pytest.fixture
def workdir(materials: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Any]:
    """A factory of fresh copies of the materials (one per hypothesis example)."""
    base = tmp_path_factory.mktemp("cases")

    def fresh() -> Any:
        return _Fresh(materials, base)

    return fresh


class _Fresh:
    def __init__(self, materials: Path, base: Path) -> None:
        self._tmp = tempfile.TemporaryDirectory(dir=base)
        self.path = Path(self._tmp.name)
        for f in materials.iterdir():
            shutil.copy(f, self.path / f.name)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()


# -- how an output is pointed at an input -----------------------------------------------------


def _point_file(kind: str, inp: Path, name: str) -> Path:
    """An output file path that is ``inp`` (kind 'same' / 'dotdot') or links to it under ``name``."""
    if kind == "same":
        return inp
    if kind == "dotdot":
        (inp.parent / "sub").mkdir(exist_ok=True)
        return inp.parent / "sub" / ".." / inp.name
    out = inp.parent / "links" / name
    out.parent.mkdir(exist_ok=True)
    if kind == "symlink":
        out.symlink_to(inp)
    elif kind == "hardlink":
        os.link(inp, out)
    else:  # "none": a fresh path, the control
        return inp.parent / "fresh" / name
    return out


def _point_dir(kind: str, inp: Path, work: Path, fixed: str) -> tuple[Path, Path]:
    """(output dir, input path to name) so that ``<output dir>/<fixed>`` is, or links to, the input.

    'same' and 'dotdot' move the input into the output folder under the fixed name (a reader that
    goes by content reads it there); the links leave it where it is.
    """
    out = work / "out"
    out.mkdir(exist_ok=True)
    if kind in ("same", "dotdot"):
        moved = out / fixed
        shutil.move(inp, moved)
        if kind == "dotdot":
            (out / "sub").mkdir()
            return out / "sub" / "..", moved
        return out, moved
    if kind == "symlink":
        (out / fixed).symlink_to(inp)
    elif kind == "hardlink":
        os.link(inp, out / fixed)
    return out, inp


# -- the commands ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command that writes files: how to build its arguments for a collision ``kind`` and a choice ``pick``."""

    name: str
    build: Callable[[Path, str, int], tuple[list[str], list[Path]]]  # -> argv, the inputs to protect
    kinds: tuple[str, ...] = KINDS
    picks: int = 1  # how many (input, output) pairings there are


def _memory_cut(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    snap = work / "run.pickle"
    if kind == "sibling":  # -o run.pt also writes run.pickle
        out = work / "run.pt"
    else:
        out = _point_file(kind, snap, "cut.pickle" if pick == 0 else "cut.pt")
        if kind == "none" and pick == 1:
            out = out.with_suffix(".pt")
    out.parent.mkdir(exist_ok=True)
    return ["memory", "cut", str(snap), "--from", "0", "--to", "2", "-o", str(out)], [snap]


def _analyze(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    fixed = ("analysis_report.json", "analysis_report.md", "analysis_report.html")[pick]
    if kind == "none":
        out, events = work / "fresh", work / "events.jsonl"
    else:
        out, events = _point_dir(kind, work / "events.jsonl", work, fixed)
    return ["profile", "analyze", "--events", str(events), "--output-dir", str(out), "-q"], [events]


def _diff(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    base, target = work / "report.json", work / "target_report.json"
    flag = ("--output", "--markdown")[pick % 2]
    victim = (base, target)[pick // 2]
    out = _point_file(kind, victim, "diff.json" if flag == "--output" else "diff.md")
    out.parent.mkdir(exist_ok=True)
    return ["profile", "diff", "--base-report", str(base), "--target-report", str(target), flag, str(out)], \
        [base, target]


def _trace(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    events, torch_trace = work / "events.jsonl", work / "cpu_trace_rank_0.json.gz"
    if pick == 0:  # the torch trace: a .json.gz name the output may have
        out = _point_file(kind, torch_trace, "merged.json.gz")
    else:  # the events file, through a link named like a trace
        out = _point_file("symlink" if kind in ("same", "dotdot") else kind, events, "merged.json")
    out.parent.mkdir(exist_ok=True)
    return ["profile", "trace", "--events", str(events), "--torch-trace", str(torch_trace), "--output", str(out),
            "-q"], [events, torch_trace]


def _ingest(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    fixed = "metrics_events.jsonl"
    if kind in ("same", "dotdot") or pick == 1:  # the monitor provider reads its file by content, any name
        inp = work / "gpu_rank0_samples.jsonl"
        provider = "memory_monitor"
    else:
        inp = work / "profile_rank_0.csv"
        provider = "mytimer"
    out, inp = (work / "fresh", inp) if kind == "none" else _point_dir(kind, inp, work, fixed)
    config = work / "config.json"
    config.write_text(f'{{"run_id": "rule1", "providers": [{{"provider": "{provider}", "input": "{inp}"}}]}}')
    return ["profile", "ingest", "--config", str(config), "--output-dir", str(out), "-q"], [inp, config]


def _plugins_run(work: Path, kind: str, pick: int) -> tuple[list[str], list[Path]]:
    fixed = "metrics_events.jsonl"
    if kind in ("same", "dotdot") or pick == 1:
        inp, provider = work / "gpu_rank0_samples.jsonl", "memory_monitor"
    else:
        inp, provider = work / "profile_rank_0.csv", "mytimer"
    out, inp = (work / "fresh", inp) if kind == "none" else _point_dir(kind, inp, work, fixed)
    return ["plugins", "run", provider, "--input", str(inp), "--output-dir", str(out), "-q"], [inp]


COMMANDS = [
    Command("memory cut", _memory_cut, (*KINDS, "sibling"), 2),
    Command("profile analyze", _analyze, KINDS, 3),
    Command("profile diff", _diff, KINDS, 4),
    Command("profile trace", _trace, KINDS, 2),
    Command("profile ingest", _ingest, KINDS, 2),
    Command("plugins run", _plugins_run, KINDS, 2),
]
IDS = [c.name.replace(" ", "_") for c in COMMANDS]


def _digest(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
@pytest.mark.parametrize("pick", [0, 1])
def test_control_without_a_collision_succeeds(command: Command, pick: int, workdir: Callable[[], Any]) -> None:
    """The same setup with a fresh output path: exit 0 (so the refusals below are the guard's)."""
    with workdir() as work:
        argv, inputs = command.build(work, "none", pick % command.picks)
        before = _digest(inputs)
        result = _run(*argv)
        assert result.exit_code == 0, (argv, result.output)
        assert _digest(inputs) == before


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_output_that_is_an_input_is_refused(command: Command, data: st.DataObject,
                                               workdir: Callable[[], Any]) -> None:
    kind = data.draw(st.sampled_from(command.kinds), label="kind")
    pick = data.draw(st.integers(0, command.picks - 1), label="pick")
    with workdir() as work:
        argv, inputs = command.build(work, kind, pick)
        before = _digest(inputs)
        result = _run(*argv)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        context = f"{command.name} ({kind}, pick {pick}): exit {result.exit_code}, stderr {result.stderr!r}"
        assert _digest(inputs) == before, f"an input was changed: {context}"
        assert result.exit_code == 2, context
        assert len(lines) == 1 and lines[0].startswith("error: ") and REFUSAL in lines[0], context

