"""One-off mechanical move of issue 37 (layered profiling package): git mv, then rewrite module paths.

Kept for the record and for rebasing branches opened before the move: ``python .ci/layers_move.py
--rewrite-only PATH...`` rewrites the old module paths in the given files (a branch's own files).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "packages/myutils-profiling/src"
PKG = "my_utils/profiling"

# old path (under my_utils/profiling, without .py) -> new path
MOVES: dict[str, str] = {}
for m in ["_files", "_text", "_values", "batches", "cprofile", "dask_run", "dcgm", "module_profiler", "mytimer",
          "nccl_inspector", "nccl_log", "parallel", "perf_stat", "rank_files", "table_csv"]:
    MOVES[f"providers/{m}"] = f"formats/{m}"
MOVES["nsys/ranks"] = "formats/ranks"
MOVES.update({
    "providers/kineto": "kineto/read/provider",
    "providers/kineto_context": "kineto/read/context",
    "providers/kineto_nesting": "kineto/read/nesting",
    "providers/torch_live": "kineto/read/live",
    "providers/trace_scan": "kineto/read/scan",
    "providers/trace_stream": "kineto/read/stream",
    "providers/trace_aggregate": "kineto/read/aggregate",
    "providers/trace_events": "kineto/read/events",
    "providers/_trace_schema": "kineto/read/_schema",
    "providers/_kineto_scan": "kineto/read/_kineto_scan",
    "analysis/kineto/peaks": "hardware/peaks",
    "analysis/kineto": "kineto",
    "analysis/ops": "kineto/ops",
    "providers/nsys": "nsys/provider",
    "nsys/facts": "model/tool_facts",
    "nsys/diff": "analysis/diff_nsys",
    "providers/ncu": "ncu/provider",
    "ncu/diff": "analysis/diff_ncu",
    "providers/nccl_ras": "nccl/ras_provider",
    "analysis/model": "model/report",
    "analysis/scores": "model/scores",
    "analysis/rank_coverage": "model/rank_coverage",
    "analysis/nsight": "analysis/nsight/analyze",
    "analysis/nsight_advice": "analysis/nsight/advice",
    "analysis/nsight_comm_rules": "analysis/nsight/comm_rules",
    "analysis/nsight_facts": "analysis/nsight/facts",
    "analysis/nsight_rule_base": "analysis/nsight/rule_base",
    "analysis/nsight_rules": "analysis/nsight/rules",
    "analysis/nsight_setup": "analysis/nsight/setup",
    "analysis/ncu_rules": "analysis/nsight/ncu_rules",
    "cli/analyze_nsight": "run/nsight",
})


def dotted(p: str) -> str:
    return "my_utils.profiling." + p.replace("/", ".")


def replacements() -> list[tuple[re.Pattern[str], object]]:
    """Two one-pass regexes (each place is rewritten once, longest old path first): dotted module paths,
    and file paths (with or without the src prefix)."""
    olds = sorted(MOVES, key=len, reverse=True)
    by_dotted = {dotted(o): dotted(MOVES[o]) for o in olds}
    dot = re.compile("(" + "|".join(re.escape(dotted(o)) for o in olds) + r")(?![A-Za-z0-9_])")
    paths: dict[str, str] = {}
    for o in olds:
        for suffix in ((".c",) if o == "providers/_kineto_scan" else (".py", "/")):
            paths[o + suffix] = MOVES[o] + suffix
    path = re.compile(r"(?<![A-Za-z0-9_])((?:[A-Za-z0-9_.-]+/)*my_utils/profiling/|profiling/)?("
                      + "|".join(re.escape(k) for k in sorted(paths, key=len, reverse=True)) + ")")
    return [(dot, lambda mt: by_dotted[mt.group(1)]),
            (path, lambda mt: (mt.group(1) or "") + paths[mt.group(2)])]


# `from my_utils.profiling.providers import trace_events` (a submodule imported from its package)
FROM_PKG = re.compile(r"from (my_utils\.profiling(?:\.[a-z_]+)*) import ([A-Za-z_][A-Za-z0-9_]*)( as [A-Za-z_]\w*)?")


def rewrite_text(text: str, subs: list[tuple[re.Pattern[str], str]]) -> str:
    def from_pkg(mt: re.Match[str]) -> str:
        pkg, name, alias = mt.group(1), mt.group(2), mt.group(3)
        old = (pkg[len("my_utils.profiling."):].replace(".", "/") + "/" + name) if pkg != "my_utils.profiling" else name
        if old in MOVES:
            new = MOVES[old]
            parent, _, base = new.rpartition("/")
            return f"from {dotted(parent) if parent else 'my_utils.profiling'} import {base}{alias or (f' as {name}' if base != name else '')}"
        return mt.group(0)
    text = FROM_PKG.sub(from_pkg, text)
    for pat, rep in subs:
        text = pat.sub(rep, text)
    return text


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    keep = (".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".sh", ".j2", ".ipynb", ".c", ".json",
            ".html", ".js", ".env", "")
    return [ROOT / f for f in out if f.endswith(keep) and not f.startswith("shared/") and (ROOT / f).is_file()]


def main() -> int:
    subs = replacements()
    if sys.argv[1:2] == ["--rewrite-only"]:
        files = [Path(p) for p in sys.argv[2:]] or tracked_text_files()
    else:
        base = SRC / PKG
        for old, new in MOVES.items():
            src = base / old
            srcs = [src] if src.is_dir() else [p for p in (src.with_suffix(".py"), src.with_suffix(".c")) if p.exists()]
            for s in srcs:
                d = base / (new + s.suffix if s.is_file() else new)
                d.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["git", "mv", str(s), str(d)], cwd=ROOT, check=True)
        files = tracked_text_files()
    changed = 0
    for f in files:
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite_text(text, subs)
        if new != text:
            f.write_text(new)
            changed += 1
    print(f"{changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
