"""NCCL RAS client output (``nccl.ras``, the ``nccl_ras`` provider) on files built from NCCL's own documentation and
source (``tests/data/MANIFEST.md``): problems per severity, one per distinct problem however many queries repeat it."""

from __future__ import annotations

from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.profiling.nccl.ras import read_ras
from my_utils.profiling.nccl.ras_provider import NcclRasProvider

DATA = Path(__file__).resolve().parent / "data" / "nccl_ras"


def test_a_healthy_job() -> None:
    r = read_ras(DATA / "status_ok.txt")
    assert (r.mode, r.queries, r.nccl_version) == ("status", 1, "2.26.2+cuda12.8")
    assert r.job == {"nodes": 4, "processes_per_node": 8, "gpus_per_process": 1, "processes": 32, "gpus": 32}
    assert [(c.group, c.comms, c.nodes, c.ranks_per_comm, c.status, c.errors) for c in r.communicators] == [
        (0, 8, 4, 4, "RUNNING", "OK")]
    assert r.counts() == {"error": 0, "warning": 0, "info": 0} and r.issues == ()


def test_two_queries_of_a_job_losing_a_process() -> None:
    """Query 1: a process missing (INCOMPLETE, job-wide and in communicator #0-0), two timeouts, an operation-count
    mismatch; query 2: the process declared DEAD, #0-0 still INCOMPLETE. Five distinct problems, the repeated one
    counted in both queries."""
    text = (DATA / "status_problem_twice.txt").read_text()
    r = read_ras(DATA / "status_problem_twice.txt")
    assert r.queries == text.count("Job summary") == 2
    assert r.counts() == {"error": 3, "warning": 2, "info": 0}
    by = {(i.kind, i.communicator, i.summary): i for i in r.issues}
    repeated = by[("INCOMPLETE", "#0-0 (cf264af53edbe986)", "Missing communicator data from 1 rank")]
    assert (repeated.occurrences, repeated.first_query, repeated.last_query, repeated.ranks) == (2, 1, 2, (21,))
    assert text.count("#0-0 (cf264af53edbe986) INCOMPLETE") == 2
    dead = next(i for i in r.issues if i.kind == "DEAD")
    assert dead.severity == "error" and dead.processes == ("3487984 on 172.16.64.213",) and dead.first_query == 2
    mismatch = next(i for i in r.issues if i.kind == "MISMATCH")
    assert mismatch.severity == "warning" and mismatch.ranks == (0, 2, 3, 4, 5)
    assert [i.severity for i in r.issues] == sorted((i.severity for i in r.issues), key=("error", "warning").index)
    assert [c.errors for c in r.communicators] == ["INCOMPLETE,MISMATCH", "INCOMPLETE"]


def test_json_status_derives_the_problems() -> None:
    """NCCL 2.29's JSON (the RAS documentation's sample): rank 1 of the 2-rank communicator is missing and unresponsive
    but not yet dead: one INCOMPLETE error, no DEAD."""
    r = read_ras(DATA / "status.json")
    assert (r.mode, r.nccl_version) == ("json", "2.29.1")
    (issue,) = r.issues
    assert (issue.severity, issue.kind, issue.communicator, issue.ranks) == ("error", "INCOMPLETE",
                                                                             "(ae94423cfbb2ef4a)", (1,))


@pytest.mark.parametrize("name", ["monitor.txt", "monitor.json"])
def test_monitor_events_counted_per_peer(name: str) -> None:
    r = read_ras(DATA / name)
    assert r.mode == "monitor"
    events = {i.kind: i for i in r.issues}
    assert events["PEER_DEAD"].severity == "error"
    assert events["PEER_UNRESPONSIVE"].severity == "warning"
    peer = "Process 1524345 on node 172.16.64.245 managing GPU 1"
    assert all(i.summary == peer for i in r.issues)
    if name == "monitor.txt":  # two unresponsive events about the same peer (5 s, then 10 s): one problem, twice
        assert events["PEER_UNRESPONSIVE"].occurrences == 2 and events["PEER_RETRY"].severity == "info"
        assert r.counts() == {"error": 1, "warning": 1, "info": 1}


def test_provider_events() -> None:
    events = NcclRasProvider.from_input(DATA / "status_problem_twice.txt").collect()
    by = {e.name: e for e in events}
    assert by["nccl.ras.errors"].value == 3 and by["nccl.ras.warnings"].value == 2
    issues = [e for e in events if e.name.startswith("nccl.ras.issue:")]
    assert len(issues) == 5 and {e.source for e in events} == {"nccl_ras"}
    assert by["nccl.ras.job.gpus"].value == 32
    # a folder: only the files that look like RAS output are read
    folder = NcclRasProvider.from_input(DATA).collect()
    assert {e.attrs["file"] for e in folder} == {p.name for p in DATA.iterdir()}


def test_bad_input(tmp_path: Path) -> None:
    p = tmp_path / "ras.txt"
    p.write_text("hello\nworld\n")
    with pytest.raises(UnsupportedInputError, match="Job summary"):
        read_ras(p)
    p.write_text('{\n  "communicators": [\n')
    with pytest.raises(InputError, match="ends inside one"):
        read_ras(p)
    p.write_text("")
    with pytest.raises(UnsupportedInputError, match="empty"):
        read_ras(p)
