"""The one line every view of a diff leads with: what changed at the GPU level, why, and whether it is like for like.

Built from the result's facts, never from a page: the terminal, the Markdown, the HTML
page, the JSON and the CI gate's message all print this same string. It reads, in order:

1. the step-time change accounted for by cause (``+46.6 ms/step (77.5 → 124.1 ms): +44.3 ms
   compute (GPU 84% → 96% busy), +12.9 ms other GPU work …; remainder 0.0 ms``); for a
   capture without steps, the GPU idle change leads, since the windows' lengths are the
   capture's and say nothing;
2. the kernel whose total time changed most, split into its per-launch change and its
   launch-count change (``flash_fwd_kernel: 4.005 → 4.013 ms per launch, 68 → 60 launches``);
3. how much it rests on (samples per side, or "descriptive: one capture per side");
4. the like-for-like caveat (different GPU, little in common, different window), when any.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff_gpu import StepAccount
    from my_utils.profiling.analysis.diff_model import DiffResult, OpChange

#: Causes named in the headline at most (the JSON holds all four and the remainder).
CAUSES = 3
#: Kernel-name prefixes the diffs use.
KERNEL_PREFIXES = ("kernel:",)


def _ms(value: float, unit: str = "ms") -> str:
    """A signed change with one decimal; a change that rounds to zero has no sign."""
    text = f"{value:+,.1f}"
    return f"{'0.0' if text in ('+0.0', '-0.0') else text.replace('-', '−')} {unit}"


def _account_text(acc: StepAccount, step_pct: float | None) -> str:
    shown = [c for c in acc.causes if abs(c.delta) >= 0.05][:CAUSES] or list(acc.causes[:1])
    parts = []
    for c in shown:
        extra = ""
        if c.key == "compute" and None not in acc.busy_pct:
            extra = f" (GPU {acc.busy_pct[0]:.0f}% → {acc.busy_pct[1]:.0f}% busy)"
        if acc.measured and not c.significant:
            extra += " (within noise)"
        parts.append(f"{_ms(c.delta)} {c.label}{extra}")
    rest = acc.causes[len(shown):]
    others = sum(c.delta for c in rest)
    if rest and abs(others) >= 0.05:
        parts.append(f"{_ms(others)} {' and '.join(c.label for c in rest)}")
    pct = f", {step_pct:+.1f}%" if step_pct is not None else ""
    samples = f", {acc.samples[0]} and {acc.samples[1]} {acc.window}s" if acc.measured else ""
    return (f"{_ms(acc.delta, acc.unit)} ({acc.base:,.1f} → {acc.target:,.1f} ms{pct}{samples}): "
            f"{', '.join(parts)}; remainder {_ms(acc.remainder)}")


def _idle_text(result: DiffResult) -> str | None:
    rows = {r.key: r for r in result.gpu_rows}
    idle, span, busy = rows.get("idle"), rows.get("span"), rows.get("busy")
    if idle is None or span is None or busy is None or idle.base is None or idle.target is None:
        return None
    shares = ""
    if idle.base_share is not None and idle.target_share is not None:
        shares = f", {idle.base_share:.1f}% → {idle.target_share:.1f}% of the GPU span"
    gpus = rows["gpus"]
    over = f" over {gpus.base:.0f} GPUs" if gpus.base == gpus.target and (gpus.base or 0) > 1 else ""
    return (f"GPU idle {_ms(idle.target - idle.base)} ({idle.base:,.1f} → {idle.target:,.1f} ms{shares}{over}); "
            f"busy {busy.base:,.1f} → {busy.target:,.1f} ms of {span.base:,.1f} → {span.target:,.1f} ms")


def kernel_driver(result: DiffResult) -> OpChange | None:
    """The kernel whose total time changed most (per sample), among kernels on both sides."""
    pool = [c for c in result.changes if c.name.startswith(KERNEL_PREFIXES) and c.base and c.target]
    return max(pool, key=lambda c: abs(_total_delta(c))) if pool else None


def _total_delta(c: OpChange) -> float:
    """The change of a name's total time: per-launch means (nsys kernels) times their launches."""
    assert c.base is not None and c.target is not None
    if c.base.source == "nsys":
        return c.target.mean * c.target.count - c.base.mean * c.base.count
    return c.delta


def kernel_label(name: str) -> str:
    """A kernel's identifier for prose: no return type, namespace or parameters, templates as ``<…>``."""
    text = name.removeprefix("void ").strip()
    m = re.match(r"(?:[\w]+::|\(anonymous namespace\)::)*([A-Za-z_]\w*)(<)?", text)
    if m is None:
        return text if len(text) <= 60 else f"{text[:40]}…{text[-19:]}"
    return m.group(1) + ("<…>" if m.group(2) else "")


