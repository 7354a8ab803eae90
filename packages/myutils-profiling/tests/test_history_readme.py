"""The README's run-history commands run as written, in a scratch folder, in order.

``nightly/`` holds 12 reports of one series on 8x H100 (as ``history add`` finds them); ``traces/`` the real CPU
trace shipped with the package. Each line of the README's block runs through bash with
``myutils-profile`` standing for this interpreter's CLI; every command must exit 0 (the gate too:
the newest H100 run is within the noise of the 11 before it).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from history_support import make_report

PACKAGE = Path(__file__).resolve().parents[1]
README = PACKAGE / "README.md"
TRACE = PACKAGE / "src/my_utils/profiling/examples/data/cpu_trace_rank_0.json.gz"
CLI = f"{shlex.quote(sys.executable)} -c 'from my_utils.profiling.cli import main; main()'"


def _block() -> list[str]:
    section = README.read_text(encoding="utf-8").split("## Run history (`history`)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


def test_readme_history_commands_run(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    shutil.copy(TRACE, tmp_path / "traces")
    for i in range(12):
        report = make_report("pretrain", {"step_time.median": 100.0 + (i % 3) * 0.5}, tag=i)  # 8x H100
        (tmp_path / "nightly" / f"night{i:02d}").mkdir(parents=True)
        path = report.write(tmp_path / "nightly" / f"night{i:02d}")
        os.utime(path, (1.7e9 + 86400 * i, 1.7e9 + 86400 * i))
    lines = _block()
    assert lines[0].startswith("export MYUTILS_HISTORY_STORE=") and any(" --record" in line for line in lines)
    script = "set -e\n" + "\n".join(line.replace("myutils-profile", CLI, 1) for line in lines)
    env = {**os.environ, "MYUTILS_GIT_COMMIT": "0123abc"}
    env.pop("MYUTILS_HISTORY_STORE", None)
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "added run 1: pretrain on 8x NVIDIA H100 80GB HBM3 (world size 16)" in out  # the oldest nightly first
    assert "added run 13: pretrain on CPU only" in out  # the analysed trace: its own series
    assert "already stored as run 13" in out
    assert (tmp_path / "trend.html").is_file() and (tmp_path / "history.html").is_file()
    assert (tmp_path / "history.sqlite").is_file()
