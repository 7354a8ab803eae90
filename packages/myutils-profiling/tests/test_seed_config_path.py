"""The seed's ``myutils-profile ingest --config ./my_utils/profiling/examples/collector_config_example.json --analyze``.

The seed ran it from its repository root, where the example then lived; it ships inside
myutils-profiling now. The command runs as written (the seed's path, or the bare file name,
reads the shipped example and says so on stderr); any other missing path is refused in one
line that lists the names the examples can be given by, and writes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.profiling.examples import example_config_path

SEED_PATH = "./my_utils/profiling/examples/collector_config_example.json"


def _ingest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    main = "import sys; from my_utils.profiling.cli import main; sys.argv[0] = 'myutils-profile'; main()"
    return subprocess.run([sys.executable, "-c", main, "ingest", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_repository_root_has_no_seed_folder(repo_root: Path) -> None:
    """From the root the seed's relative path does not exist, exactly as in the scratch folders below."""
    assert not (repo_root / SEED_PATH).exists()


@pytest.mark.parametrize("given", [SEED_PATH, "collector_config_example.json",
                                   "my_utils/profiling/examples/collector_config_example.json"])
def test_seed_command_reads_the_shipped_example(tmp_path: Path, given: str) -> None:
    out = _ingest(tmp_path, "--config", given, "--analyze", "--quiet")
    assert out.returncode == 0, out.stderr
    assert f"note: reading the example shipped with myutils-profiling: {example_config_path()}" in out.stderr
    report = json.loads((tmp_path / "metrics_out" / "analysis_report.json").read_text())
    assert report["workload"] == "pretrain"
    assert (tmp_path / "metrics_out" / "metrics_events.jsonl").stat().st_size > 0


def test_a_local_file_of_the_same_name_wins(tmp_path: Path) -> None:
    config = json.loads(example_config_path().read_text())
    config["providers"] = [{"provider": "mytimer", "input": str(example_config_path().parent / "data"
                                                                / "profile_rank_0.csv")}]
    config["output_dir"] = "./mine"
    (tmp_path / "collector_config_example.json").write_text(json.dumps(config))
    out = _ingest(tmp_path, "--config", "collector_config_example.json", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "note:" not in out.stderr
    assert (tmp_path / "mine" / "metrics_events.jsonl").is_file() and not (tmp_path / "metrics_out").exists()


@pytest.mark.parametrize("given", ["configs/collector_config_example.json", "nope.json"])
def test_other_missing_paths_name_the_shipped_examples(tmp_path: Path, given: str) -> None:
    out = _ingest(tmp_path, "--config", given, "--analyze")
    assert out.returncode == 2
    assert out.stderr.strip() == (f"error: {given}: an existing config file (no such file); the examples shipped "
                                  "with myutils-profiling can be given by name: collector_config_example.json")
    assert list(tmp_path.iterdir()) == []