def _kernel_text(c: OpChange) -> str:
    assert c.base is not None and c.target is not None
    short = kernel_label(c.name.split(":", 1)[1])
    if c.base.source == "nsys":  # per-launch samples: the mean is per launch, the count is launches
        verdict = "changed" if c.significant else "unchanged" if c.measured else "not judged"
        return (f"{short} {c.base.mean:,.3f} → {c.target.mean:,.3f} ms per launch ({verdict}), "
                f"{c.base.count:,.0f} → {c.target.count:,.0f} launches, {_ms(_total_delta(c))} in total")
    ca, cb = c.base.count_per_step, c.target.count_per_step
    per_a = c.base.mean / ca if ca else 0.0
    per_b = c.target.mean / cb if cb else 0.0
    return (f"{short} {_ms(c.delta)} per {result_sample(c)} ({per_a:,.3f} → {per_b:,.3f} ms per launch, "
            f"{ca:,.1f} → {cb:,.1f} launches per {result_sample(c)})")


def result_sample(c: OpChange) -> str:
    """What one sample of a name is: a step for traces and reports."""
    return "step"


def headline(result: DiffResult) -> str:
    """The headline of ``result`` (see the module doc)."""
    acc = result.accounting
    step = result.step_time
    step_pct = step.delta_pct if step is not None else None
    lead: list[str] = []
    if acc is not None and acc.window != "capture":
        lead.append(f"{acc.window.capitalize()} time {_account_text(acc, step_pct)}")
    else:
        if (idle := _idle_text(result)) is not None:
            lead.append(idle)
        if step is not None and step.base and step.target:
            pct = f", {step.delta_pct:+.1f}%" if step.delta_pct is not None else ""
            lead.append(f"step time {step.base.mean:,.1f} → {step.target.mean:,.1f} {step.unit}{pct}")
    if not lead:
        lead.append("No step time and no GPU activity on both sides")
    sim = result.similarity
    driver = kernel_driver(result) if sim is None or not sim.little_in_common else None
    if driver is not None:
        lead.append(f"top kernel change: {_kernel_text(driver)}")
    if result.descriptive:
        lead.append("descriptive: one sample per side, no change judged")
    elif acc is not None and not acc.measured:
        lead.append("GPU figures per capture (one sample per side, not judged)")
    text = "; ".join(lead)
    text = text[:1].upper() + text[1:] + "."
    found = caveats(result)
    return f"Not like for like ({'; '.join(found)}). {text}" if found else text


def caveats(result: DiffResult) -> list[str]:
    """Short like-for-like caveats: the GPU, the world size, the workload, the precision, the window."""
    from my_utils.profiling.kineto.read.context import PLACE_KEYS

    a, b = result.base_hardware, result.target_hardware
    differs = [k for k in a if k in b and k not in PLACE_KEYS and a[k] != b[k]]
    out = []
    if "gpu" in differs:
        out.append(f"different GPU: {a['gpu']} → {b['gpu']}")
    if "world_size" in differs:
        out.append(f"world size {a['world_size']} → {b['world_size']}")
    elif "gpu_count" in differs and "gpu" not in differs:
        out.append(f"GPUs {a['gpu_count']} → {b['gpu_count']}")
    rest = [k for k in differs if k not in ("gpu", "world_size", "gpu_count", "gpu_memory_gib", "compute_capability",
                                            "sms")]
    if rest:
        out.append("different " + ", ".join(k.replace("_", " ") for k in rest[:3]))
    for w in result.warnings:
        if w.startswith("GPU unknown"):  # "GPU model unknown on both sides" (one architecture) is no caveat
            side = "both GPUs" if "both sides" in w else f"{'base' if 'base side' in w else 'target'} GPU"
            differ = "differ" if "the GPUs differ" in w else "may differ" if "may differ" in w else ""
            out.append(f"{side} unknown" + (f", the GPUs {differ}" if differ.endswith("differ") and
                                            "GPUs" in w else ""))
        elif w.startswith("the precision differs"):
            out.append("different precision")
    sim = result.similarity
    if sim is not None and sim.little_in_common:
        out.append(f"little in common: {100 * sim.base_time_shared:.0f}% of the base's {sim.time_of} time in shared "
                   "names")
    if result.window is not None:
        (a0, a1), (b0, b1) = result.window.base, result.window.target
        out.append(f"different capture windows: {result.window.what} {a0}–{a1} vs {b0}–{b1}")
    return out
