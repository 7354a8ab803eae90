"""myutils-distributed: etcd barrier latency for 2/4/8 ranks, and ``stragglers`` over 64 ranks x 10,000 steps.

    python bench/bench_distributed.py [--quick] [--samples N] [--json OUT]

Barrier (needs the ``etcd`` binary and ``etcd3gw``): one etcd on 127.0.0.1 (temp data dir),
N rank processes run ``EtcdBarrier.wait()`` for R rounds; a sample is the median over rounds
2..R of the slowest rank's wait (what the job waits for). Anchors, same run: one etcd round
trip (create + read under a lease, one client), and a bare barrier written straight on
etcd3gw (create, read, watch, read, count PUTs: no lease refresh, heartbeat, timeout or
clean-up), the floor on this machine at this load. Tools are interleaved per sample.

Stragglers: ``analyze_stragglers`` in a child interpreter over generated profile CSVs
(``write_synthetic_run``: 3 sections, one slow rank), wall time and the child's peak RSS.
Anchors, same run: a bare ``csv.reader`` pass over the same files (the floor of reading them)
and the same analysis over a tenth of the steps (bounded memory: RSS must not grow with
steps). The 64 x 10,000 files (~420 MB) are cached in ``bench/out/`` and remade when stale.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _report import (
    Report,
    at_most,
    at_most_times,
    common_args,
    interleave,
    interpreter_label,
    require,
    versions_label,
)
from _temp import bench_tempdir

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
GENERATOR_VERSION = 1  # bump when write_synthetic_run's output changes
SECTIONS = (("data", 2.0), ("forward", 10.0), ("backward", 20.0))


# -- child modes (this file re-runs itself) ----------------------------------------------------


def _barrier_rank(port: int, rank: int, world: int, rounds: int, name: str) -> None:
    from my_utils.distributed.etcd_barrier import EtcdBarrier

    barrier = EtcdBarrier(name, rank, world, port=port, timeout=60)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        barrier.wait()
        times.append((time.perf_counter() - start) * 1e3)
    barrier.close()
    print(json.dumps(times), flush=True)


def _bare_rank(port: int, rank: int, world: int, rounds: int, name: str) -> None:
    """The anchor: the least a leased etcd barrier does (create, read, watch, read, count PUTs), no extras."""
    import threading

    import etcd3gw

    client = etcd3gw.client(host="127.0.0.1", port=port)
    lease = client.lease(ttl=60)
    times = []
    for generation in range(rounds):
        start = time.perf_counter()
        prefix = f"/bench/bare/{name}/{generation}/"
        client.create(f"{prefix}{rank}", "1", lease=lease)
        seen = {kv["key"] for _, kv in client.get_prefix(prefix)}
        if len(seen) < world:
            events, cancel = client.watch_prefix(prefix)
            timer = threading.Timer(60, cancel)
            timer.start()
            seen |= {kv["key"] for _, kv in client.get_prefix(prefix)}
            for event in events if len(seen) < world else ():
                if event.get("type", "PUT") == "PUT":
                    seen.add(event["kv"]["key"])
                if len(seen) >= world:
                    break
            timer.cancel()
            cancel()
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps(times), flush=True)


def _peak_rss_mb() -> float:
    """This interpreter's peak RSS: VmHWM of its own memory map.

    Not ``getrusage().ru_maxrss``: Linux keeps the maximum across ``execve``, so a child started
    from this (bigger) bench process would report the parent's size at fork.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _analyze(folder: str) -> None:
    from my_utils.distributed.stragglers import analyze_stragglers

    start = time.perf_counter()
    report = analyze_stragglers(folder)
    elapsed = time.perf_counter() - start
    print(json.dumps({"s": elapsed, "rss_mb": _peak_rss_mb(), "steps": report.steps, "stragglers": report.stragglers}))


