"""Setup facts of Nsight Systems exports (HELPERS-CONTRACT: ``setup.share``, ``setup.idle``, ``setup.one_shot``).

Read from the per-export tables of :mod:`my_utils.profiling.nsys.setup` (``nsys_capture``,
``nsys_setup``, ``nsys_setup_idle``); every process of every export is added up (spans added,
as the GPU facts add devices), and per-rank variants (``setup.share:rank<N>``) are given when
the run has several ranks.

``setup.share``
    % of the capture span (first to last activity of each process) covered by one-off work;
    ``detail`` gives each kind of setup with its names and its time per rank.
``setup.idle``
    ms of GPU idle that lies inside setup windows, of all GPU idle time; the host-wait part is
    in ``detail``. A launch-overhead fix cannot save it.
``setup.one_shot``
    1 when no process repeats anything (fewer than 2 NVTX iterations, or no kernel other than
    element-wise and memory kernels launched twice), else 0; ``detail`` says why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]
SOURCE = "nsys"
MS = 1e6
CAPTURE = ("capture span (first to last CUDA call, NVTX range, OS runtime call or GPU activity of each process"
           ", spans added)")
KIND_ORDER = ("context creation", "device allocation before the first kernel", "host allocation", "module loading",
              "communicator init", "JIT compilation", "first iteration", "communicator teardown")


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _rank_key(r: Any) -> tuple[bool, int]:
    return (r is None, r if isinstance(r, int) else 0)


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,.1f} ms" if abs(hi - lo) < 0.05 else f"{lo:,.1f}–{hi:,.1f} ms"


def setup_detail(setup: Rows, processes: int) -> str:
    """Each kind of setup, its names and its time (a range over processes when there are several), largest first."""
    kinds: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in setup:
        kinds[str(r.get("kind"))].append(r)
    parts = []
    # the kind with the most time first: what the setup mostly was
    for kind in sorted(kinds, key=lambda k: -max(_num(r.get("union_ns")) for r in kinds[k])):
        rows = kinds[kind]
        names = sorted({n.strip() for r in rows for n in str(r.get("names") or "").split(",") if n.strip()})
        per = [_num(r.get("union_ns")) / MS for r in rows]
        where = f" per process ({len(rows)} of {processes})" if processes > 1 and len(rows) < processes else (
            " per process" if processes > 1 else "")
        shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
        parts.append(f"{kind} ({shown}) {_span(per)}{where}")
    return "; ".join(parts)


def setup_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """``setup.share``, ``setup.idle``, ``setup.one_shot`` (and ``setup.share:rank<N>``); none without ``nsys_capture``."""
    capture = [r for r in tables.get("nsys_capture") or [] if _num(r.get("capture_ns")) > 0]
    if not capture:
        return []
    setup = list(tables.get("nsys_setup") or [])
    out = [_share(capture, setup, "setup.share")]
    ranks = sorted({r.get("rank") for r in capture}, key=_rank_key)
    if len(ranks) > 1:
        for rank in ranks:
            out.append(_share([r for r in capture if r.get("rank") == rank],
                              [r for r in setup if r.get("rank") == rank], f"setup.share:rank{rank}"))
    out.append(_idle(list(tables.get("nsys_setup_idle") or []), setup))
    out.append(_one_shot(capture))
    return out


def _share(capture: Rows, setup: Rows, fid: str) -> Fact:
    total = sum(_num(r.get("capture_ns")) for r in capture)
    inside = sum(_num(r.get("setup_ns")) for r in capture)
    gpu = [(r, _num(r.get("gpu_end")) - _num(r.get("gpu_start"))) for r in capture if r.get("gpu_start") is not None]
    gpu_span = sum(s for _r, s in gpu)
    gpu_setup = sum(_num(r.get("setup_in_gpu_span_ns")) for r, _s in gpu)
    ranks = tuple(sorted({r.get("rank") for r in capture}, key=_rank_key))
    what = setup_detail(setup, len(capture)) or "no one-off work found"
    detail = f"{inside / MS:,.1f} ms of {total / MS:,.1f} ms: {what}"
    if gpu_span > 0:
        detail += f"; {100.0 * gpu_setup / gpu_span:.1f}% of the GPU span ({gpu_span / MS:,.1f} ms) lies in setup"
    ev = tuple(EvidenceRow("nsys_capture", {"rank": r.get("rank"), "pid": r.get("pid")},
                           {"capture_ns": r.get("capture_ns"), "setup_ns": r.get("setup_ns")}) for r in capture)
    ev += tuple(EvidenceRow("nsys_setup", {"rank": r.get("rank"), "pid": r.get("pid"), "kind": r.get("kind")},
                            {"union_ns": r.get("union_ns"), "count": r.get("count")}) for r in setup)
    return Fact(fid, "one-off work (setup)", 100.0 * inside / total, "%", SOURCE, CAPTURE, total / MS, "ms", ranks,
                f"{len(capture)} process(es)" + (", spans and times added" if len(capture) > 1 else ""),
                evidence=ev, detail=detail)


def _idle(rows: Rows, setup: Rows) -> Fact:
    idle = sum(_num(r.get("idle_ns")) for r in rows)
    inside = sum(_num(r.get("setup_idle_ns")) for r in rows)
    host = sum(_num(r.get("setup_host_wait_ns")) for r in rows)
    ranks = tuple(sorted({r.get("rank") for r in rows}, key=_rank_key))
    ev = tuple(EvidenceRow("nsys_setup_idle", {"rank": r.get("rank"), "device": r.get("device")},
                           {k: r.get(k) for k in ("idle_ns", "setup_idle_ns", "setup_host_wait_ns")}) for r in rows)
    if not rows:
        return Fact("setup.idle", "GPU idle inside setup", NotMeasured("no GPU activity in the exports"), "ms", SOURCE)
    kinds = sorted({str(r.get("kind")) for r in setup}, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 99)
    return Fact("setup.idle", "GPU idle inside setup", inside / MS, "ms", SOURCE,
                "GPU idle time (each device's span minus the union of its work, devices added)", idle / MS, "ms",
                ranks, f"{len(rows)} device(s)", evidence=ev,
                detail=(f"{inside / MS:,.1f} ms of {idle / MS:,.1f} ms idle lies inside setup windows"
                        + (f" ({', '.join(kinds)})" if kinds else "") + f", {host / MS:,.1f} ms of it waiting for the"
                        " host: launching faster cannot save it"))


def _one_shot(capture: Rows) -> Fact:
    with_kernels = [r for r in capture if int(_num(r.get("kernels"))) > 0 or r.get("iterations") is not None]
    ranks = tuple(sorted({r.get("rank") for r in capture}, key=_rank_key))
    ev = tuple(EvidenceRow("nsys_capture", {"rank": r.get("rank"), "pid": r.get("pid")},
                           {k: r.get(k) for k in ("kernels", "kernel_names", "repeated_names", "iterations",
                                                  "one_shot")}) for r in capture)
    if not with_kernels:
        return Fact("setup.one_shot", "one-shot capture (nothing repeats)",
                    NotMeasured("no kernel and no NVTX iteration in the exports"), "count", SOURCE, ranks=ranks,
                    evidence=ev)
    shots = [r for r in with_kernels if int(_num(r.get("one_shot")))]
    value = 1 if len(shots) == len(with_kernels) else 0
    if value:
        reasons = sorted({str(r.get("one_shot_reason")) for r in shots})
        detail = "every process: " + "; ".join(reasons[:3])
    else:
        repeats = sorted({int(_num(r.get("repeated_names"))) for r in with_kernels if not int(_num(r.get("one_shot")))})
        detail = (f"{len(with_kernels) - len(shots)} of {len(with_kernels)} process(es) repeat work ("
                  + ", ".join(str(n) for n in repeats) + " kernel name(s) other than element-wise launched twice or "
                  "more, or NVTX iterations)")
    return Fact("setup.one_shot", "one-shot capture (nothing repeats)", value, "count", SOURCE, ranks=ranks,
                aggregate=f"{len(with_kernels)} process(es) with GPU work", evidence=ev, detail=detail)
