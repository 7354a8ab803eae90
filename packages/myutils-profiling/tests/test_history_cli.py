"""``myutils-profile history`` and ``analyze --record``: what each command prints, writes and exits with.

The gate's promise is checked literally: exit 2 with exactly one Markdown line (rendered with
markdown-it-py: one paragraph, no heading, no HTML) on a regression, 0 on a pass, 3 when it cannot
judge (too few runs, bad input, a wrong option). ``--help`` imports neither SQLAlchemy nor plotly.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from history_support import make_report
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.history.context import RunContext
from my_utils.profiling.history.store import RunStore

EXAMPLE_TRACE = (Path(__file__).resolve().parents[1] / "src/my_utils/profiling/examples/data/cpu_trace_rank_0.json.gz")
SLOW_AT = 60  # the planted +8% starts at this run (index), commit c0060


def _run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A SQLite store of 100 runs of one series: step time 100 ms (2% noise), +8% from run 61 on."""
    rng = np.random.default_rng(11)
    items = []
    for i in range(100):
        level = 100.0 * (1.08 if i >= SLOW_AT else 1.0)
        r = make_report(values={"step_time.median": level * (1 + rng.normal(0, 0.02)),
                                "gpu.idle": 10 + rng.normal(0, 0.3)}, tag=i)
        items.append((r, RunContext("pretrain", 1.7e9 + 3600 * i, git_commit=f"c{i:04d}", git_branch="main",
                                    gpu_model="NVIDIA H100 80GB HBM3", gpu_count=8, world_size=16), None))
    path = tmp_path / "h.sqlite"
    with RunStore(path) as store:
        store.add_many(items)
    return path


def test_trend_names_the_first_run_after_the_change_and_writes_the_page(history: Path, tmp_path: Path) -> None:
    code, out, err = _run("history", "trend", "step_time.median", "--store", str(history), "--output",
                          str(tmp_path / "t.html"))
    assert code == 0, err
    assert "1 change point(s)" in out
    assert f"from run {SLOW_AT + 1}, commit c{SLOW_AT:04d}" in out and "(worse)" in out
    page = (tmp_path / "t.html").read_text()
    assert "plotly" in page.lower() and "step_time.median" in page


def test_trend_of_an_unknown_metric_is_bad_input(history: Path, tmp_path: Path) -> None:
    code, _, err = _run("history", "trend", "no.such", "--store", str(history), "--output", str(tmp_path / "t.html"))
    assert code == 2 and "stored metrics: gpu.idle, step_time.median" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.html").exists()


def _one_markdown_line(text: str) -> str:
    from markdown_it import MarkdownIt

    lines = text.splitlines()
    assert len(lines) == 1, text
    tokens = [t.type for t in MarkdownIt().parse(lines[0])]
    assert tokens == ["paragraph_open", "inline", "paragraph_close"]
    return lines[0]


def test_gate_fails_a_slow_run_with_one_markdown_line(history: Path) -> None:
    code, out, err = _run("history", "gate", "--store", str(history), "--run", str(SLOW_AT + 1))
    assert code == 2 and err == ""
    line = _one_markdown_line(out)
    assert line.startswith("**Regression** in step\\_time.median: +")
    assert "p = " in line and "the median of the last 30 comparable run(s)" in line and "commit c0060" in line


def test_gate_passes_the_newest_run(history: Path) -> None:
    code, out, _ = _run("history", "gate", "--store", str(history))
    assert code == 0
    assert [line.split(":")[0] for line in out.splitlines()] == ["passed", "passed"]
    code, out, _ = _run("history", "gate", "--store", str(history), "--last", "60")  # the change is in these
    # the judged run is the 100th: 39 runs before it are at the new level
    assert code == 0 and "the median of the last 39 comparable run(s) since their last change point" in out


