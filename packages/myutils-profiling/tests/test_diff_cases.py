"""The shared diff cases of ``../shared/diagnosis/CASES.md``, run through the real commands.

Each case is checked for what a careful engineer concludes (the class of the warning, the
figures a reader must see) and for what must not appear; the figures are recomputed here from
the raw files (gzip + json on the traces, sqlite3 on the exports), never from our output.

- ``diff_a100_v100``: the same workload on a slower, saturated GPU: the diff says the GPU
  differs and leads with the GPU-level change; no "little in common" warning.
- ``diff_unrelated``: two different workloads: the diff warns that they have little in common
  before listing any change.
- ``nsys_diff_h100``: the kernels did not get faster or slower; the after-window holds less
  work and more idle, over different FSDP blocks: the diff leads with the idle change and the
  launch-count change, and says the windows differ; no "little in common" warning.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

HTA = "kineto/hta"
CONTROL, TEST = f"{HTA}/trace_diff__control.json.gz", f"{HTA}/trace_diff__test.json.gz"
SAMPLED, REAL54 = f"{HTA}/trace_filter__sampled_rank-0.json.gz", f"{HTA}/df_index_resolver.json.gz"
BEFORE, AFTER = "nsys/nsysai__mfu_2gpu_before.sqlite", "nsys/nsysai__mfu_2gpu_after.sqlite"


def _run(args: list[str], out: Path) -> tuple[Any, dict[str, Any]]:
    res = CliRunner().invoke(app, [*args, "--output", str(out / "d.json"), "--markdown", str(out / "d.md"),
                                   "--html", str(out / "d.html")])
    assert res.exit_code == 0, res.output
    return res, json.loads((out / "d.json").read_text())


def _views(out: Path, res: Any, data: dict[str, Any]) -> dict[str, str]:
    """The headline as each view shows it: terminal (first line), JSON, Markdown, HTML."""
    md = html.unescape((out / "d.md").read_text().replace("\\", ""))  # Markdown escapes undone
    page = html.unescape((out / "d.html").read_text())
    return {"terminal": res.stdout.splitlines()[0], "json": data["headline"], "markdown": md, "html": page}


def _host_time_shared(base: Path, target: Path) -> float:
    """Share of the base's cpu_op + user_annotation time (per name) in names the target also has."""
    def names(path: Path) -> dict[tuple[str, str], float]:
        with gzip.open(path, "rt") as fh:
            out: dict[tuple[str, str], float] = {}
            for e in json.load(fh)["traceEvents"]:
                if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation") \
                        and not str(e.get("name")).startswith("ProfilerStep#"):
                    key = (e["cat"], e["name"])
                    out[key] = out.get(key, 0.0) + e.get("dur", 0)
            return out

    a, b = names(base), names(target)
    return sum(v for k, v in a.items() if k in b) / sum(a.values())


def test_diff_a100_v100(real_fixtures: Any, tmp_path: Path) -> None:
    res, data = _run(["diff", "--base-trace", str(real_fixtures / CONTROL), "--target-trace",
                      str(real_fixtures / TEST)], tmp_path)
    shared = _host_time_shared(real_fixtures / CONTROL, real_fixtures / TEST)
    assert shared > 0.9
    assert not data["similarity"]["little_in_common"] and data["similarity"]["base_time_shared"] == \
        pytest.approx(shared, abs=0.02)
    assert not any("little in common" in w for w in data["warnings"])  # forbidden: it is the same workload
    assert "'NVIDIA A100-PG509-200' vs 'Tesla V100-SXM2-16GB'" in data["warnings"][0]
    rows = {r["key"]: r for r in data["gpu"]["rows"]}
    assert (round(rows["busy"]["base_share_pct"], 1), round(rows["busy"]["target_share_pct"], 1)) == (83.6, 96.3)
    for name, view in _views(tmp_path, res, data).items():
        assert "Not like for like (different GPU: NVIDIA A100-PG509-200 → Tesla V100-SXM2-16GB; world size 8 → 2)" \
            in view, name
        assert "Step time +46.6 ms/step (77.5 → 124.1 ms, +60.1%, 6 and 6 steps): +44.3 ms compute (GPU 84% → 96% " \
               "busy)" in view, name