def _csv_pass(folder: str) -> None:
    import csv

    start = time.perf_counter()
    rows = 0
    for path in sorted(Path(folder).glob("profile_rank_*.csv")):
        with open(path, newline="", encoding="utf-8") as fh:
            for _ in csv.reader(fh):
                rows += 1
    elapsed = time.perf_counter() - start
    print(json.dumps({"s": elapsed, "rss_mb": _peak_rss_mb(), "rows": rows}))


# -- barrier -----------------------------------------------------------------------------------


def _barrier_sample(port: int, world: int, rounds: int, tag: str, mode: str = "--barrier-rank") -> float:
    cmd = [sys.executable, __file__, mode, str(port), "", str(world), str(rounds), tag]
    procs = []
    for rank in range(world):
        cmd[4] = str(rank)
        procs.append(subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    per_rank = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"barrier rank exited {proc.returncode}: {err.strip().splitlines()[-1:]}")
        per_rank.append(json.loads(out))
    slowest = [max(times[i] for times in per_rank) for i in range(1, rounds)]  # round 0 pays start-up
    return statistics.median(slowest)


def _round_trip_ms(port: int, calls: int = 50) -> float:
    from my_utils.distributed.kv_store import EtcdStore

    store = EtcdStore(port=port)
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        store.create(f"/bench/rt/{os.getpid()}/{time.monotonic_ns()}/{i}", "1")
        store.get_prefix(f"/bench/rt/{os.getpid()}/")
        samples.append((time.perf_counter() - start) * 1e3)
    store.delete_prefix("/bench/rt/")
    store.close(revoke=True)
    return statistics.median(samples)


def bench_barrier(report: Report, samples: int, rounds: int) -> None:
    if shutil.which("etcd") is None:
        report.skip("barrier", "the etcd binary is not on PATH (apt-get install etcd-server)")
        return
    try:
        import etcd3gw  # noqa: F401
    except ImportError:
        report.skip("barrier", "etcd3gw is not installed (pip install 'myutils-distributed[etcd]')")
        return
    from my_utils.distributed.testing import EtcdServer

    counter = iter(range(10**6))
    with EtcdServer() as etcd:
        report.label("etcd", f"{subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}"
                             f" on 127.0.0.1:{etcd.port}, temp data dir")
        tools = {"etcd create + read (1 client)": lambda: _round_trip_ms(etcd.port)}
        for world in (2, 4, 8):
            tools[f"bare etcd3gw barrier, {world} ranks"] = (
                lambda w=world: _barrier_sample(etcd.port, w, rounds, f"a{next(counter)}", "--bare-rank"))
            tools[f"EtcdBarrier, {world} ranks"] = (
                lambda w=world: _barrier_sample(etcd.port, w, rounds, f"b{next(counter)}"))
        got = interleave(tools, rounds=samples)
    report.add("etcd create + read (1 client)", got["etcd create + read (1 client)"], "ms")
    goals = {2: 8, 4: 15, 8: 30}  # the recipe's medians on the 2-core CI machine, rounded up
    for world in (2, 4, 8):
        bare = f"bare etcd3gw barrier, {world} ranks"
        report.add(bare, got[bare], "ms", anchor="etcd create + read (1 client)")
        report.add(f"EtcdBarrier, {world} ranks", got[f"EtcdBarrier, {world} ranks"], "ms", anchor=bare,
                   goals=[at_most(goals[world], source="recipes/etcd.md, a quiet machine"),
                          at_most_times(1.5, source="leases, timeouts and heartbeats cost little")],
                   note=f"median of the slowest rank over rounds 2..{rounds}")


# -- stragglers --------------------------------------------------------------------------------


