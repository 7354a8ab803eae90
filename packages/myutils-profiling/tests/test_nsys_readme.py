"""Every command of the README's Nsight section runs, on real exports named as in the examples."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

README = Path(__file__).resolve().parent.parent / "README.md"


def _commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Nsight Systems and Nsight Compute", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for line in block.splitlines() if line.startswith("myutils-profile ")]


def test_the_readme_commands_run(real_fixtures: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for i, name in enumerate(sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))):
        shutil.copyfile(real_fixtures / name, run / f"report_{i}.sqlite")
    shutil.copyfile(real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite", tmp_path / "before.sqlite")
    shutil.copyfile(real_fixtures / "nsys/nsysai__mfu_2gpu_after.sqlite", tmp_path / "after.sqlite")
    shutil.copyfile(real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt", tmp_path / "kernels.csv")
    shutil.copyfile(real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt", tmp_path / "kernels_new.csv")
    monkeypatch.chdir(tmp_path)
    commands = _commands()
    assert len(commands) == 12
    for command in commands:
        args = shlex.split(command)[1:]
        res = CliRunner().invoke(app, args)
        if args[:2] == ["nsys", "diff"]:
            # categories are one sample per capture (never judged); the NVTX operator ranges repeat, and several
            # slowed by more than 10%: the gate names them after the headline's GPU-level change
            assert res.exit_code == 1 and "regression over 10%: nvtx:" in res.output, command
            assert "GPU idle +47.0 ms" in res.output and "category:communication +" not in res.output, command
        else:
            assert res.exit_code == 0, (command, res.output[-2000:])
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "tables" / "nsys_nccl_ranks.csv").is_file()
    assert (tmp_path / "diff.md").is_file() and (tmp_path / "ncu.json").is_file()
    for folder in ("nsys_report", "ncu_report"):  # analyze --nsys / --ncu: the reports, with Nsight tables
        report = (tmp_path / folder / "analysis_report.json").read_text(encoding="utf-8")
        assert '"nsys_busy_device"' in report if folder == "nsys_report" else '"ncu_kernels"' in report
