"""Per-kernel rows across ranks (``kineto.kernel_ranks``) on the real sampled pair, recomputed from gzip+json."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.kineto import analyze_traces

PAIR = ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz")


def test_each_heavy_kernel_on_every_rank(real_fixtures: Any) -> None:
    paths = [Path(real_fixtures / "kineto" / "hta" / n) for n in PAIR]
    rows = analyze_traces(paths, executor="serial", analyses=["kernel_ranks"]).to_rows()["kineto_kernel_ranks"]
    per: dict[tuple[int, str], list[float]] = {}
    for rank, p in enumerate(paths):
        with gzip.open(p, "rt") as fh:
            for e in json.load(fh)["traceEvents"]:
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X":
                    per.setdefault((rank, e["name"]), []).append(e["dur"])
    totals: dict[str, float] = {}
    for (_rank, name), durs in per.items():
        totals[name] = totals.get(name, 0.0) + sum(durs)
    top = sorted(totals, key=lambda n: -totals[n])[:15]
    assert [r["name"] for r in rows][::1] == [n for n in top for rank in (0, 1) if (rank, n) in per]
    for r in rows:
        durs = per[(r["rank"], r["name"])]
        assert (r["count"], r["total_us"]) == (len(durs), pytest.approx(sum(durs)))
        assert r["min_us"] == min(durs) and r["max_us"] == max(durs)
        assert r["std_us"] == pytest.approx(statistics.pstdev(durs))
    first = [r for r in rows if r["name"] == top[0]]
    med = statistics.median(r["total_us"] for r in first)
    assert [r["vs_median"] for r in first] == pytest.approx([r["total_us"] / med for r in first])


def test_one_rank_has_no_rows(real_fixtures: Any) -> None:
    path = Path(real_fixtures / "kineto" / "hta" / PAIR[0])
    assert not analyze_traces(path, executor="serial", analyses=["kernel_ranks"]).tables.get("kernel_ranks")
