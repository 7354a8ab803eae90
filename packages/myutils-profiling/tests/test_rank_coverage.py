"""Missing ranks: the 2 sampled ranks of HTA's 128-rank job, nsys exports ranked by the launch environment they
recorded (PMI_RANK on the NCCL ring: the file ``…739537`` is rank 5, third of its host by name), and the ranges."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import nsys_real

from my_utils.profiling.formats.ranks import expand_inputs, launch_environment
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.model.rank_coverage import ranges, rank_coverage
from my_utils.profiling.nsys.run import analyze_run

PAIR = ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz")


def test_the_sampled_pair_says_which_ranks_are_missing(real_fixtures: Any) -> None:
    """Before: ``warnings []``. The traces declare world size 128 (distributedInfo); ranks 0 and 1 are read."""
    paths = [Path(real_fixtures / "kineto" / "hta" / n) for n in PAIR]
    worlds = set()
    for p in paths:
        with gzip.open(p, "rt") as fh:
            worlds.add(json.load(fh)["distributedInfo"]["world_size"])
    assert worlds == {128}
    warnings = analyze_traces(paths, executor="serial", analyses=[]).warnings
    (text,) = [w for w in warnings if "ranks analysed" in w]
    assert text.startswith("2 of 128 ranks analysed (traces of 0-1;")
    assert "126 missing (2-127)" in text and "distributedInfo.world_size" in text
    assert "stragglers" in text and "cannot be named" in text


def test_a_complete_world_says_nothing(real_fixtures: Any, tmp_path: Path) -> None:
    """A trace whose world is itself (rank 1 of 2 here, with its partner absent) is warned; a world of one is not."""
    one = Path(real_fixtures / "kineto" / "hta/cpu_only__rank-34.pt.trace.json.gz")
    with gzip.open(one, "rt") as fh:
        data = json.load(fh)
    data["distributedInfo"].update(rank=0, world_size=1)
    solo = tmp_path / "rank0.json"
    solo.write_text(json.dumps(data))
    assert not [w for w in analyze_traces(solo, executor="serial", analyses=[]).warnings if "ranks analysed" in w]
    cov = rank_coverage([0, 1, 2], [3, 3, 3], "x")
    assert cov is not None and cov.complete and cov.warning() is None
    assert rank_coverage([0, 1], [None, None], "x") is None  # no declared world: nothing claimed


def test_ranges() -> None:
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert ranges([]) == "none"
    assert ranges(list(range(0, 40, 2)), limit=3) == "0, 2, 4 and 17 more range(s)"


def test_nsys_ranks_come_from_the_launch_environment(real_fixtures: Any) -> None:
    """Each ring export recorded its PMI_RANK/PMI_SIZE (META_DATA_CAPTURE, read here with sqlite3); file order would
    number ``…739537`` 3, the environment says 5."""
    paths = [nsys_real.export_path(real_fixtures, k) for k in nsys_real.RING]
    want = {}
    for p in paths:
        env = dict(v.split("=", 1) for (v,) in nsys_real.raw(
            p, "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'"))
        want[p.name] = (int(env["PMI_RANK"].strip('"')), int(env["PMI_SIZE"].strip('"')))
    got = {i.path.name: (i.rank, i.world_size) for i in expand_inputs(paths)}
    assert got == want
    assert sorted(p.name for p in paths).index("ault44.cscs.ch_739537.sqlite") == 3 and got[
        "ault44.cscs.ch_739537.sqlite"][0] == 5
    assert {i.rank_source for i in expand_inputs(paths)} == {"environment PMI_RANK"}
    assert launch_environment(paths[0])["SLURM_PROCID"] == str(want[paths[0].name][0])


def test_nsys_missing_ranks_are_warned(real_fixtures: Any) -> None:
    paths = [nsys_real.export_path(real_fixtures, k) for k in nsys_real.RING[:2]]
    run = analyze_run(paths)
    (text,) = run.warnings
    assert text.startswith("2 of 6 ranks analysed (exports of 0-1;") and "4 missing (2-5)" in text
    assert "PMI_SIZE" in text
    assert not analyze_run([nsys_real.export_path(real_fixtures, k) for k in nsys_real.RING]).warnings


def test_without_an_environment_the_file_order_stays(real_fixtures: Any, tmp_path: Path) -> None:
    """The Extra-P exports recorded no launcher variable: ranked by file order, as before, and said so."""
    a = tmp_path / "a.sqlite"
    b = tmp_path / "b.sqlite"
    shutil.copy(real_fixtures / "nsys/extrap__con_kernel.sqlite", a)
    shutil.copy(real_fixtures / "nsys/extrap__concurrent_s1_profile1.sqlite", b)
    got = [(i.path.name, i.rank, i.rank_source, i.world_size) for i in expand_inputs([tmp_path])]
    assert got == [("a.sqlite", 0, "file order", None), ("b.sqlite", 1, "file order", None)]


def test_the_report_carries_the_warning(real_fixtures: Any) -> None:
    """In the analysis report: ``summary["warnings"]`` holds it with code ``ranks_missing``, for traces and exports."""
    from my_utils.profiling.analysis.analyzer import MetricsAnalyzer
    from my_utils.profiling.analysis.nsight.analyze import NsightInputs

    paths = [Path(real_fixtures / "kineto" / "hta" / n) for n in PAIR]
    kineto = analyze_traces(paths, executor="serial", analyses=[])
    report = MetricsAnalyzer([], kineto=kineto, rules=[]).analyze()
    assert [w["code"] for w in report.summary["warnings"] if "128 ranks" in w["message"]] == ["ranks_missing"]
    exports = [nsys_real.export_path(real_fixtures, k) for k in nsys_real.RING[4:]]
    report = MetricsAnalyzer([], nsight=NsightInputs(nsys=tuple(exports)), rules=[]).analyze()
    assert [w["code"] for w in report.summary["warnings"] if "of 6 ranks" in w["message"]] == ["ranks_missing"]
