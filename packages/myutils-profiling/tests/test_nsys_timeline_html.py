"""``nsys timeline --html``: the standalone page of real exports, against the trace, raw SQL and headless Chromium.

The page's data is read back from its ``<script type="application/json">`` block and compared
lane by lane with the Chrome/Perfetto trace the same command writes, and with counts and sums
recomputed here by SQL on the raw export (no package code). The browser tests open the file
from ``file://`` with every other request aborted and no host name resolving, and read the
header, the lanes and the hit test the page exposes as ``window.nsysTimeline``.

``MYUTILS_REPORT_SCREENSHOTS=<folder>`` also saves the 6-rank NCCL page's screenshot there
(``nsys_timeline_html.png``; docs/img/nsys_timeline_html.png is that file).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.nsys.timeline import GPU_TID, read_timeline
from my_utils.profiling.nsys.timeline_html import MAX_SLICES, TimelinePage, script_json

SUB = 100_000_000  # the trace's sub-lane offset (timeline._Lanes.SUB), restated: lanes are checked, not trusted
MFU = "nsys/nsysai__mfu_2gpu_before.sqlite"
CASES = {"ring": None, "mfu_2gpu": MFU, "concurrent_2022": "nsys/extrap__concurrent_s1_profile1.sqlite",
         "ex_gpu_2021": "nsys/extrap__ex-gpu.s10.sqlite"}
GPU_OPS = ("SELECT deviceId AS dev, start, end, 'kernel' AS op, NULL AS bytes FROM CUPTI_ACTIVITY_KIND_KERNEL "
           "WHERE end >= start{memcpy}{memset}")
EVIL = '</script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
CHROMIUM = os.environ.get("MYUTILS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]  # nothing can leave the machine
LOCAL = ("file://", "data:", "blob:", "about:")


# -- helpers: raw SQL, the page's data, the trace's lanes ---------------------------------


def raw(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def tables(path: Path) -> set[str]:
    return {r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def gpu_ops_sql(path: Path) -> str:
    have = tables(path)
    memcpy = (" UNION ALL SELECT deviceId, start, end, 'copy', bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE end >= start"
              if "CUPTI_ACTIVITY_KIND_MEMCPY" in have else "")
    memset = (" UNION ALL SELECT deviceId, start, end, 'copy', bytes FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE end >= start"
              if "CUPTI_ACTIVITY_KIND_MEMSET" in have else "")
    return GPU_OPS.format(memcpy=memcpy, memset=memset)


def nvtx_sql(path: Path) -> str:
    if "NVTX_EVENTS" not in tables(path):
        return "SELECT 0 AS tid, 0 AS start, 0 AS end LIMIT 0"
    return ("SELECT globalTid & 16777215 AS tid, start, end FROM NVTX_EVENTS "
            "WHERE eventType IN (59, 60, 70, 71) AND end >= start")


def page_doc(path: Path) -> dict[str, Any]:
    """The page's embedded data, as the browser's JSON.parse would read it."""
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r'<script type="application/json" id="tl-data">(.*?)</script>', text, re.S)
    assert len(blocks) == 1
    return json.loads(blocks[0])


def lane_slices(lane: dict[str, Any]) -> list[tuple[int, int]]:
    """(start, duration) of a lane's individual slices, starts decoded from their deltas."""
    out, t = [], 0
    for delta, dur in zip(lane["s"], lane["d"], strict=True):
        t += delta
        out.append((t, dur))
    return out


def page_lanes(doc: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(doc["ranks"][lane["rank"]]["rank"], lane["tid"]): lane for lane in doc["lanes"]}


