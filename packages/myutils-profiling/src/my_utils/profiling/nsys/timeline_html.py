"""One or several nsys exports as one standalone, offline HTML timeline (for those without Perfetto or Nsight).

:class:`TimelinePage` is a :class:`~my_utils.profiling.nsys.timeline.TimelineSink`: it receives
the same pass as the Chrome/Perfetto trace (the same lanes, slices and ``max_events`` bound),
so ``nsys timeline --output T.json --html T.html`` reads each export once and both files agree.

The page is one file: the drawing code (``timeline_page/page.js``, canvas only) and its style
are inlined, the data is JSON inside ``<script type="application/json">``, and a
Content-Security-Policy forbids every request. Names come from the exports and are untrusted:
in the JSON every ``<``, ``>`` and ``&`` is a ``\\u`` escape (no ``</script>`` can close the
block), and the page shows them through ``textContent`` and the canvas only, never as markup.

**Size.** Each slice costs about 25 bytes of JSON (its start as a delta on its lane, duration,
name and category indices) plus its name once. With ``bins="auto"``, a page that would hold
more than ``max_slices`` slices keeps the ``max_slices`` longest ones and merges the shorter
ones into per-lane density bins one pixel of the full view wide (``FULL_VIEW_PX`` across the
whole span; wider when even the kept slices are shorter than that): a bin keeps its count,
busy time and main category, so a lane row holds at most ``FULL_VIEW_PX`` bins whatever the
export's size. ``bins="always"`` merges every slice shorter than one such pixel. Names are cut
at ``NAME_CHARS`` characters (``SHORT_NAME_CHARS`` once the page's distinct names pass
``NAMES_BUDGET`` characters). The header says what was left out, binned and cut.
"""

from __future__ import annotations

import bisect
import json
import math
from array import array
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from my_utils.profiling.nsys.timeline import GPU_TID, Lane, Slice, TimelineRank, TimelineRun

SCHEMA = 1
FULL_VIEW_PX = 1600
MAX_SLICES = 250_000
NAME_CHARS = 200
SHORT_NAME_CHARS = 32
NAMES_BUDGET = 4_000_000
BINS = ("auto", "always", "never")
ASSETS = Path(__file__).resolve().with_name("timeline_page")


class _LaneData:
    """One lane's slices as compact columns (the bound ``max_events`` keeps them in memory)."""

    __slots__ = ("base", "cat", "depth", "dur", "end", "name", "nbytes", "rank", "start", "sub", "tid", "title")

    def __init__(self, rank: int, tid: int, base: int, sub: int, title: str) -> None:
        self.rank, self.tid, self.base, self.sub, self.title = rank, tid, base, sub, title
        self.start = array("q")
        self.dur = array("q")
        self.name = array("l")
        self.cat = array("b")
        self.depth = array("h")
        self.nbytes: list[tuple[int, int]] = []  # (slice index, bytes) of copies and sets
        self.end = -(2**62)


