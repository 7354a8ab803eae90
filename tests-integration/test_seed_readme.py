"""The seed README (``../shared/seed/``), checked as a new user would use it, each piece in a fresh interpreter.

- Every import line of the seed, found in the seed's own text (not copied here), runs.
- Every part of the seed's package list (core, tracing, hooks, distributed, memory, artifacts,
  legacy_profilers, profiling) imports as ``my_utils.<part>``.
- Every example of the seed runs: the table ``EXAMPLES`` names, for each (by a line of its text
  that must still be in the seed), the test that runs it — the distribution that owns the code
  runs its own examples — and the examples no distribution owns run here: the ``myutils-profile``
  command block as written (the seed's example config path included, from a folder without the
  seed's layout), the template-folder one-liner, and the clock-sync pattern over two gloo ranks.

Adaptations are only where the seed needs a GPU or leaves a name to the reader (``model``,
``rank``, ``world_size``): each is said where it is made.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEED_DIR = REPO.parent / "shared" / "seed"


def _seed_text() -> str:
    files = sorted(SEED_DIR.glob("*.txt")) if SEED_DIR.is_dir() else []
    return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files)


SEED = _seed_text()
needs_seed = pytest.mark.skipif(not SEED, reason=f"the seed README is not at {SEED_DIR} (../shared absent)")

_IMPORT = re.compile(r"from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[\w, \t]+)|(?m:^import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?)")


def seed_import_lines() -> list[str]:
    """Every distinct import statement of the seed, normalised to one line."""
    found = []
    for m in _IMPORT.finditer(SEED):
        if m.group(1):
            names = " ".join(m.group(2).replace("(", " ").replace(")", " ").split()).strip(", ")
            statement = f"from {m.group(1)} import {names}"
        else:
            statement = m.group(0).strip()
        if statement not in found and not statement.endswith("import"):
            found.append(statement)
    return found


def seed_parts() -> list[str]:
    """The part names of the seed's package list (``- core: logger/timer/common utils`` ...)."""
    return re.findall(r"(?m)^- (\w+): ", SEED.split("from my_utils.utils import MyTimer", 1)[0])


def _python(code: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env)


@needs_seed
def test_the_extraction_finds_every_import_and_part() -> None:
    """20 distinct my_utils import statements (8 more import torch or the stdlib), 8 parts."""
    mine = [s for s in seed_import_lines() if "my_utils" in s]
    assert len(mine) == 20 and len(seed_import_lines()) == 28, seed_import_lines()
    assert seed_parts() == ["core", "tracing", "hooks", "distributed", "memory", "artifacts", "legacy_profilers",
                            "profiling"]


@needs_seed
@pytest.mark.parametrize("statement", seed_import_lines())
def test_seed_import_line_runs(statement: str, tmp_path: Path) -> None:
    out = _python(statement, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]


@needs_seed
@pytest.mark.parametrize("part", seed_parts())
def test_seed_part_imports(part: str, tmp_path: Path) -> None:
    out = _python(f"import my_utils.{part}\nprint(my_utils.{part}.__name__)", tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]


# -- every example: (a line of the example as the seed has it, the test that runs it) ------------

