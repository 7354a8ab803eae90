"""The seed README's hook examples run on the CPU, each in a fresh interpreter.

The ForwardProfilerHook examples run unchanged, with an NVTX injection recorder attached so
that the window's range is checked where Nsight would see it. The ModuleProfiler examples
call two CUDA-only APIs (``.cuda()`` and ``torch.cuda.synchronize()``); on the CPU those two
calls, and nothing else, are adapted (the `cuda` test runs them unchanged).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

PRELUDE = '''
import torch
class MyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Linear(8, 32)
        self.attn = torch.nn.Linear(32, 32)
        self.ffn = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    def forward(self, x):
        return self.ffn(torch.relu(self.attn(self.embedding(x))))
model = MyModel()
input = torch.randn(4, 8)
input_data = input
_w = torch.ones(3, requires_grad=True)
loss = _w.sum()  # the seed's loop calls loss.backward() on a loss it does not show
'''

SEED_FORWARD_HOOK = '''
from my_utils import ForwardProfilerHook, create_labeler

model = MyModel()

# 创建hook：在第5-10次迭代时profile
hook = ForwardProfilerHook(
    start_iter=5,
    stop_iter=10,
    rank_only=[0, 1],  # 只在rank 0和1上profile
    nvtx_range="model_forward",
    labeler=create_labeler(enabled=True, default_domain="training"),
)
hook.attach(model)

# 正常训练，hook会自动触发
for i in range(100):
    output = model(input)
    # 在iter 5时自动启动profiler
    # 在iter 10时自动停止profiler
'''

SEED_NSIGHT = '''
from my_utils import ForwardProfilerHook, create_labeler

# NVTX标记
labeler = create_labeler(enabled=True, default_domain="training")
labeler.register_label("forward", color="blue")
labeler.register_label("backward", color="red")

# 自动profiler控制
hook = ForwardProfilerHook(
    start_iter=10,
    stop_iter=20,
    rank_only=[0],
    nvtx_range="training_window",
    labeler=labeler,
)
hook.attach(model)

for i in range(100):
    with labeler.range("forward"):
        output = model(input)
    with labeler.range("backward"):
        loss.backward()
'''

REPORT = '''
(info, closing), = hook.windows
print(info.started_by.iteration, closing.stopped_by.iteration, closing.reason.name, hook.attached)
'''

SEED_MODULE_PROFILER_1 = '''
from my_utils.moduleProfiler import ModuleProfiler
import torch

model = MyModel().cuda()

# 方式1: 上下文管理器（推荐，自动cleanup）
with ModuleProfiler(model) as profiler:
    for i in range(100):
        profiler.start()
        output = model(input_data)
        torch.cuda.synchronize()  # 必须同步
        profiler.stop()

    # 生成报告
    df = profiler.summary(output_path="module_profile.csv")
    print(df)

# 方式2: 手动管理
profiler = ModuleProfiler(model)
# ... 运行循环 ...
df = profiler.summary()
profiler.cleanup()
'''

SEED_MODULE_PROFILER_2 = '''
from my_utils.moduleProfiler import ModuleProfiler
with ModuleProfiler(model) as profiler:
    for i in range(100):
        profiler.start()
        output = model(input)
        torch.cuda.synchronize()
        profiler.stop()
df = profiler.summary("module_timings.csv")
print(df.head(10))  # 查看最慢的10个模块
'''


def on_cpu(code: str) -> str:
    """The two CUDA-only calls of the ModuleProfiler examples, adapted for a CPU build (nothing else)."""
    return code.replace("MyModel().cuda()", "MyModel()").replace("torch.cuda.synchronize()", "pass")


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_seed_forward_hook_example_runs_unchanged(run_recorded: Any) -> None:
    result = run_recorded(PRELUDE + SEED_FORWARD_HOOK + REPORT, env={"RANK": "1"})
    assert result.stdout.split() == ["5", "10", "CONDITION", "False"]
    window = [(c.op, c.domain, c.message) for c in result.calls if c.op in ("start", "end")]
    assert window == [("start", "training", "model_forward"), ("end", "training", "-")]
    if not torch.cuda.is_available():
        assert result.stderr.count("CudaProfilerBackend does nothing") == 1


def test_seed_forward_hook_example_skips_other_ranks(run_recorded: Any) -> None:
    result = run_recorded(PRELUDE + SEED_FORWARD_HOOK + "print(hook.attached, hook.windows)", env={"RANK": "2"})
    assert result.stdout.split() == ["False", "[]"]
    assert [c for c in result.calls if c.op in ("start", "end")] == []


def test_seed_nsight_example_runs_unchanged(run_recorded: Any) -> None:
    result = run_recorded(PRELUDE + SEED_NSIGHT + REPORT, env={"RANK": "0"})
    assert result.stdout.split() == ["10", "20", "CONDITION", "False"]
    ops = [(c.op, c.message) for c in result.calls if c.op in ("push", "start", "end")]
    forwards_before = [sum(1 for op in ops[:i] if op == ("push", "forward")) for i, op in enumerate(ops)
                       if op[0] in ("start", "end")]
    # the window opens inside forward 10's NVTX range and closes inside forward 20's
    assert [op for op in ops if op[0] != "push"] == [("start", "training_window"), ("end", "-")]
    assert forwards_before == [11, 21]
    assert sum(1 for op in ops if op == ("push", "forward")) == 100


@pytest.mark.parametrize("example", [SEED_MODULE_PROFILER_1, SEED_MODULE_PROFILER_2], ids=["readme", "guide"])
def test_seed_module_profiler_examples_on_the_cpu(example: str, tmp_path: Path) -> None:
    proc = run(PRELUDE + on_cpu(example), tmp_path)
    csv_file, = tmp_path.glob("*.csv")
    lines = csv_file.read_text().splitlines()
    assert lines[0] == "module_name,mean_ms,median_ms,std_ms,total_ms,run_count,percentage"
    names = sorted(line.split(",")[0] for line in lines[1:])
    assert names == ["attn", "embedding", "ffn.0", "ffn.1", "ffn.2"]
    assert all(line.split(",")[5] == "100" for line in lines[1:])
    assert "module_name" in proc.stdout and "percentage" in proc.stdout


@pytest.mark.cuda
@pytest.mark.parametrize("example", [SEED_MODULE_PROFILER_1, SEED_MODULE_PROFILER_2], ids=["readme", "guide"])
def test_seed_module_profiler_examples_unchanged_on_cuda(example: str, tmp_path: Path) -> None:
    prelude = PRELUDE.replace("model = MyModel()", "model = MyModel().cuda()").replace(
        "torch.randn(4, 8)", "torch.randn(4, 8, device='cuda')")
    code = prelude + example + "\nprint('CLOCK', profiler.clock)\n"
    proc = run(code, tmp_path)
    assert "CLOCK cuda" in proc.stdout
    csv_file, = tmp_path.glob("*.csv")
    assert all(line.split(",")[5] == "100" for line in csv_file.read_text().splitlines()[1:])
