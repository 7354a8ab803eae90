"""The seed README's logger / timer / CSV-to-trace examples, run as written in fresh interpreters.

The README lost its indentation and a few line breaks to damaged bytes; the snippets below
restore only that (and define the placeholders the README leaves to the reader, such as
``load_batch``). Each runs in its own interpreter in a temporary working directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.profile_csv import read_profile_csv
from my_utils.core.testing.trace_check import check_trace

MAIN_WORKFLOW = '''
import time
import torch
from my_utils.logger import GlobalLogger
from my_utils.utils import MyTimer
# 1) 每个进程设置一次logger
logger_mgr = GlobalLogger()
logger_mgr.setup(log_dir="logs/train", rank=0, world_size=1, extra_log_label="Trainer")
logger = logger_mgr.get_logger()
# 2) 创建timer并注入logger
timer = MyTimer(use_cuda=torch.cuda.is_available(), tag="train", log_dir="logs/train")
timer.set_logger(logger)
for step in range(3):
    timer.set_step(step)
    timer.start("iter")
    timer.start("forward")
    time.sleep(0.01)
    timer.stop("forward")
    timer.start("backward")
    time.sleep(0.02)
    timer.stop("backward")
    timer.stop("iter")
    # 刷新CUDA事件计时并写入机器日志
    timer.step()  # 等同于 timer.synchronize_and_log()
'''

# The README's own converter, verbatim apart from indentation; it must read our CSV.
SEED_CSV_TO_TRACE = '''
import csv
import json
import re
def csv_to_trace(csv_path: str, out_json: str) -> None:
    rows = []
    with open(csv_path, "r", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for r in reader:
            rows.append(r)
    rows.sort(key=lambda r: float(r["timestamp_unix"]))
    trace_events = []
    for r in rows:
        ts_us = int(float(r["timestamp_unix"]) * 1_000_000)
        step = int(r["step"])
        metadata = r.get("metadata", "")
        node_m = re.search(r"node_id=(\\d+)", metadata or "")
        node_id = int(node_m.group(1)) if node_m else None
        event = {
            "name": r["event_name"],
            "cat": "MyTimer",
            "ph": "B" if r["event_type"] == "START" else "E",
            "ts": ts_us,
            "pid": r["machine_id"], # process lane
            "tid": f"step_{step}", # thread lane
            "args": {
                "step": step,
                "duration_ms": float(r["duration_ms"] or 0.0),
                "metadata": metadata,
            },
        }
        if node_id is not None:
            event["args"]["node_id"] = node_id
        trace_events.append(event)
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": trace_events}, f)
# 使用示例:
csv_to_trace("logs/train/profile_rank_0.csv", "logs/train/mytimer_trace.json")
'''

PACKAGED_CSV_TO_TRACE = '''
from my_utils.core.trace import csv_to_trace
csv_to_trace("logs/train/profile_rank_0.csv", "logs/train/mytimer_trace.json")
'''

GLOBAL_LOGGER = '''
from my_utils.logger import GlobalLogger, get_global_logger
# 方式1: 单例模式
logger_mgr = GlobalLogger()
logger_mgr.setup(
    log_dir="logs/experiment",
    rank=0,
    world_size=4,
    extra_log_label="Worker",
    data_parallel_rank=0, # 可选: Megatron并行信息
    data_parallel_world_size=2
)
logger = logger_mgr.get_logger()
# 方式2: 便捷函数
logger = get_global_logger()
# 使用
logger.info("Training started")
logger.warning("Learning rate adjusted")
# 记录profile事件
logger_mgr.log_profile_event(
    step=10,
    event_name="forward_pass",
    event_type="START",
    duration_ms=0.0,
    metadata="layer=transformer_0"
)
'''

COMMON_PATTERN = '''
from my_utils.logger import GlobalLogger
from my_utils.utils import MyTimer
logger_mgr = GlobalLogger()
logger_mgr.setup(log_dir="logs", rank=0, world_size=1)
logger = logger_mgr.get_logger()
timer = MyTimer(use_cuda=True, tag="train")
timer.set_logger(logger)
for step in range(100):
    timer.set_step(step)
    timer.start("iteration")
    # 训练代码
    timer.stop("iteration")
    timer.step()
'''

CUSTOM_TIMER = '''
from my_utils.logger import GlobalLogger
GlobalLogger().setup(log_dir="logs", rank=0, world_size=1)
from my_utils.utils import MyTimer
class MyCustomTimer(MyTimer):
    def step(self):
        super().step()
        # 添加自定义逻辑，如上传到监控系统
        self.upload_metrics()
uploaded = []
MyCustomTimer.upload_metrics = lambda self: uploaded.append(self.current_step)  # the README leaves it to you
timer = MyCustomTimer(tag="custom")
for s in range(3):
    timer.set_step(s)
    timer.start("iteration")
    timer.stop("iteration")
    timer.step()
assert uploaded == [0, 1, 2], uploaded
'''

TIMER_WITH_LABELER = '''
from my_utils.logger import GlobalLogger
logger = GlobalLogger().setup(log_dir="logs/perf", rank=0, world_size=1).get_logger()
import torch
model = torch.nn.Linear(4, 4)
def load_batch():
    return torch.randn(2, 4)
# -- the README's example --
from my_utils import create_labeler
from my_utils.utils import MyTimer
import torch
timer = MyTimer(
    use_cuda=torch.cuda.is_available(),
    tag="training",
    log_dir="logs/perf",
    labeler=create_labeler(enabled=True, default_domain="training"),
)
timer.set_logger(logger)
for epoch in range(10):
    timer.set_step(epoch)
    timer.start("epoch")
    # 嵌套计时
    timer.start("data_loading")
    data = load_batch()
    timer.stop("data_loading")
    timer.start("forward")
    output = model(data)
    timer.stop("forward")
    timer.start("backward")
    loss = output.sum()
    loss.backward()
    timer.stop("backward")
    timer.stop("epoch")
    # 刷新并记录所有事件
    timer.step()
'''


def run(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=180,
                            env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result


def test_main_workflow_then_both_csv_to_trace(tmp_path: Path) -> None:
    run(MAIN_WORKFLOW, tmp_path)
    log_dir = tmp_path / "logs" / "train"
    rows = read_profile_csv(log_dir / "profile_rank_0.csv")
    assert len(rows) == 18 and [r.step for r in rows[::6]] == [0, 1, 2]
    backward = [r for r in rows if r.event_name == "backward" and r.event_type == "END"]
    assert all(r.duration_ms >= 19.0 for r in backward)
    assert (log_dir / "rank_0.log").exists()
    # the README's converter reads our CSV as it is
    run(SEED_CSV_TO_TRACE, tmp_path)
    seed_doc = json.loads((log_dir / "mytimer_trace.json").read_text())
    assert len(seed_doc["traceEvents"]) == 18
    assert {e["args"]["node_id"] for e in seed_doc["traceEvents"]} == {0, 1, 2}
    # and the packaged one writes a trace the structural checker accepts
    run(PACKAGED_CSV_TO_TRACE, tmp_path)
    doc = json.loads((log_dir / "mytimer_trace.json").read_text())
    assert check_trace(doc) == []
    assert sorted((e["name"], e["ts"]) for e in doc["traceEvents"] if e["ph"] in "BE") == sorted(
        (e["name"], e["ts"]) for e in seed_doc["traceEvents"])


def test_global_logger_example(tmp_path: Path) -> None:
    result = run(GLOBAL_LOGGER, tmp_path)
    log = (tmp_path / "logs" / "experiment" / "rank_0.log").read_text()
    assert "[Worker rank 0/4 dp=0/2] INFO my_utils: Training started" in log
    assert "WARNING my_utils: Learning rate adjusted" in log
    assert "Training started" in result.stderr  # the console handler
    (row,) = read_profile_csv(tmp_path / "logs" / "experiment" / "profile_rank_0.csv")
    assert (row.step, row.event_name, row.event_type, row.metadata) == (10, "forward_pass", "START",
                                                                        "layer=transformer_0")


def test_common_pattern_with_use_cuda_on_this_machine(tmp_path: Path) -> None:
    result = run(COMMON_PATTERN, tmp_path)
    rows = read_profile_csv(tmp_path / "logs" / "profile_rank_0.csv")
    assert len(rows) == 200
    import torch

    if not torch.cuda.is_available():  # degrades with one message, never an error
        assert result.stderr.count("CUDA timing requested but unavailable") == 1


def test_custom_timer_subclass(tmp_path: Path) -> None:
    run(CUSTOM_TIMER, tmp_path)
    assert len(read_profile_csv(tmp_path / "logs" / "profile_rank_0.csv")) == 6


def test_timer_with_labeler_example(tmp_path: Path) -> None:
    pytest.importorskip("my_utils.tracing.nvtx_utils", reason="create_labeler comes from myutils-tracing")
    run(TIMER_WITH_LABELER, tmp_path)
    rows = read_profile_csv(tmp_path / "logs" / "perf" / "profile_rank_0.csv")
    assert len(rows) == 10 * 8
