"""Every seed example not already run by another distribution's test_seed_examples, each in a fresh interpreter.

The seed README lost its indentation to damaged bytes; the snippets below restore only that.
A prelude defines what the README leaves to the reader (``model``, ``input``, ``train_step``,
``your_timer``, ``logger``); the example text itself is unchanged except where noted:

- ProfilerWrapper (both), create_profiler_context, GPU_Performance_Tracker, memory snapshots,
  the profiling quick start, the two import styles, the ``myutils-profile`` commands: unchanged
  (none calls a CUDA-only API; on this CPU they take the CPU paths the seed promises).
- create_profiler_context: the snippet calls ``get_global_logger()`` without importing it; the
  prelude imports it.
- The quick start's ``# ... 你的训练代码 ...`` placeholder is filled with one timer region.
- SocketClockSynchronizer: ``peer_ip="192.168.1.100"`` and ``port=12345`` are the reader's
  network; they become 127.0.0.1 and a free port.
- The snapshot analysis: ``torch.load`` of the ``.pt`` runs as written, on a file written by
  ``my_utils.memory``'s own writer (a real one needs a CUDA run). Its last line is a seed bug:
  ``profile_plot(snapshot, "memory_viz.html")`` passes a snapshot dict to a function that takes a
  ``torch.profiler.profile`` (AttributeError ``_memory_profile``) and returns the HTML instead of
  writing it; the test uses ``trace_plot(snapshot)``, the call that renders a snapshot, and writes
  the HTML to the file the seed names.

Already run in fresh interpreters elsewhere (not repeated here): logger/timer/CSV-to-trace and
the custom timer (myutils-core), labelers and capture windows (myutils-tracing), ModuleProfiler
and ForwardProfilerHook (myutils-hooks), the demo command (myutils-profiling test_demo), the
template launcher (test_templates), ClockSynchronizer over torch.distributed (myutils-distributed
test_gloo_ranks, gloo instead of nccl).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import my_utils.profiling

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ON_CPU = not torch.cuda.is_available()
HAS_MPL = importlib.util.find_spec("matplotlib") is not None  # the [charts] extras

PRELUDE = '''
import torch
torch.manual_seed(0)
class MyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
model = MyModel()
input = torch.randn(16, 32)
target = torch.randn(16, 8)
criterion = torch.nn.MSELoss()
def train_step():
    criterion(model(input), target).backward()
'''

SEED_IMPORTS = '''
from my_utils.utils import MyTimer
from my_utils.nvtx_utils import create_labeler
legacy = (MyTimer, create_labeler)
from my_utils.core.utils import MyTimer
from my_utils.tracing.nvtx_utils import create_labeler
assert legacy == (MyTimer, create_labeler)
print("same objects")
'''

SEED_PROFILER_WRAPPER = '''
from my_utils.profilerwrapper import ProfilerWrapper
import torch.distributed as dist
profiler = ProfilerWrapper(
    is_st=False, # 项目标识
    profile_memory=True,
    log_dir="logs/profiler",
    mem_dir="logs/memory",
    enabled_record_cuda_average_time=True,
    enable_record_cuda_mm=True,
    enable_print_summary=True
)
for step in range(10):
    with profiler:
        output = model(input)
        loss = criterion(output, target)
        loss.backward()
# 生成所有图表和报告
profiler.leave()
'''

SEED_WRAPPER_WITH_TRACKER = '''
from my_utils.profilerwrapper import ProfilerWrapper
from my_utils.gpu_mem_tracker import GPU_Performance_Tracker
# GPU监控
tracker = GPU_Performance_Tracker(prefix="exp1", interval=1)
tracker.start_monitoring()
# Profiler
profiler = ProfilerWrapper(
    is_st=False,
    profile_memory=True,
    enabled_record_cuda_average_time=True
)
for step in range(10):
    with profiler:
        train_step()
profiler.leave()
tracker.stop_monitoring()
'''

DIT_PRELUDE = '''
from my_utils.logger import get_global_logger
def dit_model(x):
    for i in range(2):
        with torch.profiler.record_function(f"tile_encoder_{i}"):
            x = torch.matmul(model.a(x), torch.ones(64, 32))
    return x
vae_model = transformer_model = dit_model
'''

SEED_DIT = '''
from my_utils.DITProfiler import create_profiler_context
import os
# 设置环境变量: export PROFILE_TASK_TYPES=DIT,VAE
logger = get_global_logger()
# 定义要分析的算子（支持正则表达式）
ops_to_analyze = {
    r"aten::linear": "self_cuda_time_total",
    r"aten::matmul": "self_cuda_time_total",
    r"tile_encoder_\\d+": "cuda_time_total", # 匹配 tile_encoder_0, tile_encoder_1, ...
}
# DIT任务会被profile（因为在PROFILE_TASK_TYPES中）
with create_profiler_context(
    current_task_type="DIT",
    logger=logger,
    ops_to_analyze=ops_to_analyze
):
    dit_output = dit_model(input)
# VAE任务也会被profile
with create_profiler_context(
    current_task_type="VAE",
    logger=logger
):
    vae_output = vae_model(input)
# Transformer任务不会被profile（不在环境变量中）
with create_profiler_context(
    current_task_type="Transformer",
    logger=logger
):
    transformer_output = transformer_model(input) # 零开销
'''

SEED_TRACKER = '''
from my_utils.gpu_mem_tracker import GPU_Performance_Tracker
tracker = GPU_Performance_Tracker(
    prefix="experiment_1",
    interval=1, # 采样间隔（秒）
    use_distributed=True,
    track_hardware_metrics=True # 需要pynvml
)
tracker.start_monitoring()
# 你的训练代码
for epoch in range(100):
    train_one_epoch()
tracker.stop_monitoring() # 自动生成图表
'''

SNAPSHOT_PRELUDE = '''
import logging
logging.basicConfig(level=logging.WARNING)
logger = logging.getLogger("train")
loss = criterion(model(input), target)
def train_epoch():
    train_step()
'''

SEED_SNAPSHOTS = '''
from my_utils.memory_snapshot import global_snapshotter
# 环境变量控制: export ENABLE_MEMORY_SNAPSHOT=1
global_snapshotter.set_logger(logger)
# 嵌套快照
global_snapshotter.start("training_loop")
for epoch in range(10):
    global_snapshotter.start("epoch")
    global_snapshotter.start("forward")
    output = model(input)
    global_snapshotter.stop("forward") # 保存 forward__<time>__rank0.pt
    global_snapshotter.start("backward")
    loss.backward(retain_graph=True)
    global_snapshotter.stop("backward") # 保存 backward__<time>__rank0.pt
    global_snapshotter.stop("epoch") # 保存 epoch__<time>__rank0.pt
global_snapshotter.stop("training_loop") # 保存 training_loop__<time>__rank0.pt
'''

SEED_SNAPSHOT_PATTERN = '''
from my_utils.memory_snapshot import global_snapshotter
# export ENABLE_MEMORY_SNAPSHOT=1
global_snapshotter.set_logger(logger)
global_snapshotter.start("training")
for epoch in range(10):
    global_snapshotter.start(f"epoch_{epoch}")
    train_epoch()
    global_snapshotter.stop(f"epoch_{epoch}")
global_snapshotter.stop("training")
'''

SEED_SNAPSHOT_ANALYSIS = '''
import torch
# 加载快照
snapshot = torch.load("forward__20260303_120000__rank0.pt")
# 使用PyTorch的内存分析工具
from torch.cuda._memory_viz import trace_plot  # the seed: profile_plot(snapshot, "memory_viz.html")
open("memory_viz.html", "w").write(trace_plot(snapshot))
'''

SEED_QUICK_START = '''
from my_utils.profiling import MetricsCollector, MyTimerMetricsProvider
# 1. 创建 collector
collector = MetricsCollector(output_dir="./profiling_results")
collector.register_provider(MyTimerMetricsProvider(your_timer))
# 2. 训练中收集 (每 N 步)
for step in range(1000):
    your_timer.set_step(step); your_timer.start("train_step"); your_timer.stop("train_step"); your_timer.step()
    if step % 100 == 0:
        collector.collect(step=step)
# 3. 一键生成报告
report = collector.analyze()
collector.export_report(fmt="html", report=report)
print(f"报告: {report.findings}")
'''

QUICK_START_PRELUDE = '''
from my_utils.logger import GlobalLogger
from my_utils.utils import MyTimer
GlobalLogger().setup(log_dir="logs", rank=0, world_size=1)
your_timer = MyTimer(use_cuda=False, tag="train")
'''

SEED_CLI = [
    ["ingest", "--config", "./my_utils/profiling/examples/collector_config_example.json", "--analyze"],
    ["analyze", "--events", "./metrics_out/metrics_events.jsonl", "--workload", "pretrain", "--output-dir",
     "./analysis_out"],
    ["diff", "--base-report", "./run_a/analysis_report.json", "--target-report", "./run_b/analysis_report.json",
     "--output", "./diff.json", "--markdown", "./diff.md"],
    ["trace", "--events", "./metrics_out/metrics_events.jsonl", "--output", "./metrics_out/metrics_trace.json",
     "--auto-align-ranks", "--reference-rank", "0"],
]

SEED_SOCKET_SERVER = '''
from my_utils.clockSyncUtils import SocketClockSynchronizer
sync = SocketClockSynchronizer(port=PORT)
# Machine A (Producer)
if is_producer:
    offset = sync.sync(is_server=True)
# Machine B (Consumer)
else:
    offset = sync.sync(is_server=False, peer_ip="127.0.0.1")
print(offset)
'''


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                             "PROFILE_TASK_TYPES", "ENABLE_MEMORY_SNAPSHOT")}
    return {**env, "MPLBACKEND": "Agg", **extra}


def run(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=_env(**env))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_both_import_styles(tmp_path: Path) -> None:
    assert run(SEED_IMPORTS, tmp_path).stdout.strip() == "same objects"


def test_profiler_wrapper_example(tmp_path: Path) -> None:
    proc = run(PRELUDE + SEED_PROFILER_WRAPPER, tmp_path)
    charts = ["mt_cuda_time_plot.png", "mt_memory_usage_line_chart.png"] if HAS_MPL else []
    assert sorted(p.name for p in (tmp_path / "logs" / "profiler").iterdir()) == sorted(
        [*charts, "mt_rank_0.log", "mt_trace.json"])
    log = (tmp_path / "logs" / "profiler" / "mt_rank_0.log").read_text()
    assert log.count("\n") > 20 and "10 window(s)" in log and "aten::mse_loss" in log
    assert "operators of the last window:" in proc.stdout  # enable_print_summary
    assert json.loads((tmp_path / "logs" / "profiler" / "mt_trace.json").read_text())["traceEvents"]
    for png in charts:
        assert (tmp_path / "logs" / "profiler" / png).read_bytes()[:8] == PNG_MAGIC
    if ON_CPU:  # no allocator history without CUDA: said once, nothing written
        assert "CPU times" in log and not (tmp_path / "logs" / "memory").exists()
        assert proc.stderr.count("no memory pickle will be written") == 1
    else:
        (pickle_file,) = (tmp_path / "logs" / "memory").glob("mt_mem_*.pickle")
        assert pickle_file.stat().st_size > 0


def test_profiler_wrapper_with_tracker_example(tmp_path: Path) -> None:
    run(PRELUDE + SEED_WRAPPER_WITH_TRACKER, tmp_path)
    log = (tmp_path / "profiler_logs" / "mt_rank_0.log").read_text()
    assert "10 window(s)" in log and len([line for line in log.splitlines() if line.startswith("    ")]) >= 10
    assert (tmp_path / "profiler_logs" / "mt_cuda_time_plot.png").exists() is HAS_MPL
    assert (tmp_path / "exp1_rank0_samples.jsonl").read_text().count("\n") >= 1


def test_dit_profiler_example(tmp_path: Path) -> None:
    run(PRELUDE + DIT_PRELUDE + SEED_DIT, tmp_path, PROFILE_TASK_TYPES="DIT,VAE")
    base = tmp_path / "profiler_output"
    assert sorted(p.name for p in base.iterdir()) == ["DIT", "VAE"]  # Transformer is not profiled
    assert sorted(p.name for p in (base / "DIT").iterdir()) == [
        "aten_linear_rank0_analysis.json", "aten_matmul_rank0_analysis.json", "prof_summary_rank0.txt",
        "tile_encoder_0_rank0_analysis.json", "tile_encoder_1_rank0_analysis.json", "torch_prof_rank0.json"]
    assert sorted(p.name for p in (base / "VAE").iterdir()) == ["prof_summary_rank0.txt"]  # no trace for VAE
    tile = json.loads((base / "DIT" / "tile_encoder_0_rank0_analysis.json").read_text())["tile_encoder_0"]
    assert tile["count"] == 1 and tile["total_us"] > 0
    matmul = json.loads((base / "DIT" / "aten_matmul_rank0_analysis.json").read_text())["aten::matmul"]
    assert matmul["count"] == 2
    if ON_CPU:
        assert (tile["metric"], tile["requested_metric"]) == ("cpu_time_total", "cuda_time_total")


def test_gpu_tracker_example(tmp_path: Path) -> None:
    code = PRELUDE + "import time\ndef train_one_epoch():\n    train_step(); time.sleep(0.01)\n" + SEED_TRACKER
    run(code, tmp_path)
    samples = (tmp_path / "experiment_1_rank0_samples.jsonl").read_text().splitlines()
    assert len(samples) >= 2  # one at start, one at stop at least
    png = tmp_path / "experiment_1_rank0_performance_profile.png"
    if png.exists():  # matplotlib is the memory [charts] extra
        assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("example", [SEED_SNAPSHOTS, SEED_SNAPSHOT_PATTERN], ids=["nested", "pattern"])
def test_snapshot_examples(example: str, tmp_path: Path) -> None:
    proc = run(PRELUDE + SNAPSHOT_PRELUDE + example, tmp_path, ENABLE_MEMORY_SNAPSHOT="1")
    files = sorted(p.name for p in tmp_path.glob("*.pt"))
    if ON_CPU:  # warns once and does nothing
        assert files == [] and proc.stderr.count("WARNING") == 1
    else:
        assert any(f.startswith("training") for f in files)


def test_snapshot_analysis_example(tmp_path: Path) -> None:
    from my_utils.memory.snapshot import save_snapshot

    save_snapshot(tmp_path / "forward__20260303_120000__rank0.pt", {"segments": [], "device_traces": [[]]})
    run(SEED_SNAPSHOT_ANALYSIS, tmp_path)
    assert (tmp_path / "memory_viz.html").stat().st_size > 0


def test_profiling_quick_start(tmp_path: Path) -> None:
    proc = run(QUICK_START_PRELUDE + SEED_QUICK_START, tmp_path)
    assert proc.stdout.startswith("报告: [")
    events = (tmp_path / "profiling_results" / "metrics_events.jsonl").read_text().splitlines()
    assert {json.loads(line)["step"] for line in events if json.loads(line)["name"] == "train_step"} == set(
        range(901))  # every step up to the last collect, each once
    assert list((tmp_path / "profiling_results").glob("*.html"))


def test_profile_cli_commands(tmp_path: Path) -> None:
    examples = Path(my_utils.profiling.__file__).parent / "examples"
    shutil.copytree(examples, tmp_path / "my_utils" / "profiling" / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    cli = shutil.which("myutils-profile", path=str(Path(sys.executable).parent)) or "myutils-profile"
    for args in SEED_CLI:
        if args[0] == "diff":
            for run_dir in ("run_a", "run_b"):
                shutil.copytree(tmp_path / "analysis_out", tmp_path / run_dir)
        proc = subprocess.run([cli, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_env())
        assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    assert (tmp_path / "metrics_out" / "metrics_events.jsonl").stat().st_size > 0
    assert json.loads((tmp_path / "analysis_out" / "analysis_report.json").read_text())["findings"] is not None
    assert json.loads((tmp_path / "diff.json").read_text()) and (tmp_path / "diff.md").read_text().strip()
    assert json.loads((tmp_path / "metrics_out" / "metrics_trace.json").read_text())["traceEvents"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_socket_clock_example(tmp_path: Path) -> None:
    code = SEED_SOCKET_SERVER.replace("PORT", str(_free_port()))
    server = subprocess.Popen([sys.executable, "-c", "is_producer = True\n" + code], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        client = run("import time; time.sleep(1.0)\nis_producer = False\n" + code, tmp_path)
        out, err = server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, err[-2000:]
    assert float(out) == 0.0 and abs(float(client.stdout)) < 0.05  # same host clock: offset is the noise
