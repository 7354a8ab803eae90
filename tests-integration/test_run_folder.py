"""Issue 37's "done when": one run folder of every kind gives one report from ``myutils-profile analyze FOLDER``.

The folder holds 2 Kineto ranks, 6 nsys exports, 2 NCCL logs and a ``perf stat`` file from
``../shared/fixtures/real`` (through the registry), and the CSVs the Lightning callback writes
(``profile_rank_<r>.csv``, ``module_summary_rank<r>.csv``) from two real CPU fits, one per rank,
with their run logs. Every file must be used, or named with what reads it; each kind's figures are
checked against the raw files (csv, sqlite3, gzip + json, the logs' text).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning", reason="the callbacks' CSVs come from a real Lightning fit (requirements-test.txt)")

TRACES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")
EXPORTS = tuple(f"nsys/dsl_ring_6ranks/{n}.sqlite" for n in ("ault43.cscs.ch_485050", "ault43.cscs.ch_485052",
                                                              "ault43.cscs.ch_485055", "ault44.cscs.ch_739537",
                                                              "ault44.cscs.ch_739538", "ault44.cscs.ch_739541"))
LOGS = ("nccl/dsl__example_2.502726.o.nccl2.22.3.log", "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log")
PERF = "perf/two_sum__perf_stat.txt"

_FIT = """
import sys, warnings
warnings.simplefilter("ignore")
import lightning as L, torch
from torch.utils.data import DataLoader, TensorDataset
from my_utils.hooks.integrations import MyUtilsLightningCallback

class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)
trainer = L.Trainer(accelerator="cpu", max_steps=4, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, default_root_dir=sys.argv[2],
                    callbacks=[MyUtilsLightningCallback(sys.argv[1])])
trainer.fit(Tiny(), data)
"""


def _callback_csvs(tmp: Path, rank: int) -> Path:
    """A real Lightning fit on the CPU, as rank ``rank``: the callback's output folder."""
    folder = tmp / f"fit{rank}"
    folder.mkdir()
    config = folder / "profiling.yaml"
    config.write_text(f"output_dir: out\nrun_id: fit\nrank: {rank}\ntimer: {{enabled: true, use_cuda: false}}\n"
                      "module_profiler: {enabled: true}\n")
    proc = subprocess.run([sys.executable, "-c", _FIT, str(config), str(folder)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "out"


def _nccl_versions(path: Path) -> set[int]:
    found = set(re.findall(r"NCCL version (\d+)\.(\d+)\.(\d+)", path.read_text(errors="replace")))
    return {int(a) * 10000 + int(b) * 100 + int(c) for a, b, c in found}


@pytest.mark.slow
def test_one_run_folder_of_every_kind_gives_one_report(real_fixtures: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "nsys").mkdir()
    for name in TRACES:
        shutil.copyfile(real_fixtures / name, run / "traces" / Path(name).name)
    for name in EXPORTS:
        shutil.copyfile(real_fixtures / name, run / "nsys" / Path(name).name)
    for name in LOGS:
        shutil.copyfile(real_fixtures / name, run / Path(name).name)
    shutil.copyfile(real_fixtures / PERF, run / "perf_stat.txt")
    for rank in (0, 1):
        out = _callback_csvs(tmp_path, rank)
        for f in out.iterdir():
            if f.is_file():
                shutil.copyfile(f, run / f.name)
    out = tmp_path / "report"
    proc = subprocess.run([str(Path(sys.executable).with_name("myutils-profile")), "analyze", str(run), "--output-dir",
                           str(out), "-q", "--headline"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fix first:" in proc.stdout and f"report: {out / 'analysis_report.html'}" in proc.stdout
    report = json.loads((out / "analysis_report.json").read_text())
    rows = {Path(r["file"]).name: r for r in report["tables"]["run_inputs"]}

    # every file is used, or named with what reads it
    assert sorted(rows) == sorted(p.name for p in run.rglob("*") if p.is_file())
    for name, row in rows.items():
        assert row["read"] or row["use"], name
    left_out = {n for n, r in rows.items() if not r["read"]}
    assert left_out == {"rank_0.log", "rank_1.log"}  # the callbacks' text logs: nothing to analyse
    assert all(f"note: {run / n}" in proc.stderr for n in left_out)

    by_source = report["inputs"]["by_source"]
    assert {"torch_profiler", "nsys_sqlite", "nccl_log", "perf_stat", "mytimer", "module_profiler"} <= set(by_source)
    # the callbacks' CSVs: every timed step of both ranks, every module row
    for rank in (0, 1):
        with (run / f"profile_rank_{rank}.csv").open(newline="") as fh:
            steps = {int(r["step"]) for r in csv.DictReader(fh) if r["event_type"] == "END"
                     and r["event_name"] == "train_step"}
        analysed = {r["step"] for r in report["tables"]["steps"] if r["source"] == "mytimer" and r["rank"] == rank}
        assert analysed == steps and steps
        assert rows[f"profile_rank_{rank}.csv"]["rank"] == rank
    modules = 0
    for rank in (0, 1):
        with (run / f"module_summary_rank{rank}.csv").open(newline="") as fh:
            modules += sum(1 for _ in csv.DictReader(fh))
    assert by_source["module_profiler"] == modules
    # the Kineto ranks, from distributedInfo
    for name in TRACES:
        with gzip.open(run / "traces" / Path(name).name, "rt", encoding="utf-8") as fh:
            rank = json.load(fh)["distributedInfo"]["rank"]
        assert rows[Path(name).name]["rank"] == rank
    assert sorted(r["rank"] for r in report["tables"]["kineto_temporal"] if r.get("rank") is not None) == [0, 1]
    # the six exports, one rank each, every kernel counted
    assert sorted(r["rank"] for r in report["tables"]["nsys_inputs"]) == list(range(6))
    kernels = 0
    for name in EXPORTS:
        con = sqlite3.connect(run / "nsys" / Path(name).name)
        try:
            kernels += con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        finally:
            con.close()
    assert sum(int(r["count"]) for r in report["tables"]["nsys_kernel_kinds"]) == kernels
    # the NCCL logs: each log's NCCL version
    versions = {int(r["total"] / r["count"]) for r in report["tables"]["totals"] if r["name"] == "nccl.version"}
    assert versions == set().union(*(_nccl_versions(run / Path(n).name) for n in LOGS))
    assert by_source["perf_stat"] > 0