def test_diff_unrelated(real_fixtures: Any, tmp_path: Path) -> None:
    res, data = _run(["diff", "--base-trace", str(real_fixtures / SAMPLED), "--target-trace",
                      str(real_fixtures / REAL54)], tmp_path)
    shared = _host_time_shared(real_fixtures / SAMPLED, real_fixtures / REAL54)
    assert shared < 0.5
    sim = data["similarity"]
    assert sim["little_in_common"] and sim["base_time_shared"] == pytest.approx(shared, abs=0.02)
    little = [w for w in data["warnings"] if w.startswith("the workloads have little in common")]
    assert little and "none of them is a regression or a speed-up" in little[0]
    assert "world_size: 128 vs 2" in data["warnings"][0]
    # the base has no GPU model: its kernel names (cutlass_80 …) say Ampere, the target ran on a V100
    assert any(w.startswith("GPU unknown on the base side, but its kernel names are built for Ampere")
               and "the GPUs differ" in w for w in data["warnings"])
    views = _views(tmp_path, res, data)
    for name, view in views.items():
        head = re.search(r"Not like for like \(([^)]*)\)", view)
        assert head is not None and "little in common" in head.group(1), name
    # the warning comes before any listed change, on every page
    md = views["markdown"]
    assert md.index("little in common") < md.index("| name |")
    page = views["html"]
    assert page.index("little in common") < page.index('id="changes"')
    assert "top kernel change" not in data["headline"]  # no per-kernel story between different programs


def _nsys_raw(path: Path) -> dict[str, float]:
    """GPU busy and span summed over devices (kernels, copies, sets), and flash_fwd_kernel's launches and mean (ms)."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ops: dict[int, list[tuple[int, int]]] = {}
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if table in tables:
                for dev, s, e in conn.execute(f"SELECT deviceId, start, end FROM {table}"):
                    ops.setdefault(dev, []).append((s, e))
        busy = span = 0.0
        for iv in ops.values():
            iv.sort()
            span += iv[-1][1] - iv[0][0]
            reach = None
            start = 0
            for s, e in iv:
                if reach is None or s > reach:
                    if reach is not None:
                        busy += reach - start
                    start, reach = s, e
                else:
                    reach = max(reach, e)
            busy += (reach or 0) - start
        n, mean = conn.execute("SELECT COUNT(*), AVG(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                               "JOIN StringIds s ON s.id = k.shortName WHERE s.value = 'flash_fwd_kernel'").fetchone()
        blocks = sorted({int(m) for (t,) in conn.execute(
            "SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId")
            for m in re.findall(r"blocks\.(\d+)\.", t or "")})
    finally:
        conn.close()
    return {"busy": busy / 1e6, "span": span / 1e6, "flash_n": n, "flash_ms": mean / 1e6, "first": blocks[0],
            "last": blocks[-1]}


def test_nsys_diff_h100(real_fixtures: Any, tmp_path: Path) -> None:
    res, data = _run(["nsys", "diff", str(real_fixtures / BEFORE), str(real_fixtures / AFTER)], tmp_path)
    a, b = _nsys_raw(real_fixtures / BEFORE), _nsys_raw(real_fixtures / AFTER)
    rows = {r["key"]: r for r in data["gpu"]["rows"]}
    assert rows["busy"]["base"] == pytest.approx(a["busy"], abs=1e-6)
    assert rows["busy"]["target"] == pytest.approx(b["busy"], abs=1e-6)
    assert rows["idle"]["base"] == pytest.approx(a["span"] - a["busy"], abs=1e-6)
    assert rows["idle"]["target"] == pytest.approx(b["span"] - b["busy"], abs=1e-6)
    idle = (f"GPU idle +{b['span'] - b['busy'] - a['span'] + a['busy']:.1f} ms ({a['span'] - a['busy']:.1f} → "
            f"{b['span'] - b['busy']:.1f} ms, {100 * (1 - a['busy'] / a['span']):.1f}% → "
            f"{100 * (1 - b['busy'] / b['span']):.1f}% of the GPU span over 2 GPUs)")
    assert idle == "GPU idle +47.0 ms (57.4 → 104.4 ms, 9.6% → 17.4% of the GPU span over 2 GPUs)"
    flash = (f"flash_fwd_kernel<…> {a['flash_ms']:.3f} → {b['flash_ms']:.3f} ms per launch (unchanged), "
             f"{a['flash_n']} → {b['flash_n']} launches")
    assert flash == "flash_fwd_kernel<…> 4.005 → 4.013 ms per launch (unchanged), 68 → 60 launches"
    window = f"different capture windows: blocks {a['first']}–{a['last']} vs {b['first']}–{b['last']}"
    assert window == "different capture windows: blocks 2–19 vs 8–23"
    for name, view in _views(tmp_path, res, data).items():
        head = view[view.index("Not like for like"):] if name in ("markdown", "html") else view
        assert head.startswith(f"Not like for like ({window}). {idle}"), name  # the idle change leads
        assert flash in head, name
    assert not any("little in common" in w for w in data["warnings"])  # forbidden: the same job
    assert data["similarity"]["shared_names"] == data["similarity"]["base_names"]  # every name is shared
    # the numbered ranges are one family, not added and removed ranges
    statuses = {c["name"]: c["status"] for c in data["changes"]}
    assert not [n for n, s in statuses.items() if "blocks." in n and s in ("added", "removed")]
    assert statuses["nvtx:FSDP::pre_forward (blocks.#._checkpoint_wrapped_module)"] in ("changed", "unchanged")
