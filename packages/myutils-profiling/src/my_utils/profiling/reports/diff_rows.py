"""What the Markdown and HTML pages of a diff show, computed once: rows in display order, numbers as text.

A change nested in another listed change (``DiffResult.folded``: ``aten::_local_scalar_dense``
inside ``aten::item``) comes right under its ancestor with a depth, so the same milliseconds
are never listed as two separate slow-downs; the top-level rows are the ones counted. Names
are cut in the middle to ``NAME_CHARS`` (both ends of a name tell most), around where they
differ when two cuts would read alike (``reports.names.distinct_cuts``); the full name stays in
the JSON and in the HTML's hover text. The GPU-level table and the step-time accounting are
formatted here too. Nothing here escapes: each renderer escapes for its format.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import one_line
from my_utils.profiling.kineto.read.context import PLACE_KEYS

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff_gpu import GpuRow
    from my_utils.profiling.analysis.diff_model import DiffResult, OpChange, OpStats

NAME_CHARS = 80
#: Labels of the hardware fields, in the order the pages list them.
HARDWARE_LABELS: dict[str, str] = {
    "gpu": "GPU", "gpu_count": "GPUs visible", "gpu_memory_gib": "GPU memory (GiB)",
    "compute_capability": "compute capability", "sms": "SMs", "world_size": "world size", "rank": "rank", "ranks": "ranks",
    "backend": "backend", "torch": "torch", "cuda_runtime": "CUDA runtime", "cuda_driver": "CUDA driver",
    "cupti": "CUPTI", "nccl": "NCCL", "host": "host", "hosts": "hosts", "cpu": "CPU", "cpu_count": "CPUs",
    "machine": "machine",
}


def one_line_text(text: str) -> str:
    """``text`` on one line, control characters as spaces."""
    return "".join(" " if (ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0) else ch for ch in one_line(str(text)))


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    """Prose (a warning, a label) on one line, cut to ``limit`` characters with an ellipsis at the end."""
    text = one_line_text(name)
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def name_labels(names: list[str], limit: int = NAME_CHARS) -> list[str]:
    """Display labels of names listed together: one line, cut in the middle, distinct where the names are."""
    from my_utils.profiling.reports.names import distinct_cuts

    return distinct_cuts([one_line_text(n) for n in names], limit)


def number(value: float, digits: int = 3) -> str:
    """``value`` with thousands separators and ``digits`` decimals."""
    return f"{value:,.{digits}f}"


def stats_text(s: OpStats | None) -> str:
    """``mean ± std unit`` of one side, or an en dash when the name is absent there."""
    if s is None:
        return "–"
    unit = f" {s.unit}" if s.unit else ""
    return f"{number(s.mean)} ± {number(s.std)}{unit}"


def pct_text(c: OpChange) -> str:
    """The change in percent of the base, ``new``/``gone`` for names on one side only."""
    if c.base is None:
        return "new"
    if c.target is None:
        return "gone"
    return f"{c.delta_pct:+.1f}%" if c.delta_pct is not None else "n/a"


def count_text(value: float) -> str:
    """A count delta per step, signed, at most 3 decimals."""
    text = f"{value:+,.3f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "+0", "-0") else text


@dataclass(frozen=True)
class DiffRow:
    """One displayed change: ``depth`` 0 for a counted change, 1+ for one nested in the row above."""

    name: str  # the full name
    shown: str  # cut, one line
    depth: int
    status: str
    base: str
    target: str
    delta: str
    pct: str
    count: str
    change: OpChange


def rows(result: DiffResult, limit: int) -> tuple[list[DiffRow], int, int]:
    """Up to ``limit`` rows of the listed changes (``DiffResult.largest``), nested ones under their ancestor.

    Returns ``(rows, top-level changes, nested changes)`` counted over all listed changes.
    """
    listed = result.largest()
    folded = result.folded()
    children: dict[str, list[OpChange]] = defaultdict(list)
    for c in listed:
        if c.name in folded:
            children[folded[c.name]].append(c)
    order: list[tuple[OpChange, int]] = []

    def add(c: OpChange, depth: int) -> None:
        if len(order) >= limit:
            return
        order.append((c, depth))
        for child in children.get(c.name, []):
            add(child, depth + 1)

    top = [c for c in listed if c.name not in folded]
    for c in top:
        add(c, 0)
    labels = name_labels([c.name for c, _ in order])
    out = []
    for (c, depth), label in zip(order, labels, strict=True):
        unit = f" {c.unit}" if c.unit else ""
        out.append(DiffRow(c.name, label, depth, c.status, stats_text(c.base), stats_text(c.target),
                           f"{c.delta:+,.3f}{unit}", pct_text(c), count_text(c.count_delta), c))
    return out, len(top), len(listed) - len(top)


def listing_line(result: DiffResult, top: int, nested: int) -> str:
    """The sentence above the rows: how many, of what, and the rule that picked them."""
    settings = result.settings
    nested_text = f", {nested} more nested in them (listed under their parent, counted once)" if nested else ""
    if result.descriptive:
        return (f"{top} largest change(s) among {len(result.changes)} names{nested_text}: descriptive, not judged "
                f"(one sample per side; at least {settings.get('min_pct', 5):g}% of the base).")
    unmeasured = sum(1 for c in result.changes if not c.measured)
    left = f"; {unmeasured} name(s) seen in one sample on a side are not judged" if unmeasured else ""
    return (f"{top} significant change(s) among {len(result.changes)} names{nested_text} "
            f"(> {settings.get('sigmas', 3):g} standard errors of the spread {result.sampling} and "
            f"> {settings.get('min_pct', 5):g}% of the base{left}).")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def gpu_table(result: DiffResult) -> list[tuple[str, str, str, str]]:
    """The GPU-level before → after as text: ``(label, base, target, change)``, shares of the GPU span in brackets."""
    out = []
    for r in result.gpu_rows:
        out.append((r.label, _cell(r, r.base, r.base_share), _cell(r, r.target, r.target_share), _delta(r)))
    return out


def _cell(r: GpuRow, value: float | None, share: float | None) -> str:
    if value is None:
        return "–"
    if r.unit == "":
        return f"{value:,.0f}"
    of = "of communication" if r.key == "overlap" else "of span"
    return f"{value:,.1f} {r.unit}" + (f" ({share:.1f}% {of})" if share is not None else "")


def _delta(r: GpuRow) -> str:
    d = r.delta
    if d is None:
        return "–"
    text = f"{d:+,.0f}" if r.unit == "" else f"{d:+,.1f} {r.unit}"
    if r.base_share is not None and r.target_share is not None:
        text += f" ({r.target_share - r.base_share:+.1f} points)"
    return text


def accounting_rows(result: DiffResult) -> list[tuple[str, str, str, str, str]]:
    """The step-time change by cause: ``(part, base, target, change, judged)`` with the remainder and the total last."""
    acc = result.accounting
    if acc is None:
        return []
    out = []
    for c in acc.causes:
        judged = ("significant" if c.significant else "within noise") if acc.measured else "not judged"
        out.append((c.label, _ms(c.base.mean), _ms(c.target.mean), f"{c.delta:+,.1f}", judged))
    if acc.window == "capture":
        out.append(("GPU span (the capture, summed over GPUs)", _ms(acc.base), _ms(acc.target), f"{acc.delta:+,.1f}",
                    "one capture per side"))
        return out
    out.append(("remainder (step time measured elsewhere minus the GPU windows)", "", "", f"{acc.remainder:+,.1f}",
                ""))
    out.append((f"{acc.window} time ({acc.unit})", _ms(acc.base), _ms(acc.target), f"{acc.delta:+,.1f}",
                f"{acc.samples[0]} and {acc.samples[1]} {acc.window}s" if acc.measured else "one sample per side"))
    return out


def accounting_title(result: DiffResult) -> str:
    """The heading of the accounting table: per step or iteration, or the capture's GPU span by part."""
    acc = result.accounting
    if acc is None or acc.window == "capture":
        return "The GPU span by part (one capture per side: not judged)"
    return f"The {acc.window}-time change by cause"