HERE = "tests-integration/test_seed_readme.py"
CORE = "packages/myutils-core/tests/test_seed_examples.py"
LEGACY = "packages/myutils-legacy/tests/test_seed_examples.py"
HOOKS = "packages/myutils-hooks/tests/test_seed_examples.py"
TEMPLATES = "packages/myutils-profiling/tests/test_templates.py"
EXAMPLES: list[tuple[str, str]] = [
    ("pip install -e .[all]", "packages/myutils-legacy/tests/test_umbrella_install.py::"
                              "test_all_extra_keeps_the_installed_torch"),
    ("from my_utils.core.utils import MyTimer", f"{LEGACY}::test_both_import_styles"),
    ("collector.register_provider(MyTimerMetricsProvider(your_timer))", f"{LEGACY}::test_profiling_quick_start"),
    ("python -m my_utils.profiling.examples.unified_metrics_demo --steps 30 --output-dir ./demo_output",
     "packages/myutils-profiling/tests/test_demo.py::test_demo_end_to_end"),
    ("myutils-profile ingest --config ./my_utils/profiling/examples/collector_config_example.json --analyze",
     f"{HERE}::test_seed_cli_block_runs_as_written"),
    ("myutils-profile diff --base-report ./run_a/analysis_report.json", f"{HERE}::test_seed_cli_block_runs_as_written"),
    ("print(get_profiling_templates_dir())", f"{HERE}::test_seed_templates_dir_one_liner"),
    ("profile_wrap_exec_with_nsys EXEC_CMD", f"{TEMPLATES}::test_nsys_preset_wraps_with_suffix"),
    ("NSYS_START_STEP=30 NSYS_STOP_STEP=40 NSYS_TRACE=cuda,nvtx,osrt bash run_train.sh",
     f"{TEMPLATES}::test_env_overrides_win_over_preset"),
    ('logger_mgr.setup(log_dir="logs/train", rank=0, world_size=1, extra_log_label="Trainer")',
     f"{CORE}::test_main_workflow_then_both_csv_to_trace"),
    ("def csv_to_trace(csv_path: str, out_json: str) -> None:", f"{CORE}::test_main_workflow_then_both_csv_to_trace"),
    ("data_parallel_world_size=2", f"{CORE}::test_global_logger_example"),
    ('tag="training",', f"{CORE}::test_timer_with_labeler_example"),
    ('labeler.register_label("model.layer_00.attention", color="green")',
     "packages/myutils-tracing/tests/test_nvtx_utils.py::test_the_seed_labeler_example_runs_unchanged"),
    ('nvtx = TorchNvtxLabeler(enabled=True, default_domain="torch_app")',
     "packages/myutils-tracing/tests/test_nvtx_utils.py::test_the_seed_labeler_example_runs_unchanged"),
    ('df = profiler.summary(output_path="module_profile.csv")', f"{HOOKS}::test_seed_module_profiler_examples_on_the_cpu"),
    ("enable_print_summary=True", f"{LEGACY}::test_profiler_wrapper_example"),
    ('global_snapshotter.start("training_loop")', f"{LEGACY}::test_snapshot_examples"),
    ('snapshot = torch.load("forward__20260303_120000__rank0.pt")', f"{LEGACY}::test_snapshot_analysis_example"),
    ("track_hardware_metrics=True", f"{LEGACY}::test_gpu_tracker_example"),
    ('nvtx_range="model_forward"', f"{HOOKS}::test_seed_forward_hook_example_runs_unchanged"),
    ('r"tile_encoder_\\d+": "cuda_time_total"', f"{LEGACY}::test_dit_profiler_example"),
    ("offset = ClockSynchronizer.sync(is_server=True, peer_rank=1)",
     "packages/myutils-distributed/tests/test_gloo_ranks.py::test_seed_example_over_gloo"),
    ("sync = SocketClockSynchronizer(port=12345)", f"{LEGACY}::test_socket_clock_example"),
    ("specs = pm.build_specs_to_arm_at_iter(it, num_microbatches=8)",
     "packages/myutils-tracing/tests/test_seed_examples.py::test_seed_capture_example_runs_unchanged"),
    ('timer = MyTimer(use_cuda=True, tag="train")', f"{CORE}::test_common_pattern_with_use_cuda_on_this_machine"),
    ('tracker = GPU_Performance_Tracker(prefix="exp1", interval=1)', f"{LEGACY}::test_profiler_wrapper_with_tracker_example"),
    ('df = profiler.summary("module_timings.csv")', f"{HOOKS}::test_seed_module_profiler_examples_on_the_cpu"),
    ('nvtx_range="training_window"', f"{HOOKS}::test_seed_nsight_example_runs_unchanged"),
    ("peer_rank=1 if rank == 0 else 0", f"{HERE}::test_seed_clock_sync_pattern_over_gloo"),
    ('global_snapshotter.start(f"epoch_{epoch}")', f"{LEGACY}::test_snapshot_examples"),
    ("class MyCustomBackend(CaptureBackend):",
     "packages/myutils-tracing/tests/test_seed_examples.py::test_seed_capture_example_runs_unchanged"),
    ("class MyCustomTimer(MyTimer):", f"{CORE}::test_custom_timer_subclass"),
]


