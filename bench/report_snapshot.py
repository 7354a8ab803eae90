"""Every JSON and Markdown report the CLI writes for the shared real inputs, normalised for comparison.

Written for a refactor that must not change behaviour (issue 37's layered profiling package): run it
before the change into one folder and after it into another, then compare the two folders byte for
byte (``diff -r BEFORE AFTER``). It runs ``myutils-profile`` over every file the fixture registry
(``fixtures/registry.toml``) names, one command per file and kind (``analyze``, ``nsys summary``,
``ncu summary``, ``ops``), plus the multi-file commands (``analyze`` of the six-rank nsys folder and
of the NCCL logs, ``diff`` of two traces and of two reports, ``nsys diff``, ``ncu diff``, ``trace``).

What is kept, per command: the exit code, stdout and stderr, and every ``.json``/``.md``/``.csv``
file it wrote. What is normalised away, because it changes between two runs of the same code: the
paths of the inputs and outputs (replaced by ``<REAL>`` and ``<OUT>``), JSON fields that hold the
time of the command (``generated_at``, ``elapsed*``, ``wall*``, ``created*``, ``started*``) and the
progress lines of stderr. Nothing else is touched, so any other difference is a change of behaviour.

Usage: ``python bench/report_snapshot.py OUTDIR [--jobs N] [--only SUBSTRING]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fixtures import _registry

VOLATILE_KEY = re.compile(r"^(generated_at|generated|created(_at)?|started(_at)?|elapsed.*|wall.*|now|"
                          r"analysis_seconds|duration_s|took_s|timestamp_utc)$")
KEPT_SUFFIXES = (".json", ".md", ".csv", ".txt")


def _cli() -> str:
    exe = Path(sys.executable).with_name("myutils-profile")
    if not exe.is_file():
        raise SystemExit(f"{exe} is missing: run this with the venv's python (pip install -e the packages)")
    return str(exe)


def _jobs(real: Path) -> list[tuple[str, list[str]]]:
    """(job name, argv after the command) for every shared input; <OUT> is each job's output folder."""
    reg = _registry()
    names = reg.names() if reg is not None else sorted(
        str(p.relative_to(real)) for p in real.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    paths = {n: (reg.fetch(n) if reg is not None else real / n) for n in names}
    jobs: list[tuple[str, list[str]]] = []
    for name, path in paths.items():
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
        jobs.append((f"analyze__{slug}", ["analyze", str(path), "--output-dir", "<OUT>", "--formats", "json,markdown",
                                           "--quiet", "--no-headline"]))
        if name.endswith(".sqlite"):
            jobs.append((f"nsys_summary__{slug}", ["nsys", "summary", str(path), "--json", "<OUT>/summary.json"]))
        if name.startswith("ncu/"):
            jobs.append((f"ncu_summary__{slug}", ["ncu", "summary", str(path), "--json", "<OUT>/summary.json"]))
        if name.startswith("kineto/") and name.endswith((".json", ".json.gz")):
            jobs.append((f"ops__{slug}", ["ops", str(path), "--output-dir", "<OUT>", "--no-xlsx",
                                          "--executor", "serial"]))
    ring = paths["nsys/dsl_ring_6ranks/ault43.cscs.ch_485050.sqlite"].parent
    hta = "kineto/hta/"
    jobs += [
        ("analyze__nsys_ring_folder", ["analyze", str(ring), "--output-dir", "<OUT>", "--formats", "json,markdown",
                                       "--quiet", "--no-headline"]),
        ("nsys_summary__ring_folder", ["nsys", "summary", str(ring), "--json", "<OUT>/summary.json"]),
        ("analyze__nccl_logs", ["analyze", str(paths["nccl/dsl__example_2.502726.o.nccl2.22.3.log"]),
                                str(paths["nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log"]),
                                "--output-dir", "<OUT>", "--formats", "json,markdown", "--quiet", "--no-headline"]),
        ("analyze__two_ranks", ["analyze", str(paths[hta + "trace_filter__sampled_rank-0.json.gz"]),
                                str(paths[hta + "trace_filter__sampled_rank-1.json.gz"]), "--output-dir", "<OUT>",
                                "--formats", "json,markdown", "--quiet", "--no-headline"]),
        ("diff__traces", ["diff", "--base-trace", str(paths[hta + "trace_diff__control.json.gz"]),
                          "--target-trace", str(paths[hta + "trace_diff__test.json.gz"]),
                          "--output", "<OUT>/diff.json", "--markdown", "<OUT>/diff.md"]),
        ("diff__traces_operations", ["diff", "--base-trace", str(paths[hta + "trace_diff__control.json.gz"]),
                                     "--target-trace", str(paths[hta + "trace_diff__test.json.gz"]), "--operations",
                                     "--output", "<OUT>/diff.json", "--markdown", "<OUT>/diff.md"]),
        ("nsys_diff__mfu", ["nsys", "diff", str(paths["nsys/nsysai__mfu_2gpu_before.sqlite"]),
                            str(paths["nsys/nsysai__mfu_2gpu_after.sqlite"]), "--output", "<OUT>/diff.json",
                            "--markdown", "<OUT>/diff.md"]),
        ("ncu_diff__ai4mat", ["ncu", "diff", "--base", str(paths["ncu/ai4mat__gcn_paddle_ncu_metrics_show.csv.txt"]),
                              "--target", str(paths["ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"]),
                              "--output", "<OUT>/diff.json"]),
        ("trace__kineto_pair", ["trace", "--torch-trace", str(paths[hta + "trace_filter__sampled_rank-0.json.gz"]),
                                "--torch-trace", str(paths[hta + "trace_filter__sampled_rank-1.json.gz"]),
                                "--output", "<OUT>/merged.json", "--executor", "serial", "--quiet"]),
    ]
    return jobs


def _normalise(obj: Any, subs: list[tuple[str, str]]) -> Any:
    if isinstance(obj, dict):
        return {k: ("<VOLATILE>" if VOLATILE_KEY.match(str(k)) else _normalise(v, subs)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_normalise(v, subs) for v in obj]
    if isinstance(obj, str):
        return _text(obj, subs)
    return obj


def _text(text: str, subs: list[tuple[str, str]]) -> str:
    for old, new in subs:
        text = text.replace(old, new)
    return text


def _run(job: tuple[str, list[str]], out_root: Path, real: Path, cli: str) -> str:
    name, argv = job
    work = Path(tempfile.mkdtemp(prefix="snap-"))
    out = work / "out"
    out.mkdir()
    args = [a.replace("<OUT>", str(out)) for a in argv]
    env = dict(os.environ, MYUTILS_NO_PROGRESS="1", COLUMNS="200", NO_COLOR="1", TERM="dumb")
    proc = subprocess.run([cli, *args], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    subs = [(str(out), "<OUT>"), (str(work), "<WORK>"), (str(real.resolve()), "<REAL>"), (str(real), "<REAL>"),
            (os.path.realpath(tempfile.gettempdir()), "<TMP>")]
    dest = out_root / name
    dest.mkdir(parents=True, exist_ok=True)
    stderr = "\n".join(line for line in proc.stderr.splitlines() if "\r" not in line and "it/s" not in line)
    record = {"argv": [_text(a, subs) for a in args], "rc": proc.returncode, "stdout": _text(proc.stdout, subs),
              "stderr": _text(stderr, subs)}
    (dest / "_command.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    for f in sorted(out.rglob("*")):
        if not f.is_file() or not f.name.endswith(KEPT_SUFFIXES):
            continue
        rel = f.relative_to(out)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = f.read_text(errors="replace")
        if f.suffix == ".json":
            try:
                text = json.dumps(_normalise(json.loads(text), subs), indent=1, sort_keys=True) + "\n"
            except ValueError:
                text = _text(text, subs)
        else:
            text = _text(text, subs)
        target.write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return f"{name}: rc={proc.returncode}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    real = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
    real = Path(os.environ.get("MYUTILS_REAL_FIXTURES", real))
    cli = _cli()
    jobs = [j for j in _jobs(real) if a.only in j[0]]
    a.outdir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for line in pool.map(lambda j: _run(j, a.outdir, real, cli), jobs):
            print(line, flush=True)
    print(f"{len(jobs)} commands; {sum(1 for p in a.outdir.rglob('*') if p.is_file())} files in {a.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
