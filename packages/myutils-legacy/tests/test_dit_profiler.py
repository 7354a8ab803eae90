"""create_profiler_context with real torch profiles on the CPU: task selection, output tree, per-op JSON."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from my_utils.core.errors import ConfigError
from my_utils.legacy.dit_profiler import create_profiler_context

LOG = logging.getLogger("test.dit")
OPS = {r"aten::linear": "self_cuda_time_total", r"tile_encoder_\d+": "cuda_time_total"}


def _work(tiles: int = 3, repeat: int = 2) -> None:
    model = torch.nn.Linear(16, 16)
    for _ in range(repeat):
        for i in range(tiles):
            with torch.profiler.record_function(f"tile_encoder_{i}"):
                model(torch.randn(4, 16))


@pytest.fixture
def tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILE_TASK_TYPES", "DIT, VAE")
    monkeypatch.setenv("RANK", "3")


@pytest.mark.usefixtures("tasks")
def test_dit_writes_the_seed_tree(tmp_path: Path) -> None:
    with create_profiler_context("DIT", LOG, OPS, base_output_dir=tmp_path) as prof:
        assert prof is not None
        _work()
    folder = tmp_path / "DIT"
    assert sorted(p.name for p in folder.iterdir()) == sorted([
        "torch_prof_rank3.json", "prof_summary_rank3.txt", "aten_linear_rank3_analysis.json",
        *(f"tile_encoder_{i}_rank3_analysis.json" for i in range(3))])
    trace = json.loads((folder / "torch_prof_rank3.json").read_text())
    trace_tiles = [e for e in trace["traceEvents"] if e.get("name") == "tile_encoder_1" and e.get("ph") == "X"]
    (name, entry), = json.loads((folder / "tile_encoder_1_rank3_analysis.json").read_text()).items()
    assert name == "tile_encoder_1" and entry["count"] == 2 == len(trace_tiles)
    # the statistics agree with the trace's own durations (µs) within the trace's rounding
    durations = sorted(float(e["dur"]) for e in trace_tiles)
    assert entry["min_us"] == pytest.approx(durations[0], abs=2) and entry["max_us"] == pytest.approx(
        durations[-1], abs=2)
    assert entry["total_us"] == pytest.approx(sum(durations), abs=4)
    linear = json.loads((folder / "aten_linear_rank3_analysis.json").read_text())["aten::linear"]
    assert linear["count"] == 6
    if not torch.cuda.is_available():
        assert (entry["metric"], entry["requested_metric"]) == ("cpu_time_total", "cuda_time_total")
        assert linear["metric"] == "self_cpu_time_total" and "CPU times" in linear["time_basis"]
        assert "CPU times" in (folder / "prof_summary_rank3.txt").read_text()


@pytest.mark.usefixtures("tasks")
def test_vae_has_no_trace_and_others_are_not_profiled(tmp_path: Path) -> None:
    with create_profiler_context("VAE", LOG, base_output_dir=tmp_path):
        _work(1, 1)
    assert sorted(p.name for p in (tmp_path / "VAE").iterdir()) == ["prof_summary_rank3.txt"]
    with create_profiler_context("Transformer", LOG, OPS, base_output_dir=tmp_path) as prof:
        assert prof is None
        _work(1, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["VAE"]


def test_unset_env_profiles_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFILE_TASK_TYPES", raising=False)
    with create_profiler_context("DIT", LOG, OPS, base_output_dir=tmp_path) as prof:
        assert prof is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("tasks")
def test_hostile_names_stay_inside(tmp_path: Path) -> None:
    base = tmp_path / "out"
    with create_profiler_context("DIT", LOG, {r"\.\./": "cpu_time_total"}, base_output_dir=base):
        with torch.profiler.record_function("../../x"):
            torch.ones(2) + 1
        with torch.profiler.record_function("../../../etc/passwd"):
            torch.ones(2) + 1
    written = sorted(p.name for p in (base / "DIT").glob("*_analysis.json"))
    assert written == ["etc_passwd_rank3_analysis.json", "x_rank3_analysis.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert json.loads((base / "DIT" / "x_rank3_analysis.json").read_text())["../../x"]["count"] == 1


def test_bad_ops_raise_before_running(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ops_to_analyze:key 'x': a metric among"):
        create_profiler_context("DIT", LOG, {"x": "wall_time"}, base_output_dir=tmp_path)


@pytest.mark.usefixtures("tasks")
def test_block_errors_propagate_and_disk_errors_do_not(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="test.dit"), \
            create_profiler_context("DIT", LOG, OPS, base_output_dir=blocker):
        _work(1, 1)
    assert any("outputs under" in r.getMessage() and "not written" in r.getMessage() for r in caplog.records)
    with pytest.raises(KeyError), create_profiler_context("DIT", LOG, OPS, base_output_dir=tmp_path / "ok"):
        raise KeyError("training bug")
    assert (tmp_path / "ok" / "DIT" / "prof_summary_rank3.txt").exists()


@pytest.mark.cuda
@pytest.mark.usefixtures("tasks")
def test_cuda_metrics(tmp_path: Path) -> None:
    model = torch.nn.Linear(256, 256).cuda()
    with create_profiler_context("DIT", LOG, {r"aten::linear": "self_cuda_time_total", r"aten::mm": "cuda_time_total"},
                                 base_output_dir=tmp_path):
        for _ in range(4):
            model(torch.randn(64, 256, device="cuda"))
    linear = json.loads((tmp_path / "DIT" / "aten_linear_rank3_analysis.json").read_text())["aten::linear"]
    assert linear["metric"] == "self_cuda_time_total" and linear["count"] == 4 and "requested_metric" not in linear