def test_gate_without_enough_history_or_with_bad_input_exits_3(history: Path, tmp_path: Path) -> None:
    code, out, err = _run("history", "gate", "--store", str(history), "--run", "3")
    assert code == 3 and out == "" and "the gate needs 5" in err
    assert _run("history", "gate", "--store", str(history), "--run", "999")[0] == 3
    assert _run("history", "gate", "--store", str(history), str(tmp_path / "missing.json"))[0] == 3
    assert _run("history", "gate", "--store", str(history), "--no-such-option")[0] == 3
    assert _run("history", "gate", "--store", str(history), "--max-p", "2")[0] == 3


def test_gate_judges_a_report_not_stored_yet(history: Path, tmp_path: Path) -> None:
    slow = make_report(values={"step_time.median": 130.0, "gpu.idle": 10.0}, tag="new")
    path = slow.write(tmp_path / "new")
    code, out, _ = _run("history", "gate", str(path), "--store", str(history), "--commit", "feed")
    assert code == 2
    assert "report " in _one_markdown_line(out) and "commit feed" in out


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analysis of a real torch.profiler trace (a CPU run), written by the real command."""
    out = tmp_path_factory.mktemp("analysed")
    code, _, err = _run("analyze", "--trace", str(EXAMPLE_TRACE), "--output-dir", str(out), "--formats", "json", "-q")
    assert code == 0, err
    return out / "analysis_report.json"


def test_add_twice_keeps_one_run_and_show_lists_its_facts(real_report: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYUTILS_HISTORY_STORE", str(tmp_path / "s.sqlite"))
    monkeypatch.setenv("MYUTILS_GIT_COMMIT", "0123456789abcdef")
    code, out, err = _run("history", "add", str(real_report))
    assert code == 0, err and out.startswith("added run 1: ")
    assert _run("history", "add", str(real_report.parent))[1].startswith("already stored as run 1")
    report = json.loads(real_report.read_text())
    expected = {f["id"]: f["value"] for f in report["facts"] if isinstance(f.get("value"), (int, float))
                and ":rank" not in f["id"] and not f["id"].startswith("context.")}
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        stored = dict(conn.execute("SELECT m.name, f.value FROM facts f JOIN metrics m ON m.id = f.metric_id "
                                   "WHERE m.name NOT LIKE 'op.%'").fetchall())
        runs = conn.execute("SELECT COUNT(*), MIN(hardware), MIN(git_commit) FROM runs").fetchone()
    conn.close()
    assert stored == pytest.approx(expected) and expected
    assert runs == (1, "CPU only", "0123456789abcdef")  # the trace holds no GPU work: a CPU-only run
    code, out, _ = _run("history", "show", "1")
    assert code == 0 and "commit:       0123456789abcdef" in out and "step_time.median" in out
    code, out, _ = _run("history", "list")
    assert code == 0 and out.splitlines()[1].split()[0] == "1"


def test_add_reads_every_report_before_storing_any(real_report: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": "1.2", "workload": 3}')
    code, out, err = _run("history", "add", str(real_report), str(bad), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and out == "" and "bad.json:workload" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was even opened


def test_analyze_record_stores_the_report_it_wrote(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    args = ["analyze", "--trace", str(EXAMPLE_TRACE), "--output-dir", str(tmp_path / "out"), "--formats", "json",
            "-q", "--record", "--store", str(store)]
    code, out, err = _run(*args)
    assert code == 0, err
    assert out.splitlines()[-1].startswith("added run 1: pretrain on CPU only")
    # the same trace analysed again gives the same report: the same run, not a second one
    assert _run(*args)[1].splitlines()[-1].startswith("already stored as run 1: ")


@pytest.mark.parametrize("args", [("history", "--help"), ("history", "gate", "--help"), ("--help",)])
def test_help_stays_light(args: tuple[str, ...]) -> None:
    code = "import sys; from my_utils.profiling.cli import main; sys.argv[1:] = " + repr(list(args)) + "; main()"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "typer" in names  # the import log was read
    assert not names & {"sqlalchemy", "alembic", "psycopg", "plotly", "numpy", "pandas"}