def step_line(result: DiffResult) -> str | None:
    """``77.491 ms → 124.067 ms (+60.1%, significant; noise ±39.450 ms)``, or None without steps on both sides."""
    step = result.step_time
    if step is None or step.base is None or step.target is None:
        return None
    unit = f" {step.base.unit}" if step.base.unit else ""
    if not step.measured:
        return (f"{number(step.base.mean)}{unit} → {number(step.target.mean)}{unit} ({pct_text(step)}; "
                f"{step.base.steps} and {step.target.steps} sample(s): not judged)")
    verdict = "significant" if step.significant else "within noise"
    return (f"{number(step.base.mean)}{unit} → {number(step.target.mean)}{unit} ({pct_text(step)}, {verdict}; "
            f"noise ±{number(step.noise)}{unit}; {step.base.steps} and {step.target.steps} samples)")


def energy_line(result: DiffResult) -> str | None:
    """The GPU monitor's energy per step, base → target (as ``step_line``), or None unless both sides measured it."""
    energy = result.energy
    if energy is None or energy.base is None or energy.target is None:
        return None
    judged = (f"{'significant' if energy.significant else 'within noise'}; noise ±{number(energy.noise)} J"
              if energy.measured else "not judged")
    return (f"{number(energy.base.mean)} J → {number(energy.target.mean)} J per step ({pct_text(energy)}, {judged}; "
            f"{energy.base.steps} and {energy.target.steps} steps)")


def hardware_rows(result: DiffResult) -> list[tuple[str, str, str, bool]]:
    """``(label, base, target, differs)`` for every hardware field either side knows."""
    a, b = result.base_hardware, result.target_hardware
    keys = [k for k in HARDWARE_LABELS if k in a or k in b]
    keys += [k for k in dict.fromkeys([*a, *b]) if k not in HARDWARE_LABELS and k != "rank_source"]
    out = []
    for key in keys:
        va, vb = a.get(key), b.get(key)
        differs = va is not None and vb is not None and va != vb and key not in PLACE_KEYS
        out.append((HARDWARE_LABELS.get(key, key), _value(va), _value(vb), differs))
    return out


def _value(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)