def trace_lanes(path: Path) -> tuple[dict[tuple[int, int], list[dict[str, Any]]], dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    lanes: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            lanes[(e["pid"], e["tid"])].append(e)
        elif e["name"] == "thread_name":
            lanes.setdefault((e["pid"], e["tid"]), [])
    return lanes, trace["otherData"]


def ring(real_fixtures: Any, folder: Path) -> list[Path]:
    """The six ranks of one NCCL all-reduce, named as the launch template names them."""
    names = sorted(real_fixtures.names("nsys/dsl_ring_6ranks/"))
    assert len(names) == 6
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, name in enumerate(names):
        dst = folder / f"report_{i}.sqlite"
        shutil.copyfile(real_fixtures / name, dst)
        out.append(dst)
    return out


def cut(name: str) -> str:
    """A name as the page shows it (cut at NAME_CHARS, restated here)."""
    return name if len(name) <= 200 else name[:200] + "…"


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["nsys", "timeline", *args])


@pytest.fixture(scope="module")
def ring_files(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return ring(real_fixtures, tmp_path_factory.mktemp("ring"))


@pytest.fixture(scope="module")
def ring_page(ring_files: list[Path]) -> tuple[Path, Path]:
    folder = ring_files[0].parent
    html, trace = folder / "ring.html", folder / "ring.json.gz"
    res = run(str(folder / "report_%q{RANK}.sqlite"), "--html", str(html), "--output", str(trace))
    assert res.exit_code == 0, res.output
    return html, trace


# -- (1) the page holds what the trace holds, and what SQL counts ---------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_page_holds_the_traces_lanes_and_the_exports_rows(case: str, real_fixtures: Any, tmp_path: Path) -> None:
    if CASES[case] is None:
        files = ring(real_fixtures, tmp_path / "in")
        spec = str(tmp_path / "in" / "report_%q{RANK}.sqlite")
    else:
        files = [real_fixtures / CASES[case]]
        spec = str(files[0])
    html, trace = tmp_path / "t.html", tmp_path / "t.json"
    res = run(spec, "--html", str(html), "--output", str(trace))
    assert res.exit_code == 0, res.output
    doc, (tlanes, other) = page_doc(html), trace_lanes(trace)
    plane = page_lanes(doc)
    assert doc["bins"]["slices"] == 0  # small enough: every slice is drawn, so each can be checked
    # lanes: the same set, the same slices on each (count, durations, and start times to the nanosecond)
    assert set(plane) == set(tlanes)
    t0 = round(doc["clock"]["trace_ts_us"] * 1e3)
    for key, events in tlanes.items():
        lane = plane[key]
        mine = lane_slices(lane)
        assert lane["n"] == len(mine) == len(events)
        assert lane["dur_ns"] == sum(d for _, d in mine) == sum(round(e["dur"] * 1e3) for e in events)
        assert sorted((s + t0, d) for s, d in mine) == sorted((round(e["ts"] * 1e3), round(e["dur"] * 1e3))
                                                               for e in events)
        assert sorted(doc["names"][k] for k in lane["k"]) == sorted(cut(e["name"]) for e in events)
    assert doc["events"] == other["events"]
    assert doc["clock"]["anchored"] == (other["time_origin_unix_s"] is not None)
    if case == "ex_gpu_2021":  # no UTC anchor in a 2021 export: the page says whose clock is its own
        assert "rank 0 (extrap__ex-gpu.s10.sqlite) has no UTC anchor" in doc["clock"]["note"]
        assert doc["clock"]["origin_utc"] is None
    # per export, independently: kernels per device (count, time), copies (count, bytes), NVTX ranges per thread
    assert [r["label"] for r in doc["ranks"]] == [r["label"] for r in other["ranks"]] == [p.name for p in files]
    for pos, path in enumerate(files):
        kernels: Counter[int] = Counter()
        ktime: Counter[int] = Counter()
        copies: Counter[int] = Counter()
        cbytes: Counter[int] = Counter()
        nvtx: Counter[int] = Counter()
        ntime: Counter[int] = Counter()
        for lane in (x for x in doc["lanes"] if x["rank"] == pos):
            base = lane["tid"] % SUB if lane["tid"] < GPU_TID else (lane["tid"] - GPU_TID) % SUB
            nbytes = dict(lane.get("b", []))
            for i, (_, dur) in enumerate(lane_slices(lane)):
                cat = doc["cats"][lane["c"][i]]
                if lane["kind"] == "thread":
                    assert cat.startswith("nvtx")
                    nvtx[base] += 1
                    ntime[base] += dur
                elif cat in ("kernel", "nccl"):
                    kernels[base // 1000] += 1
                    ktime[base // 1000] += dur
                else:
                    assert cat == "memory"
                    copies[base // 1000] += 1
                    cbytes[base // 1000] += nbytes[i]
        ops = gpu_ops_sql(path)
        rows = raw(path, f"SELECT dev, op, COUNT(*), SUM(end - start), SUM(bytes) FROM ({ops}) GROUP BY dev, op")
        assert {(d, n, t) for d, op, n, t, _ in rows if op == "kernel"} == {(d, kernels[d], ktime[d]) for d in kernels}
        assert {(d, n, b) for d, op, n, _, b in rows if op == "copy"} == {(d, copies[d], cbytes[d]) for d in copies}
        threads = raw(path, f"SELECT tid, COUNT(*), SUM(end - start) FROM ({nvtx_sql(path)}) GROUP BY tid")
        assert set(threads) == {(t, nvtx[t], ntime[t]) for t in nvtx}
        rank = doc["ranks"][pos]
        assert rank["events"] == rank["kept"] == sum(kernels.values()) + sum(copies.values()) + sum(nvtx.values())
        assert rank["left_out"] == 0


def test_ring_header_data_names_each_export_its_gpu_and_the_utc_origin(ring_files: list[Path],
                                                                      ring_page: tuple[Path, Path]) -> None:
    doc = page_doc(ring_page[0])
    firsts = []
    for r, path in enumerate(ring_files):
        (dev,), = raw(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        gpu = raw(path, "SELECT name FROM TARGET_INFO_GPU WHERE cuDevice = ? AND smCount > 0", (dev,))
        rank = doc["ranks"][r]
        assert (rank["rank"], rank["label"], rank["gpus"]) == (r, path.name, sorted({g for (g,) in gpu}))
        (first,), = raw(path, f"SELECT MIN(start) FROM ({gpu_ops_sql(path)} UNION ALL "
                              f"SELECT 0, start, end, 'nvtx', NULL FROM ({nvtx_sql(path)}))")
        firsts.append(first)
    # these exports are on the UTC epoch already (nanoseconds): time 0 is the earliest event of all six
    origin = min(firsts)
    assert doc["clock"]["anchored"] and doc["clock"]["origin_utc"].startswith("2024-09-19 ")
    assert doc["clock"]["origin_utc"].endswith(f".{origin % 10**9:09d} UTC")
    assert [r["first_ns"] for r in doc["ranks"]] == [f - origin for f in firsts]


# -- (2) headless Chromium: the page offline, its header, lanes, hover and hit test ----------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright, resolving no host name (one per module)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; the browser itself comes from apt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Opened:
    """A page opened from file:// whose every other request is aborted; what it reported is kept."""

    def __init__(self, browser: Any, path: Path, width: int = 1600, height: int = 1000) -> None:
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_function("window.nsysTimeline && window.nsysTimeline.ready", timeout=15_000)

    def _route(self, r: Any) -> None:
        if r.request.url.startswith(LOCAL):
            r.continue_()
        else:
            self.blocked.append(r.request.url)
            r.abort()

    def js(self, expr: str, arg: Any = None) -> Any:
        return self.page.evaluate(expr, arg)

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).inner_text())

    def tooltip_at(self, lane: int, index: int) -> str:
        self.js("([l, i]) => nsysTimeline.locate(l, i)", [lane, index])
        # scroll events come a frame later (and hide the tooltip): let them pass, then point
        self.js("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        pt = self.js("([l, i]) => nsysTimeline.locate(l, i)", [lane, index])
        self.page.mouse.move(pt["x"], pt["y"])
        assert self.js("!document.getElementById('tl-tooltip').hidden")
        return self.text("#tl-tooltip")


def screenshot(html: Path, png: Path, width: int = 1600, height: int = 1000) -> None:
    """``chromium --headless --screenshot`` of the page (the CLI, not Playwright: what a user's script would do)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        subprocess.run([CHROMIUM, "--headless", *CHROMIUM_ARGS, "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size={width},{height}", "--virtual-time-budget=5000", f"--screenshot={png}",
                        html.resolve().as_uri()], check=True, capture_output=True, timeout=120)


def rgb_pixels(png: Path) -> list[tuple[int, int, int]]:
    from PIL import Image

    with Image.open(png) as im:
        data = im.convert("RGB").tobytes()
    return list(zip(data[0::3], data[1::3], data[2::3], strict=True))


def coloured_pixels(png: Path) -> int:
    """Pixels of a saturated colour (slices, legend), not the greys and whites of an empty page."""
    return sum(1 for p in rgb_pixels(png) if max(p) - min(p) > 40)


def colour_pixels(png: Path, rgb: tuple[int, int, int]) -> int:
    return sum(1 for p in rgb_pixels(png) if all(abs(a - b) <= 6 for a, b in zip(p, rgb, strict=True)))


@pytest.mark.browser
@pytest.mark.slow
def test_ring_page_in_headless_chromium(browser: Any, ring_files: list[Path], ring_page: tuple[Path, Path],
                                        tmp_path: Path) -> None:
    html = ring_page[0]
    doc = page_doc(html)
    view = Opened(browser, html)
    try:
        summary = view.js("nsysTimeline.summary()")
        assert [(x["rank"], x["name"], x["events"]) for x in summary["lanes"]] == \
            [(doc["ranks"][x["rank"]]["rank"], x["name"], x["n"]) for x in doc["lanes"]]
        assert [r["label"] for r in summary["ranks"]] == [p.name for p in ring_files]
        total = sum(r["events"] for r in doc["ranks"])
        head = view.text("#tl-summary")
        assert f"6 exports · {total:,} of {total:,} events shown" in head and "time 0 = 2024-09-19" in head
        rows = view.js("[...document.querySelectorAll('#tl-exports tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
        assert [(r[0], r[1], r[3]) for r in rows] == [(str(i), f"report_{i}.sqlite", "NVIDIA GeForce RTX 3090")
                                                      for i in range(6)]
        assert "UTC epoch" in view.text("#tl-notes") and "every slice is drawn" in view.text("#tl-notes")
        legend = view.text("#tl-legend")
        assert all(k in legend for k in ("NCCL kernel", "memcpy / memset", "NVTX range"))
        assert view.js("document.querySelectorAll('#tl-lanes tbody tr').length") == len(doc["lanes"])
        # each rank's NCCL kernel: the hit test and the tooltip name it, with its start and duration from SQL;
        # these exports are on the UTC epoch already, so page time is the raw start minus the first of all
        t0 = min(raw(p, f"SELECT MIN(start) FROM ({gpu_ops_sql(p)} UNION ALL SELECT 0, start, end, 'nvtx', NULL "
                        f"FROM ({nvtx_sql(p)}))")[0][0] for p in ring_files)
        for r, path in enumerate(ring_files):
            (start, end, name), = raw(path, "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                            "JOIN StringIds s ON s.id = k.demangledName")
            lane = next(i for i, x in enumerate(doc["lanes"]) if doc["ranks"][x["rank"]]["rank"] == r
                        and "nccl" in [doc["cats"][c] for c in x["c"]])
            hit = view.js("([l, t]) => nsysTimeline.hitTest(l, t)", [lane, (start + end) / 2 - t0])
            assert (hit["kind"], hit["name"], hit["cat"], hit["rank"]) == ("slice", name, "nccl", r)
            assert (hit["start"], hit["dur"]) == (start - t0, end - start)
            tip = view.tooltip_at(lane, hit["index"])
            assert tip.startswith(name) and f"NCCL kernel · rank {r} · " in tip
            assert f"duration {(end - start) / 1e3:,.3f} µs" in tip or f"duration {(end - start) / 1e6:,.3f} ms" in tip
        # a copy's tooltip gives its bytes (SQL's)
        path = ring_files[0]
        (start, end, nbytes, dev, stream), = raw(path, "SELECT start, end, bytes, deviceId, streamId FROM "
                                                       "CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start LIMIT 1")
        lane = next(i for i, x in enumerate(doc["lanes"]) if x["rank"] == 0 and x["tid"] == GPU_TID + dev * 1000 + stream)
        hit = view.js("([l, t]) => nsysTimeline.hitTest(l, t)", [lane, (start + end) / 2 - t0])
        assert hit["bytes"] == nbytes and hit["cat"] == "memory"
        assert f"bytes {nbytes:,} B" in view.tooltip_at(lane, hit["index"])
        # zoom with the wheel at the middle, then pan by dragging: the view follows
        box = view.page.locator("#tl-canvas").bounding_box()
        before = view.js("nsysTimeline.view()")
        view.page.mouse.move(box["x"] + 240 + (box["width"] - 240) / 2, box["y"] + 200)
        view.page.mouse.wheel(0, -600)
        view.page.wait_for_function("([a, b]) => nsysTimeline.view().end - nsysTimeline.view().start < (b - a) / 2",
                                    arg=[before["start"], before["end"]])
        zoomed = view.js("nsysTimeline.view()")
        view.page.mouse.down()
        view.page.mouse.move(box["x"] + 240 + (box["width"] - 240) / 2 - 200, box["y"] + 200, steps=4)
        view.page.mouse.up()
        panned = view.js("nsysTimeline.view()")
        assert panned["start"] > zoomed["start"]
        assert abs((panned["end"] - panned["start"]) - (zoomed["end"] - zoomed["start"])) < 1e-3 * (zoomed["end"] - zoomed["start"])
        assert view.errors == [] and view.blocked == []
    finally:
        view.page.close()
    # the chromium CLI's screenshot is not blank: the NCCL red and the NVTX colour are drawn
    png = tmp_path / "ring.png"
    screenshot(html, png)
    assert colour_pixels(png, (0xE4, 0x57, 0x56)) > 20  # the NCCL kernels' red
    assert coloured_pixels(png) > 20_000  # the NVTX ranges and the slices: a blank page has none
    keep = os.environ.get("MYUTILS_REPORT_SCREENSHOTS")
    if keep:  # the docs' picture: tall enough for all six ranks
        Path(keep).mkdir(parents=True, exist_ok=True)
        screenshot(html, Path(keep) / "nsys_timeline_html.png", 1600, 1400)


# -- (3) names from the export stay text ------------------------------------------------------


def evil_export(real_fixtures: Any, folder: Path) -> tuple[Path, str]:
    """A copy of rank 0 of the ring whose NCCL kernel and NVTX ranges are named with markup, in a file named so too."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rank0_<img src=x onerror=alert(1)>.sqlite"
    shutil.copyfile(ring(real_fixtures, folder / "ring")[0], path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE StringIds SET value = ? WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)",
                 (EVIL,))
    conn.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text IS NOT NULL", ("nvtx " + EVIL,))
    conn.commit()
    conn.close()
    return path, EVIL


def test_markup_in_names_is_escaped_in_the_file(real_fixtures: Any, tmp_path: Path) -> None:
    path, evil = evil_export(real_fixtures, tmp_path)
    html = tmp_path / "evil.html"
    assert run(str(path), "--html", str(html)).exit_code == 0
    text = html.read_text(encoding="utf-8")
    assert "<img" not in text and "onerror" in text  # the name is there, as escaped JSON
    assert text.count("</script>") == 2 and text.count("<script") == 2  # the data block and the code, nothing more
    doc = page_doc(html)
    assert evil in doc["names"] and "nvtx " + evil in doc["names"] and doc["ranks"][0]["label"] == path.name


@pytest.mark.browser
@pytest.mark.slow
def test_markup_in_names_stays_inert_in_chromium(browser: Any, real_fixtures: Any, tmp_path: Path) -> None:
    path, evil = evil_export(real_fixtures, tmp_path)
    html = tmp_path / "evil.html"
    assert run(str(path), "--html", str(html)).exit_code == 0
    doc = page_doc(html)
    view = Opened(browser, html)
    try:
        assert view.js("window.__pwned === undefined && document.querySelectorAll('img').length === 0")
        assert view.js("document.scripts.length") == 2
        k = doc["names"].index(evil)
        lane, index = next((li, i) for li, x in enumerate(doc["lanes"]) for i, n in enumerate(x["k"]) if n == k)
        tip = view.tooltip_at(lane, index)
        assert tip.startswith(evil)  # shown as text, character for character
        assert view.js("document.querySelector('#tl-exports tbody td:nth-child(2)').textContent") == path.name
        assert view.js("window.__pwned === undefined && document.querySelectorAll('img').length === 0")
        assert view.errors == [] and view.blocked == []
    finally:
        view.page.close()


@settings(derandomize=True, database=None, max_examples=200)
@given(st.text(alphabet=st.sampled_from(["<", ">", "/", "!", "-", "&", "s", "c", "r", "i", "p", "t", "\u2028", "é", "\\",
                                          '"', " "]), max_size=40))
def test_script_json_never_closes_its_block_and_reads_back(name: str) -> None:
    text = script_json(json.dumps({"names": [name, f"</script>{name}<!--"]}, ensure_ascii=False))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["names"][0] == name


# -- (4) the size bound: what is left out, what is binned, and the file's size ---------------


def test_max_events_is_shared_with_the_trace_and_the_header_data_says_what_went(ring_files: list[Path],
                                                                                tmp_path: Path) -> None:
    html, trace = tmp_path / "t.html", tmp_path / "t.json"
    spec = str(ring_files[0].parent / "report_%q{RANK}.sqlite")
    res = run(spec, "--html", str(html), "--output", str(trace), "--max-events", "600")
    assert res.exit_code == 0, res.output
    doc, (tlanes, other) = page_doc(html), trace_lanes(trace)
    assert doc["max_events"] == 600 and doc["per_rank"] == 100
    for pos, path in enumerate(ring_files):
        (total,), = raw(path, f"SELECT COUNT(*) FROM ({gpu_ops_sql(path)} UNION ALL "
                              f"SELECT 0, start, end, 'nvtx', NULL FROM ({nvtx_sql(path)}))")
        rank = doc["ranks"][pos]
        assert rank["events"] == total and rank["kept"] == min(total, 100) and rank["left_out"] == total - rank["kept"]
        assert other["truncated"].get(str(pos), 0) == rank["left_out"]
    assert {k: x["n"] for k, x in page_lanes(doc).items()} == {k: len(v) for k, v in tlanes.items()}
    assert f"{sum(r['left_out'] for r in doc['ranks'])} left out by --max-events" in res.output


def test_sub_pixel_slices_go_to_density_bins_and_every_count_stays(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / MFU
    page = TimelinePage(max_slices=2000)
    read_timeline([path], [page])
    out = tmp_path / "binned.html"
    page.write(out)
    doc = page_doc(out)
    bins = doc["bins"]
    below, width = bins["below_ns"], bins["width_ns"]
    unit = -(-doc["span_ns"] // bins["full_view_px"])
    assert bins["mode"] == "auto" and width == bins["pixels"] * unit >= below and bins["pixels"] >= 1
    individual = sum(len(x["s"]) for x in doc["lanes"])
    assert individual + bins["slices"] == doc["events"]
    # the longest 2000 stay (fewer only by ties at the cut), and what went to bins is what SQL finds shorter
    durations = sorted((d for (d,) in raw(path, f"SELECT end - start FROM ({gpu_ops_sql(path)} UNION ALL SELECT 0, "
                                                f"start, end, 'nvtx', NULL FROM ({nvtx_sql(path)}))")), reverse=True)
    longest_binned = max(d for d in durations if d < below)
    assert individual == sum(1 for d in durations if d >= below) <= 2000 < sum(1 for d in durations if d >= longest_binned)
    assert bins["slices"] == sum(1 for d in durations if d < below)
    for lane in doc["lanes"]:
        b = lane.get("bins", {"n": [], "d": [], "i": []})
        assert lane["n"] == len(lane["s"]) + sum(b["n"])
        assert lane["dur_ns"] == sum(lane["d"]) + sum(b["d"])
        assert all(d >= below for d in lane["d"])
        assert len(b["i"]) <= lane["rows"] * (bins["full_view_px"] + 1)  # bounded by the lane, not its events
    assert bins["lanes"] == sum(1 for x in doc["lanes"] if x.get("bins"))
    # always: every slice below one full-view pixel goes, whatever the count
    always = TimelinePage(bins="always")
    read_timeline([path], [always])
    a = always.data()["bins"]
    assert a["below_ns"] == a["width_ns"] == unit and a["slices"] == sum(1 for d in durations if d < unit)


def scaled_export(real_fixtures: Any, folder: Path, copies: int) -> Path:
    """A real export with its kernels and NVTX ranges repeated ``copies`` times after each other (a long run)."""
    path = folder / "scaled.sqlite"
    shutil.copyfile(real_fixtures / MFU, path)
    conn = sqlite3.connect(path)
    (lo, hi), = conn.execute("SELECT MIN(start), MAX(end) FROM (SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                             "UNION ALL SELECT start, end FROM NVTX_EVENTS WHERE end IS NOT NULL)").fetchall()
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS"):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        shifted = ", ".join(f"{c} + :shift" if c in ("start", "end") else c for c in cols)
        for k in range(1, copies):
            conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {shifted} FROM {table} WHERE start <= :hi",
                         {"shift": k * (hi - lo + 1000), "hi": hi})
    conn.commit()
    conn.close()
    return path


@pytest.mark.slow
def test_a_large_export_gives_a_page_under_20_mb_that_says_what_it_binned(real_fixtures: Any, tmp_path: Path) -> None:
    path = scaled_export(real_fixtures, tmp_path, copies=14)
    html = tmp_path / "big.html"
    res = run(str(path), "--html", str(html))
    assert res.exit_code == 0, res.output
    doc = page_doc(html)
    total = doc["ranks"][0]["events"]
    assert total > MAX_SLICES and doc["events"] == total  # every event is in the page, drawn or binned
    assert sum(len(x["s"]) for x in doc["lanes"]) <= MAX_SLICES < total
    assert doc["bins"]["slices"] > 0 and f"{doc['bins']['slices']} in density bins" in res.output
    assert html.stat().st_size < 20_000_000


@pytest.mark.browser
@pytest.mark.slow
def test_header_says_what_was_left_out_and_binned(browser: Any, ring_files: list[Path], tmp_path: Path) -> None:
    html = tmp_path / "cut.html"
    res = run(str(ring_files[0].parent / "report_%q{RANK}.sqlite"), "--html", str(html), "--max-events", "600",
              "--bins", "always")
    assert res.exit_code == 0, res.output
    doc = page_doc(html)
    view = Opened(browser, html)
    try:
        notes = view.text("#tl-notes")
        for r in doc["ranks"]:
            line = (f"rank {r['rank']} (report_{r['rank']}.sqlite): {r['left_out']:,} of {r['events']:,} events left "
                    "out: --max-events 600 keeps each rank's first 100 events in start order")
            assert (line in notes) == bool(r["left_out"]), line
        assert f"{doc['bins']['slices']:,} slices shorter than " in notes and "--bins always" in notes
        assert "density bin" in view.text("#tl-legend")
        # a bin answers the hit test with its count
        lane = next(i for i, x in enumerate(doc["lanes"]) if x.get("bins"))
        b = doc["lanes"][lane]["bins"]
        hit = view.js("([l, t, z]) => nsysTimeline.hitTest(l, t, z)",
                      [lane, (b["i"][0] + 0.5) * doc["bins"]["width_ns"], b["z"][0]])
        assert hit["kind"] in ("bin", "slice")
        if hit["kind"] == "bin":
            assert (hit["count"], hit["busy"]) == (b["n"][0], b["d"][0])
        assert view.errors == []
    finally:
        view.page.close()


# -- (5) bad input: one line, exit 2, nothing written -----------------------------------------


def damaged_mid_stream(ring_files: list[Path], folder: Path) -> Path:
    """Rank 1 with the page holding an NVTX range's name (read only while streaming) overwritten."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ring_files[0], folder / "report_0.sqlite")
    src = ring_files[3]
    (name,), = raw(src, "SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
                        "WHERE n.eventType IN (59, 60) LIMIT 1")
    (size,), = raw(src, "PRAGMA page_size")
    data = bytearray(src.read_bytes())
    at = data.find(name.encode()) // size * size
    assert at > 0
    data[at:at + size] = b"\xff" * size
    bad = folder / "report_1.sqlite"
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("kind", ["text", "truncated", "missing", "damaged mid-stream"])
def test_bad_input_is_one_line_exit_2_and_nothing_written(kind: str, ring_files: list[Path], tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    if kind == "text":
        bad = inputs / "report.sqlite"
        bad.write_text("Generating SQLite file report.sqlite\nProcessing [====] 100%\n")
        spec = str(bad)
    elif kind == "truncated":
        bad = inputs / "report.sqlite"
        bad.write_bytes(ring_files[3].read_bytes()[:200_000])
        spec = str(bad)
    elif kind == "missing":
        bad = spec_path = inputs / "absent.sqlite"
        spec = str(spec_path)
    else:
        bad = damaged_mid_stream(ring_files, inputs)
        spec = str(inputs / "report_%q{RANK}.sqlite")
    out = tmp_path / "out"
    res = run(spec, "--html", str(out / "t.html"), "--output", str(out / "t.json.gz"))
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in res.output
    assert not out.exists()  # neither file, no temporary, not even the folder made for them
    if kind == "damaged mid-stream":
        # it failed after rank 0 had gone to the outputs: at rank 1's check of its StringIds, which reads every
        # page of the table before any of its rows is used
        assert "report_1.sqlite:table StringIds" in lines[0]


def test_usage_errors(ring_files: list[Path], tmp_path: Path) -> None:
    res = run(str(ring_files[0]))
    assert res.exit_code == 2 and "--output" in res.output and "--html" in res.output
    res = run(str(ring_files[0]), "--html", str(tmp_path / "t.html"), "--bins", "sometimes")
    assert res.exit_code == 2 and "--bins 'sometimes'" in res.output and not (tmp_path / "t.html").exists()
    res = run(str(ring_files[0]), "--html", str(ring_files[0]))
    assert res.exit_code == 2 and "would replace the input" in res.output
    res = run(str(ring_files[0]), "--html", str(tmp_path / "same"), "--output", str(tmp_path / "same"))
    assert res.exit_code == 2 and "same output file" in res.output


# -- the README's section runs as written -------------------------------------------------------


def test_the_readme_timeline_commands_run(ring_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    readme = Path(__file__).resolve().parent.parent / "README.md"
    section = readme.read_text(encoding="utf-8").split("## Nsight Systems timelines (`nsys timeline`)", 1)[1]
    (block,) = re.findall(r"```bash\n(.*?)```", section.split("\n## ", 1)[0], flags=re.S)
    commands = [line for line in block.splitlines() if line.startswith("myutils-profile ")]
    assert len(commands) == 3
    (tmp_path / "run").mkdir()
    for path in ring_files:
        shutil.copyfile(path, tmp_path / "run" / path.name)
    monkeypatch.chdir(tmp_path)
    for command in commands:
        res = CliRunner().invoke(app, shlex.split(command)[1:])
        assert res.exit_code == 0, (command, res.output)
    assert page_doc(tmp_path / "timeline.html")["events"] == trace_lanes(tmp_path / "timeline.json.gz")[1]["events"]
    assert len(page_doc(tmp_path / "timeline.html")["ranks"]) == 6