def _dataset(out: Path, ranks: int, steps: int) -> Path:
    """Generated CSVs, cached under ``out`` (remade when the generator version differs)."""
    from my_utils.distributed.testing import write_synthetic_run

    folder = out / f"stragglers_{ranks}x{steps}"
    meta = folder / "meta.json"
    want = {"version": GENERATOR_VERSION, "ranks": ranks, "steps": steps, "sections": SECTIONS}
    if meta.exists() and json.loads(meta.read_text()) == json.loads(json.dumps(want)):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    write_synthetic_run(folder, ranks, steps, SECTIONS, slow=(ranks // 3, "forward", 1.5))
    meta.write_text(json.dumps(want))
    print(f"   generated {folder} in {time.perf_counter() - start:.0f} s", flush=True)
    return folder


def _child(mode: str, folder: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, mode, str(folder)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {folder} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def bench_stragglers(report: Report, samples: int, ranks: int, steps: int, out: Path) -> None:
    full, tenth = _dataset(out, ranks, steps), _dataset(out, ranks, steps // 10)
    size_mb = sum(p.stat().st_size for p in full.glob("*.csv")) / 1e6
    report.label("stragglers input", f"{ranks} ranks x {steps} steps x {len(SECTIONS)} sections "
                                     f"({size_mb:.0f} MB of CSV) and x {steps // 10} steps; in {out}")
    results = interleave({
        "csv.reader pass": lambda: _child("--csv-pass", full),
        "stragglers": lambda: _child("--analyze", full),
        "stragglers, 1/10 steps": lambda: _child("--analyze", tenth),
    }, rounds=samples)
    expected = [[ranks // 3, "forward"]]
    found = {json.dumps(r["stragglers"]) for r in results["stragglers"] + results["stragglers, 1/10 steps"]}
    if found != {json.dumps(expected)}:
        raise RuntimeError(f"stragglers named {found}, expected {expected}")
    rows = results["csv.reader pass"][0]["rows"]
    report.add("csv.reader pass, s", [r["s"] for r in results["csv.reader pass"]], "s",
               note=f"{rows:,} rows")
    report.add("stragglers, s", [r["s"] for r in results["stragglers"]], "s", anchor="csv.reader pass, s",
               note=f"{rows / statistics.median(r['s'] for r in results['stragglers']) / 1e3:.0f}k rows/s")
    report.add("csv.reader pass, peak RSS", [r["rss_mb"] for r in results["csv.reader pass"]], "MB")
    report.add("stragglers 1/10 steps, peak RSS", [r["rss_mb"] for r in results["stragglers, 1/10 steps"]], "MB")
    report.add("stragglers, peak RSS", [r["rss_mb"] for r in results["stragglers"]], "MB",
               anchor="stragglers 1/10 steps, peak RSS",
               goals=[at_most(100, source="issue 12: bounded memory"),
                      at_most_times(1.2, source="issue 12: memory does not grow with steps")])


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("--barrier-rank", "--bare-rank"):
        port, rank, world, rounds, name = argv[1:]
        (_barrier_rank if argv[0] == "--barrier-rank" else _bare_rank)(
            int(port), int(rank), int(world), int(rounds), name)
        return 0
    if argv and argv[0] in ("--analyze", "--csv-pass"):
        (_analyze if argv[0] == "--analyze" else _csv_pass)(argv[1])
        return 0
    args = common_args(__doc__ or "").parse_args(argv)
    require("my_utils.distributed", "bench_distributed")
    samples = args.samples or (1 if args.quick else 3)
    report = Report("bench_distributed", "etcd barrier latency; stragglers over many rank CSVs", quick=args.quick)
    report.label("interpreter", interpreter_label())
    report.label("versions", versions_label("myutils-core", "myutils-distributed", "etcd3gw"))
    report.label("load average before", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    bench_barrier(report, samples, rounds=5 if args.quick else 20)
    if args.quick:
        with bench_tempdir("bench_distributed_") as tmp:
            bench_stragglers(report, samples, ranks=8, steps=200, out=tmp)
    else:
        bench_stragglers(report, samples, ranks=64, steps=10_000, out=OUT)
    report.label("load average after", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
