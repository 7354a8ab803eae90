"""``IntegrationConfig`` and ``ProfilingSession`` in a plain loop: real torch, real torch.profiler, real files."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from my_utils.core.errors import ConfigError, UsageError
from my_utils.core.logger import GlobalLogger
from my_utils.hooks.integrations import IntegrationConfig, ProfilingSession

sys.path.insert(0, str(Path(__file__).parent))
from integrations_shared import ACCUMULATE, STEPS, check_outputs, write_config


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def test_plain_loop_drives_every_component(tmp_path: Path) -> None:
    cfg = IntegrationConfig.from_file(write_config(tmp_path, "plain", monitor=True))
    assert cfg.output_dir == tmp_path / "out"
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with ProfilingSession(cfg, num_microbatches=ACCUMULATE).start(model) as session:
        for step in range(STEPS):
            for mb in range(ACCUMULATE):
                with session.microbatch(step, mb):
                    model(torch.randn(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
            session.end_step(step)
    check_outputs(session, tmp_path / "out", leaf_modules=3)
    # the monitor (myutils-memory) sampled into its JSONL file while the loop ran
    samples = (tmp_path / "out" / "mon_rank0_samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert samples and all(isinstance(json.loads(line), dict) for line in samples)
    # each optimizer step's end is marked there (energy per step is measured between them)
    assert [o["step"] for o in map(json.loads, samples) if "step" in o] == list(range(STEPS))


def test_a_step_left_open_is_closed_by_close(tmp_path: Path) -> None:
    cfg = IntegrationConfig.from_dict({"output_dir": str(tmp_path)})
    session = ProfilingSession(cfg).start(tiny_model())
    session.begin_microbatch(0, 0)
    session.close()
    session.close()  # idempotent
    assert session.module_profiler is not None and not session.module_profiler.attached
    assert session.controller is None  # capture disabled by default: no backend was built


def test_misuse_names_the_open_microbatch(tmp_path: Path) -> None:
    session = ProfilingSession(IntegrationConfig.from_dict({"output_dir": str(tmp_path)})).start()
    session.begin_microbatch(0, 0)
    with pytest.raises(UsageError, match="microbatch 0 of step 0 is open"):
        session.begin_microbatch(0, 1)
    with pytest.raises(UsageError, match="the open microbatch is 0 of step 0"):
        session.end_microbatch(0, 1)
    with pytest.raises(UsageError, match=r"end_step\(1\): the open step is 0"):
        session.end_step(1)
    session.close()
    with pytest.raises(UsageError, match="expected an IntegrationConfig"):
        ProfilingSession({"output_dir": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "place"), [
    ("timer: {enabled: maybe}", "key timer.enabled"),
    ("monitor: {interval: 0}", "key monitor.interval"),
    ("module_profiler: {every: 2}", "key module_profiler.every"),
    ("speed: fast", "key speed"),
    ("rank: -1", "key rank"),
    ("profile: {capture: {windows: [{name: w, start_iter: 1, start_mb_selector: middle}]}}",
     "start_mb_selector"),
    ("timer: [", "line"),
])
def test_bad_config_names_file_and_key(tmp_path: Path, text: str, place: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        IntegrationConfig.from_file(path)
    message = str(info.value)
    assert str(path) in message and place in message
    assert "\n" not in message


def test_json_config_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"output_dir": "o", "monitor": {"enabled": True, "interval": 2}}), encoding="utf-8")
    cfg = IntegrationConfig.from_file(path)
    assert cfg.output_dir == tmp_path / "o" and cfg.monitor.interval == 2.0 and cfg.monitor.enabled
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        IntegrationConfig.from_file(tmp_path / "missing.yaml")


def test_import_stays_light() -> None:
    code = ("import sys, my_utils.hooks.integrations as i; i.IntegrationConfig; "
            "bad = [m for m in ('torch', 'lightning', 'transformers', 'pandas') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_monitor_without_myutils_memory_is_reported_once_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "my_utils.memory.gpu_tracker", None)  # import fails as if not installed
    cfg = IntegrationConfig.from_dict({"output_dir": str(tmp_path), "monitor": {"enabled": True}})
    log = logging.getLogger("my_utils.hooks.integrations")
    log.addHandler(caplog.handler)  # GlobalLogger may stop my_utils records from reaching the root logger
    try:
        with ProfilingSession(cfg).start() as session:
            with session.microbatch(0, 0):
                pass
            session.end_step(0)
    finally:
        log.removeHandler(caplog.handler)
    assert session.monitor is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "pip install myutils-memory" in messages[0]
    assert ",train_step,END," in (tmp_path / "profile_rank_0.csv").read_text(encoding="utf-8")
