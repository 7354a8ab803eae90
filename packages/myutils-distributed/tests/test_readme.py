"""Every Python example in the distribution README runs (fresh interpreters; the per-rank one on gloo ranks)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) == 5


def _run(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_socket_example(tmp_path: Path) -> None:
    out = _run(BLOCKS[0], tmp_path)
    assert re.fullmatch(r"offset [+-]\d+\.\d us \+- \d+\.\d us\n", out), out


def test_per_rank_example_on_two_gloo_ranks(tmp_path: Path) -> None:
    from my_utils.core.profile_csv import read_profile_csv
    from my_utils.distributed.clock_record import parse_clock_sync_row
    from my_utils.distributed.testing import run_gloo

    script = tmp_path / "example.py"
    script.write_text(BLOCKS[1])
    results = run_gloo(f"{script}:on_every_rank", 2, kwargs={"log_dir": str(tmp_path / "logs")}, timeout=90)
    assert results[0] == {"offset_s": 0.0, "uncertainty_s": 0.0}
    assert abs(results[1]["offset_s"]) <= results[1]["uncertainty_s"] + 2e-6  # one host: the truth is 0
    for rank in (0, 1):
        [row] = [r for r in read_profile_csv(tmp_path / "logs" / f"profile_rank_{rank}.csv")
                 if r.event_type == "CLOCK_SYNC"]
        record = parse_clock_sync_row(row)
        assert record is not None and record.applied and record.reference_rank == 0
        assert record.offset_s == results[rank]["offset_s"]


@pytest.mark.etcd
def test_etcd_example(tmp_path: Path) -> None:
    if shutil.which("etcd") is None:  # the marker skips it already; this keeps a direct run honest
        pytest.skip("etcd not installed")
    assert _run(BLOCKS[2], tmp_path) == "generation [0, 0, 0]\n[1, 2]\n"


def test_stragglers_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[3], tmp_path) == "[(5, 'forward')]\n1.6 50\n[]\n"


def test_clock_sync_row_documented_as_written() -> None:
    from my_utils.distributed.clock_estimate import ClockEstimate
    from my_utils.distributed.clock_record import clock_sync_metadata

    keys = [item.split("=")[0] for item in clock_sync_metadata(ClockEstimate(0.1, 0.01, 0.02, 1, 1, 0.0), 0, True)
            .split(";")]
    assert "`" + ";".join(f"{k}=<{'0/1' if k == 'applied' else 'r' if k == 'reference_rank' else 's'}>"
                          for k in keys) + "`" in TEXT


def test_rank_timings_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[4], tmp_path) == "b None True\n[('a', -10.1), ('b', 10.1)]\nnot measured\n"