def _defined_tests(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def _flat(text: str) -> str:
    return " ".join(text.split())


@needs_seed
@pytest.mark.parametrize(("line", "node"), EXAMPLES, ids=[line[:40] for line, _ in EXAMPLES])
def test_every_seed_example_has_the_test_that_runs_it(line: str, node: str) -> None:
    assert _flat(line) in _flat(SEED), f"the seed has no example with {line!r} any more"
    path, name = node.split("::")
    assert name in _defined_tests(REPO / path), f"{node} is gone: the seed example {line!r} is no longer run"


@needs_seed
def test_seed_cli_block_runs_as_written(tmp_path: Path) -> None:
    """The four ``myutils-profile`` commands, as written, from a folder without the seed's layout.

    Adapted: the ``diff`` compares two runs the reader has; here ``run_a`` and ``run_b`` are
    copies of the analysis the block's second command wrote.
    """
    block = SEED.split("# 1) collect + analyze from config", 1)[1].split("See:", 1)[0]
    commands = [line.strip() for line in block.splitlines() if line.strip().startswith("myutils-profile ")]
    assert [c.split()[1] for c in commands] == ["ingest", "analyze", "diff", "trace"]
    cli = shutil.which("myutils-profile", path=str(Path(sys.executable).parent))
    assert cli, "myutils-profile is not installed beside this interpreter"
    for command in commands:
        if " diff " in command:
            for run in ("run_a", "run_b"):
                shutil.copytree(tmp_path / "analysis_out", tmp_path / run)
        args = command.split()[1:]
        proc = subprocess.run([cli, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
    assert not (tmp_path / "my_utils").exists()  # the shipped example was read, nothing copied
    assert json.loads((tmp_path / "metrics_out" / "analysis_report.json").read_text())["schema_version"]
    assert json.loads((tmp_path / "diff.json").read_text()) and (tmp_path / "diff.md").read_text().strip()
    assert json.loads((tmp_path / "metrics_out" / "metrics_trace.json").read_text())["traceEvents"]


@needs_seed
def test_seed_templates_dir_one_liner(tmp_path: Path) -> None:
    code = SEED.split("python - <<'PY'", 1)[1].split("PY", 1)[0]
    out = _python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("_")) >= [
        "preset_disabled.env", "preset_nsys_default.env", "preset_torch_profiler.env", "profile_cli_common.sh"]


CLOCK_PATTERN_PRELUDE = '''
import os
import torch.distributed as dist
dist.init_process_group("gloo")  # the reader's job launcher; nccl in a GPU job
rank, world_size = dist.get_rank(), dist.get_world_size()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_seed
def test_seed_clock_sync_pattern_over_gloo(tmp_path: Path) -> None:
    """The seed's common pattern 5 on two gloo ranks (``rank`` and ``world_size`` from the process group)."""
    block = SEED.split("from my_utils.clockSyncUtils import ClockSynchronizer\nfrom my_utils.logger import GlobalLogger",
                       1)[1].split("# 现在所有机器的时间戳已对齐", 1)[0]
    pattern = ("from my_utils.clockSyncUtils import ClockSynchronizer\nfrom my_utils.logger import GlobalLogger"
               + block)
    code = CLOCK_PATTERN_PRELUDE + pattern + "\nprint(offset)\ndist.destroy_process_group()\n"
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2",
                   GLOO_SOCKET_IFNAME="lo")
        cwd = tmp_path / f"rank{rank}"
        cwd.mkdir()
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err[-2000:]
        outs.append(float(out.split()[-1]))
    assert outs[0] == 0.0 and abs(outs[1]) < 0.05  # one host, one clock: the offset is the noise
    for rank in (0, 1):  # the logger of each rank wrote its files where the pattern's setup() said
        assert (tmp_path / f"rank{rank}" / "logs" / f"rank_{rank}.log").is_file()