class TimelinePage:
    """Collects the timeline's pass and renders the page (``html()``, ``write(path)``).

    ``bins``: ``auto`` merges sub-pixel slices only when the page would hold more than
    ``max_slices``; ``always`` merges them in any case; ``never`` keeps every slice (the file
    then grows by about 25 bytes per slice).
    """

    def __init__(self, *, bins: str = "auto", max_slices: int = MAX_SLICES) -> None:
        if bins not in BINS:
            from my_utils.core.errors import UsageError

            raise UsageError(f"--bins {bins!r}: expected one of {', '.join(BINS)}")
        self.bins = bins
        self.max_slices = max(1, max_slices)
        self.run: TimelineRun | None = None
        self.ranks: list[dict[str, Any]] = []
        self.lanes: dict[tuple[int, int], _LaneData] = {}
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.kept = 0
        self.binned = 0  # slices merged into density bins, once the page is made

    # -- the sink ---------------------------------------------------------------------

    def begin(self, run: TimelineRun) -> None:
        """Remember the run's clock and bound."""
        self.run = run

    def rank(self, info: TimelineRank) -> None:
        """Start a rank's group of lanes."""
        self.ranks.append({"rank": info.rank, "label": info.label, "version": info.version, "gpus": list(info.gpus),
                           "anchored": info.epoch_offset_ns is not None, "events": info.total})

    def lane(self, rank: int, lane: Lane) -> None:
        """A GPU stream's lane, or a sub-lane for overlapping slices."""
        if (rank, lane.tid) not in self.lanes:
            self.lanes[(rank, lane.tid)] = _LaneData(rank, lane.tid, lane.base, lane.sub, lane.name)

    def slice(self, rank: int, s: Slice) -> None:
        """Keep a slice on its lane (an NVTX thread's lane is made by its first slice)."""
        lane = self.lanes.get((rank, s.lane))
        if lane is None:  # the trace names only GPU streams and sub-lanes; a thread's own lane comes with a slice
            lane = self.lanes[(rank, s.lane)] = _LaneData(rank, s.lane, s.lane, 0, f"thread {s.lane}")
        name = self.names.setdefault(s.name, len(self.names))
        cat = self.cats.setdefault(s.cat, len(self.cats))
        if s.nbytes is not None:
            lane.nbytes.append((len(lane.start), int(s.nbytes)))
        lane.start.append(s.start)
        lane.dur.append(s.dur)
        lane.name.append(name)
        lane.cat.append(cat)
        lane.depth.append(s.depth)
        lane.end = max(lane.end, s.start + s.dur)

    def rank_done(self, info: TimelineRank, kept: int) -> None:
        """Record how many of the rank's events were kept."""
        entry = self.ranks[-1]
        entry["kept"] = kept
        entry["left_out"] = info.total - kept
        self.kept += kept

    # -- the page ---------------------------------------------------------------------

    def data(self) -> dict[str, Any]:
        """The page's JSON document (see ``timeline_page/page.js`` for how it is drawn)."""
        run = self.run
        lanes = self._ordered_lanes()
        busy = [lane for lane in lanes if len(lane.start)]
        t0 = min((lane.start[0] for lane in busy), default=0)
        end = max((lane.end for lane in busy), default=t0)
        span = max(end - t0, 1)
        unit = max(1, math.ceil(span / FULL_VIEW_PX))
        threshold, width = self._threshold(lanes, unit)
        cats = list(self.cats)
        names = list(self.names)
        page_names: dict[str, int] = {}
        cut = {"chars": NAME_CHARS, "short_chars": SHORT_NAME_CHARS, "count": 0, "shortened": 0}
        budget = [0]

        def page_name(index: int) -> int:
            full = names[index]
            limit = NAME_CHARS if budget[0] < NAMES_BUDGET else SHORT_NAME_CHARS
            text = full if len(full) <= limit else full[:limit] + "…"
            if text not in page_names:
                page_names[text] = len(page_names)
                budget[0] += len(text)
                if text is not full:
                    cut["count"] += 1
                    cut["shortened"] += limit == SHORT_NAME_CHARS
            return page_names[text]

        out_lanes = []
        binned_slices = binned_lanes = 0
        for lane in lanes:
            doc = _encode_lane(lane, t0, threshold, width, page_name)
            binned = sum(doc["bins"]["n"]) if doc.get("bins") else 0
            binned_slices += binned
            binned_lanes += binned > 0
            out_lanes.append(doc)
        rank_pos = {r["rank"]: i for i, r in enumerate(self.ranks)}
        ranks = []
        for r in self.ranks:
            mine = [i for i, lane in enumerate(lanes) if lane.rank == r["rank"]]
            starts = [lanes[i].start[0] for i in mine if len(lanes[i].start)]
            ends = [lanes[i].end for i in mine if len(lanes[i].start)]
            last = max((lanes[i].start[-1] for i in mine if len(lanes[i].start)), default=None)
            ranks.append({**r, "lanes": mine, "first_ns": min(starts) - t0 if starts else None,
                          "last_ns": max(ends) - t0 if ends else None,
                          "last_start_ns": last - t0 if last is not None else None})
        for doc in out_lanes:
            doc["rank"] = rank_pos[doc["rank"]]
        self.binned = binned_slices
        anchored = bool(run and run.anchored)
        loose = ", ".join(f"rank {r['rank']} ({r['label']})" for r in self.ranks if not r["anchored"])
        return {
            "schema": SCHEMA,
            "kind": "nsys_timeline_page",
            "clock": {"anchored": anchored,
                      "origin_utc": _utc(run.origin_ns + t0) if anchored and run else None,
                      "trace_ts_us": t0 / 1e3,
                      "note": ("time 0 is the first event; every export is on the UTC epoch (nsys session anchor), "
                               "so ranks line up (up to the hosts' clock synchronisation)") if anchored else
                              (f"time 0 is the first event; {loose or 'an export'} has no UTC anchor, so each "
                               "export is on its own clock and ranks are not lined up")},
            "span_ns": span if busy else 0,
            "max_events": run.max_events if run else None,
            "per_rank": run.per_rank if run else None,
            "events": self.kept,
            "bins": {"mode": self.bins, "max_slices": self.max_slices, "below_ns": threshold, "width_ns": width,
                     "full_view_px": FULL_VIEW_PX, "pixels": width // unit if width else 0,
                     "slices": binned_slices, "lanes": binned_lanes},
            "names_cut": cut,
            "cats": cats,
            "names": list(page_names),
            "ranks": ranks,
            "lanes": out_lanes,
        }

    def html(self) -> str:
        """The whole page: template, style, script and the data (escaped for a ``<script>`` block)."""
        text = json.dumps(self.data(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return render_page(text)

    def write(self, path: Path) -> None:
        """Write the page to ``path`` atomically (UTF-8)."""
        from my_utils.core.atomic import atomic_write
        from my_utils.core.safe_io import utf8_text

        with atomic_write(path) as fh:
            fh.write(utf8_text(self.html()))

    # -- helpers ----------------------------------------------------------------------

    def _ordered_lanes(self) -> list[_LaneData]:
        """Per rank (in the order they came): GPU streams by device and stream, then threads; sub-lanes after theirs."""
        pos = {r["rank"]: i for i, r in enumerate(self.ranks)}
        return sorted(self.lanes.values(),
                      key=lambda x: (pos.get(x.rank, len(pos)), x.base < GPU_TID, x.base, x.sub))

    def _threshold(self, lanes: list[_LaneData], unit: int) -> tuple[int, int]:
        """(the duration below which slices go to bins, the bins' width), both 0 when nothing is binned.

        ``auto`` bins the fewest: the slices shorter than the ``max_slices``-th longest (ties
        included, so at most ``max_slices`` stay); ``always`` those below one full-view pixel.
        Bins are at least that pixel wide, so their count is bounded by the lanes, not the events.
        """
        if self.bins == "never" or (self.bins == "auto" and self.kept <= self.max_slices):
            return 0, 0
        if self.bins == "always":
            return unit, unit
        durs = sorted(d for lane in lanes for d in lane.dur)
        below = durs[len(durs) - self.max_slices]
        if len(durs) - bisect.bisect_left(durs, below) > self.max_slices:
            below += 1  # ties at the cut: they go too
        return below, max(unit, -(-below // unit) * unit)


def _encode_lane(lane: _LaneData, t0: int, threshold: int, width: int, page_name: Any) -> dict[str, Any]:
    """A lane as columns: start deltas (ns), durations, name and category indices, depths; bins apart."""
    starts: list[int] = []
    durs: list[int] = []
    names: list[int] = []
    cats: list[int] = []
    depths: list[int] = []
    copies = dict(lane.nbytes)
    nbytes: list[list[int]] = []
    bins: dict[tuple[int, int], list[Any]] = {}
    prev = t0
    for i in range(len(lane.start)):
        start, dur, depth = lane.start[i], lane.dur[i], lane.depth[i]
        if dur < threshold:
            key = ((start - t0) // width, depth)
            b = bins.get(key)
            if b is None:
                b = bins[key] = [0, 0, {}]
            b[0] += 1
            b[1] += dur
            b[2][lane.cat[i]] = b[2].get(lane.cat[i], 0) + dur + 1  # + 1: zero-length slices still count
            continue
        if i in copies:
            nbytes.append([len(starts), copies[i]])
        starts.append(start - prev)
        prev = start
        durs.append(dur)
        names.append(page_name(lane.name[i]))
        cats.append(lane.cat[i])
        depths.append(depth)
    doc: dict[str, Any] = {
        "rank": lane.rank, "tid": lane.tid, "name": lane.title, "kind": "gpu" if lane.base >= GPU_TID else "thread",
        "sub": lane.sub, "rows": (max(lane.depth) + 1) if len(lane.depth) else 1,
        "n": len(lane.start), "dur_ns": sum(lane.dur),
        "s": starts, "d": durs, "k": names, "c": cats,
    }
    if any(depths):
        doc["z"] = depths
    if nbytes:
        doc["b"] = nbytes
    if bins:
        keys = sorted(bins)
        doc["bins"] = {"i": [k[0] for k in keys], "z": [k[1] for k in keys], "n": [bins[k][0] for k in keys],
                       "d": [bins[k][1] for k in keys],
                       "c": [max(bins[k][2].items(), key=lambda kv: (kv[1], -kv[0]))[0] for k in keys]}
    return doc


def _utc(ns: int) -> str:
    """``2024-09-19 11:55:48.077024189 UTC`` (nanoseconds kept: a float cannot hold them)."""
    seconds, frac = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + f".{frac:09d} UTC"


def script_json(text: str) -> str:
    """JSON text made safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators."""
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_page(data_json: str) -> str:
    """The page around ``data_json`` (the document of :meth:`TimelinePage.data`, as JSON text)."""
    template = (ASSETS / "page.html").read_text(encoding="utf-8")
    css = (ASSETS / "page.css").read_text(encoding="utf-8")
    js = (ASSETS / "page.js").read_text(encoding="utf-8")
    # the data goes in last, so nothing it holds is taken for a placeholder
    head, _, tail = template.replace("/*STYLE*/", css).replace("/*SCRIPT*/", js).partition("{{DATA}}")
    return head + script_json(data_json) + tail
