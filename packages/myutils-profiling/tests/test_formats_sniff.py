"""``formats.sniff``: a file's kind from its content, on every real fixture and on files renamed to mislead.

The expected kinds come from ``fixtures/real/MANIFEST.md`` (what each file is, written when it was
collected); the expected ranks from the file itself, read with gzip + json.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.formats import FileKind, sniff

_DATA = example_config_path().parent / "data"

#: registry path -> the kind MANIFEST.md says the file is
REAL = {
    "cprofile/gprof2dot__print1.pstats": FileKind.CPROFILE,
    "cprofile/gprof2dot__cProfile_py2_legacy.pstats": FileKind.CPROFILE,
    "kineto/hta/trace_filter__sampled_rank-0.json.gz": FileKind.KINETO_TRACE,
    "kineto/hta/trace_filter__sampled_rank-1.json.gz": FileKind.KINETO_TRACE,
    "kineto/hta/call_stack__backward_thread.json": FileKind.KINETO_TRACE,
    "kineto/kineto_repo/resnet50_nw0_worker0.1623143089861.pt.trace.json.gz": FileKind.KINETO_TRACE,
    "nccl/dsl__example_2.502726.o.nccl2.22.3.log": FileKind.NCCL_LOG,
    "nccl/dsl__deepspeed_example.526831.o.nccl2.20.5.log": FileKind.NCCL_LOG,
    "ncu/ai4mat__metrics_713_paddle_.csv": FileKind.NCU_CSV,
    "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt": FileKind.NCU_CSV,
    "ncu/ai4mat__gcn_torch_ncu_metrics_prof.human.txt": FileKind.NCU_CONSOLE,
    "ncu/nsight-training__CuVectorAddDrv.ncu-rep": FileKind.NCU_REP,
    "nsys/ai4mat__torch_gcn_nsys_stats_console.txt": FileKind.NSYS_CONSOLE,
    "nsys/dsl_ring_6ranks/ault43.cscs.ch_485050.sqlite": FileKind.NSYS_SQLITE,
    "nsys/fuser__report1_2024.6.sqlite": FileKind.NSYS_SQLITE,
    "perf/two_sum__perf_stat.txt": FileKind.PERF_STAT,
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_every_real_file_is_told_by_its_content(real_fixtures: Any, tmp_path: Path, name: str) -> None:
    real = real_fixtures / name
    assert sniff(real).kind is REAL[name]
    # the same bytes under a misleading name are the same kind (the .nsys-rep/.qdrep exception aside)
    renamed = tmp_path / "data.bin"
    shutil.copyfile(real, renamed)
    assert sniff(renamed).kind is REAL[name]


@pytest.mark.parametrize("name", ["kineto/hta/trace_filter__sampled_rank-0.json.gz",
                                  "kineto/hta/trace_filter__sampled_rank-1.json.gz",
                                  "kineto/hta/trace_diff__control.json.gz"])
def test_a_trace_rank_is_its_distributed_info(real_fixtures: Any, name: str) -> None:
    path = real_fixtures / name
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        expected = json.load(fh)["distributedInfo"]["rank"]
    got = sniff(path)
    assert (got.rank, got.rank_source) == (expected, "distributedInfo")


def test_events_jsonl_and_profile_csv_are_told_apart_from_other_json_and_csv(tmp_path: Path) -> None:
    events = tmp_path / "notes.txt"  # an events file whatever its name
    write_events(events, [MetricEvent(name="step_time", value=1.0, kind="duration", unit="ms", source="mytimer")])
    assert sniff(events).kind is FileKind.EVENTS_JSONL
    csv = tmp_path / "copy.dat"
    shutil.copyfile(_DATA / "profile_rank_0.csv", csv)
    got = sniff(csv)
    assert got.kind is FileKind.PROFILE_CSV
    # no rank in the name: the machine_id column (<host>_rank<r>) gives it, as MyTimer writes it
    first = (_DATA / "profile_rank_0.csv").read_text().splitlines()[1].split(",")[2]
    assert got.rank == int(first.rsplit("_rank", 1)[1]) and got.rank_source == "machine_id column"
    module = tmp_path / "module_summary_rank3.csv"
    module.write_text("module_name,mean_ms,median_ms,std_ms,total_ms,run_count,percentage\nnet.0,1.5,1.4,0.1,3.0,2,100\n")
    assert (sniff(module).kind, sniff(module).rank) == (FileKind.MODULE_SUMMARY, 3)
    other = tmp_path / "config.json"
    other.write_text('{"providers": []}\n')
    assert sniff(other).kind is FileKind.UNKNOWN
    table = tmp_path / "table.csv"
    table.write_text("name,value\na,1\n")
    assert sniff(table).kind is FileKind.UNKNOWN


def test_a_log_named_like_a_trace_is_still_a_log(real_fixtures: Any, tmp_path: Path) -> None:
    log = tmp_path / "rank0.pt.trace.json"
    shutil.copyfile(real_fixtures / "nccl/dsl__example_2.502726.o.nccl2.22.3.log", log)
    assert sniff(log).kind is FileKind.NCCL_LOG


def test_nothing_binary_or_empty_is_mistaken(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert (sniff(empty).kind, sniff(empty).detail) == (FileKind.UNKNOWN, "empty file")
    blob = tmp_path / "weights.bin"
    blob.write_bytes(bytes(range(256)) * 10)
    assert sniff(blob).kind is FileKind.UNKNOWN
    pickle_file = tmp_path / "x.pkl"
    import pickle

    pickle_file.write_bytes(pickle.dumps({"a": 1}))
    assert sniff(pickle_file).kind is FileKind.UNKNOWN
    # what torch.cuda.memory._dump_snapshot pickles: a dict with segments and device_traces
    snapshot = tmp_path / "snap.pickle"
    snapshot.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    assert sniff(snapshot).kind is FileKind.MEMORY_SNAPSHOT
    sqlite_file = tmp_path / "store.sqlite"
    import sqlite3

    con = sqlite3.connect(sqlite_file)
    con.execute("CREATE TABLE runs (id INTEGER)")
    con.commit()
    con.close()
    assert sniff(sqlite_file).kind is FileKind.SQLITE_OTHER


def test_an_nsys_report_is_told_by_its_name(tmp_path: Path) -> None:
    rep = tmp_path / "report_rank2.nsys-rep"
    rep.write_bytes(b"\x00binary")
    got = sniff(rep)
    assert (got.kind, got.rank) == (FileKind.NSYS_REP, 2)


def test_what_my_utils_itself_writes_is_named_not_analysed(tmp_path: Path) -> None:
    from my_utils.core.trace import csv_to_trace

    timeline = tmp_path / "mytimer_trace.json"
    csv_to_trace(str(_DATA / "profile_rank_0.csv"), str(timeline))
    assert sniff(timeline).kind is FileKind.MERGED_TRACE  # a timeline, not a rank's Kineto trace
    log = tmp_path / "rank_3.log"
    log.write_text("2026-12-07 13:58:25,166 [demo rank 3/8] INFO my_utils: demo: 12 steps on cpu\n")
    assert (sniff(log).kind, sniff(log).rank) == (FileKind.RUN_LOG, 3)
    page = tmp_path / "report.html"
    page.write_text("<!DOCTYPE html>\n<html lang=\"en\"><head></head></html>\n")
    assert sniff(page).kind is FileKind.WEB_PAGE
