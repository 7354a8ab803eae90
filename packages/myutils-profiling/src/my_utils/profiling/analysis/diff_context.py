"""Is a diff like for like? The checks a reader needs before any per-name change: GPU, world size, workload, dtype, window.

Each check returns warnings that say what differs *and what it means for the numbers below*;
the diff puts them first. The checks read what both sides already hold (hardware fields,
per-name times), never the traces again.

- **Workload in common** (:func:`similarity`): the share of the base's time that lies in names
  the target also has. Below :data:`LITTLE_IN_COMMON` most of the base's time is in names the
  target lacks, so no per-name change can explain the step-time change and the two captures
  are different programs, not two versions of one. Time, not name counts: a workload moved to
  another GPU keeps its operators but renames many small kernels (architecture prefixes), so
  the name overlap drops while the time in shared names stays high.
- **GPU unknown** (:func:`gpu_from_kernel_names`): a side without a GPU model is placed by its
  kernel names (``sm80_``, ``ampere_``, ``cutlass_80`` …: the architecture the kernels were
  built for); with no such name the warning says the GPUs may differ. :func:`gpus_differ` is the
  same test as a yes/no (the trace diff's note on matching operations instead of kernel names).
- **dtype** (:func:`dtype_mix`): kernel time by the precision its name states (``bf16``,
  ``fp16``/``h884``, ``sgemm``/``s1688`` …); a different dominant precision changes kernel times
  by itself.
- **Capture window** (:func:`numbered_families`): names that differ only in a module index
  (``blocks.7.``, ``layers.12``) form a family; when a family covers different indices on the
  two sides, the captures hold different parts of the model, and its members are one name
  (the index replaced by ``#``) rather than a list of added and removed ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Below this share of the base's time in shared names, the workloads have little in common.
LITTLE_IN_COMMON = 0.5
#: A family needs this many indices on a side to count as a window (two could be a coincidence).
MIN_FAMILY = 3
#: A precision is dominant when it holds at least this share of the kernel time a precision was read for...
DTYPE_DOMINANT = 0.5
#: ...and precisions are compared only when names state one for at least this share of kernel time.
DTYPE_READ = 0.2

_ARCH = (  # (pattern on a kernel name, architecture, compute capability)
    (re.compile(r"(?:^|[^a-z0-9])sm_?100(?!\d)|blackwell", re.I), "Blackwell", "sm100"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?90a?(?!\d)|hopper|cutlass_90(?!\d)|nvjet", re.I), "Hopper", "sm90"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?89(?!\d)|ada_", re.I), "Ada", "sm89"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?8[06](?!\d)|ampere_|cutlass_8[06](?!\d)", re.I), "Ampere", "sm80"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?75(?!\d)|turing_|cutlass_75(?!\d)", re.I), "Turing", "sm75"),
    (re.compile(r"(?:^|[^a-z0-9])sm_?7[02](?!\d)|volta_|cutlass_70(?!\d)", re.I), "Volta", "sm70"),
)
_GPU_ARCH = (  # (pattern on a GPU model name, architecture)
    (re.compile(r"B200|B100|GB200", re.I), "Blackwell"), (re.compile(r"H100|H200|H800|GH200", re.I), "Hopper"),
    (re.compile(r"L4\b|L40|RTX 40|RTX 6000 Ada", re.I), "Ada"),
    (re.compile(r"A100|A800|A10\b|A30|A40|A6000|RTX 30", re.I), "Ampere"),
    (re.compile(r"T4\b|RTX 20|Quadro RTX", re.I), "Turing"), (re.compile(r"V100|Titan V", re.I), "Volta"),
)
_DTYPES = (  # (pattern, precision); first match wins. TF32 is fp32 data (a math mode): one precision here
    (re.compile(r"fp8|e4m3|e5m2", re.I), "fp8"),
    (re.compile(r"bf16|bfloat16", re.I), "bf16"),
    (re.compile(r"fp16|f16|half|h884|h1688|h16816|hgemm|_h\d{3,5}gemm", re.I), "fp16"),
    (re.compile(r"int8|i8i8|imma", re.I), "int8"),
    (re.compile(r"tf32|s1688|s16816|1688gemm|sgemm|fp32|f32|float\b|s884", re.I), "fp32"),
)
# kernels whose name states the precision of the math (matrix products, convolutions, attention)
_MATMUL = re.compile(r"gemm|conv|attention|attn|flash|cutlass|cublas|xmma|wgmma|hmma|imma|nvjet|sm\d{2,3}_", re.I)
_COMM_NAME = re.compile(r"nccl|rccl", re.I)
_INDEX = re.compile(r"(?<=[A-Za-z_])\.(\d+)(?=[._)\s]|$)")


@dataclass(frozen=True)
class Similarity:
    """Names and time the two sides have in common."""

    base_names: int
    target_names: int
    shared_names: int
    base_time_shared: float  # share (0..1) of the base's time in names the target also has
    target_time_shared: float
    base_kernels: int = 0
    shared_kernels: int = 0
    time_of: str = "operator"  # what the time shares are of

    @property
    def jaccard(self) -> float:
        """Shared names over all names of either side."""
        union = self.base_names + self.target_names - self.shared_names
        return self.shared_names / union if union else 1.0

    @property
    def little_in_common(self) -> bool:
        """Less than :data:`LITTLE_IN_COMMON` of the base's time lies in shared names."""
        return self.base_time_shared < LITTLE_IN_COMMON

    def to_dict(self) -> dict[str, Any]:
        """JSON."""
        return {"base_names": self.base_names, "target_names": self.target_names, "shared_names": self.shared_names,
                "jaccard": self.jaccard, "base_time_shared": self.base_time_shared,
                "target_time_shared": self.target_time_shared, "base_kernels": self.base_kernels,
                "shared_kernels": self.shared_kernels, "little_in_common": self.little_in_common,
                "time_of": self.time_of,
                "threshold": LITTLE_IN_COMMON}

    def describe(self) -> str:
        """``52 of 448 names in common (Jaccard 0.12), 28% of the base's time in shared names``."""
        kernels = f", {self.shared_kernels} of {self.base_kernels} base kernel names" if self.base_kernels else ""
        return (f"{self.shared_names} of {self.base_names + self.target_names - self.shared_names} names in common "
                f"(Jaccard {self.jaccard:.2f}{kernels}), {100 * self.base_time_shared:.0f}% of the base's {self.time_of} "
                "time in shared names")


#: Names whose time measures the workload: the program's operators and labels, the same on any GPU.
HOST_PREFIXES = ("cpu_op:", "annotation:", "nvtx:")


def similarity(base: Mapping[str, float], target: Mapping[str, float], kernel_prefix: str = "kernel:",
               time_prefixes: tuple[str, ...] = HOST_PREFIXES, time_of: str = "operator") -> Similarity:
    """Names and time in common between two ``{name: time}`` maps (times on any one scale per side).

    The time share is over the names starting with ``time_prefixes`` (operators and user
    labels: a kernel is renamed per GPU architecture, an operator is not), or over every
    name when a side has none of them.
    """
    shared = set(base) & set(target)

    def share(side: Mapping[str, float]) -> float:
        names = [n for n in side if n.startswith(time_prefixes)] or list(side)
        total = sum(abs(side[n]) for n in names)
        return sum(abs(side[n]) for n in names if n in shared) / total if total > 0 else float(not side or
                                                                                                 bool(shared))

    kernels = {n for n in base if n.startswith(kernel_prefix)}
    return Similarity(len(base), len(target), len(shared), share(base), share(target), len(kernels),
                      len(kernels & shared), time_of)


def little_in_common_warning(s: Similarity) -> str | None:
    """The warning for two captures of different programs, or None."""
    if not s.little_in_common:
        return None
    return (f"the workloads have little in common: {s.describe()} (below {100 * LITTLE_IN_COMMON:.0f}%): these look "
            "like different programs, so the per-name changes below compare different work and none of them is "
            "a regression or a speed-up of anything")


def gpu_architecture(model: str) -> str | None:
    """The architecture of a GPU model name (``NVIDIA A100-SXM4-80GB`` → ``Ampere``), None when unknown."""
    return next((arch for pattern, arch in _GPU_ARCH if pattern.search(model)), None)


def gpu_from_kernel_names(names: Iterable[str]) -> tuple[str, str, str] | None:
    """``(architecture, compute capability, example name)`` read from kernel names, or None.

    The architecture most names point to wins (a library may ship kernels for older ones).
    """
    votes: dict[tuple[str, str], list[str]] = {}
    for name in names:
        for pattern, arch, cc in _ARCH:
            if pattern.search(name):
                votes.setdefault((arch, cc), []).append(name)
                break
    if not votes:
        return None
    (arch, cc), found = max(votes.items(), key=lambda kv: len(kv[1]))
    return arch, cc, found[0]


def gpus_differ(base_hw: Mapping[str, Any], target_hw: Mapping[str, Any], base_kernels: Iterable[str],
                target_kernels: Iterable[str]) -> bool:
    """Whether the two sides ran on different GPUs: their models when both are known, else their architectures
    (a model's, or what its kernel names are built for); False when that cannot be told."""
    model_a, model_b = base_hw.get("gpu"), target_hw.get("gpu")
    if model_a and model_b:
        return bool(model_a != model_b)
    archs = []
    for model, kernels in ((model_a, base_kernels), (model_b, target_kernels)):
        guess = None if model else gpu_from_kernel_names(kernels)
        archs.append(gpu_architecture(str(model)) if model else guess[0] if guess else None)
    return None not in archs and archs[0] != archs[1]


def gpu_warnings(base_hw: Mapping[str, Any], target_hw: Mapping[str, Any], base_kernels: Iterable[str],
                 target_kernels: Iterable[str]) -> list[str]:
    """A warning when a side's GPU model is unknown: the architecture its kernel names state, or "may differ".

    Both sides unknown and built for one architecture is one warning (the model may still differ).
    """
    ka, kb = list(base_kernels), list(target_kernels)
    ga, gb = gpu_from_kernel_names(ka), gpu_from_kernel_names(kb)
    known_a, known_b = bool(base_hw.get("gpu")), bool(target_hw.get("gpu"))
    if known_a and known_b:
        return []
    if not known_a and not known_b and ka and kb:
        if ga is not None and gb is not None and ga[0] == gb[0]:
            return [f"GPU model unknown on both sides; the kernel names of both are built for {ga[0]} ({ga[1]}, "
                    f"e.g. {ga[2][:80]!r}): the model (memory, clocks, SM count) may still differ"]
        if ga is not None and gb is not None:
            return [f"GPU unknown on both sides, but the kernel names are built for {ga[0]} ({ga[1]}) on the base "
                    f"and {gb[0]} ({gb[1]}) on the target: the GPUs differ, so kernel times mix the code change "
                    "with the GPU's speed"]
        return ["GPU unknown on both sides (no GPU model in them, and the kernel names do not all state an "
                "architecture): the GPUs may differ, and kernel times would then mix code and machine"]
    out = []
    for side, known, kernels, guess, other_hw, other_guess in (("base", known_a, ka, ga, target_hw, gb),
                                                               ("target", known_b, kb, gb, base_hw, ga)):
        if known or not kernels:
            continue
        other_arch = gpu_architecture(str(other_hw["gpu"])) if other_hw.get("gpu") else (
            other_guess[0] if other_guess else None)
        if guess is None:
            out.append(f"GPU unknown on the {side} side (no GPU model in it, and no kernel name states an "
                       "architecture): the GPUs may differ, and kernel times would then mix code and machine")
        elif other_arch is not None and other_arch != guess[0]:
            out.append(f"GPU unknown on the {side} side, but its kernel names are built for {guess[0]} ({guess[1]}, "
                       f"e.g. {guess[2][:80]!r}) and the other side ran on {other_arch}: the GPUs differ, so kernel "
                       "times mix the code change with the GPU's speed")
        else:
            out.append(f"GPU unknown on the {side} side; its kernel names are built for {guess[0]} ({guess[1]}, "
                       f"e.g. {guess[2][:80]!r}){', like the other side' if other_arch else ''}: the GPU model "
                       "(memory, clocks, SM count) may still differ")
    return out


def dtype_mix(kernel_times: Mapping[str, float]) -> tuple[dict[str, float], float]:
    """Matrix-product kernel time per precision its name states, as shares of the time a precision was read for;
    and that time's share of all matrix-product time (communication kernels never count)."""
    per: dict[str, float] = {}
    total = sum(abs(t) for n, t in kernel_times.items() if _MATMUL.search(n) and not _COMM_NAME.search(n))
    for name, t in kernel_times.items():
        if not _MATMUL.search(name) or _COMM_NAME.search(name):
            continue
        dtype = next((d for pattern, d in _DTYPES if pattern.search(name)), None)
        if dtype is not None:
            per[dtype] = per.get(dtype, 0.0) + abs(t)
    read = sum(per.values())
    return ({k: v / read for k, v in sorted(per.items(), key=lambda kv: -kv[1])} if read else {},
            read / total if total else 0.0)


def dtype_warning(base: Mapping[str, float], target: Mapping[str, float]) -> str | None:
    """A warning when the kernel time's dominant precision differs, or None (also when too little is readable)."""
    (ma, ra), (mb, rb) = dtype_mix(base), dtype_mix(target)
    if ra < DTYPE_READ or rb < DTYPE_READ or not ma or not mb:
        return None
    da, db = next(iter(ma)), next(iter(mb))
    if da == db or ma[da] < DTYPE_DOMINANT or mb[db] < DTYPE_DOMINANT:
        return None
    return (f"the precision differs: kernel names put {100 * ma[da]:.0f}% of the base's typed kernel time in {da} "
            f"and {100 * mb[db]:.0f}% of the target's in {db}: kernel times change with the precision alone")


def family_of(name: str) -> str | None:
    """``name`` with its module indices replaced by ``#`` (``blocks.7.attn`` → ``blocks.#.attn``), None without one."""
    out = _INDEX.sub(".#", name)
    return out if out != name else None


def numbered_families(names: Iterable[str]) -> dict[str, set[int]]:
    """Family template → the indices its names cover (the first index of each name)."""
    out: dict[str, set[int]] = {}
    for name in names:
        m = _INDEX.search(name)
        if m is not None:
            out.setdefault(_INDEX.sub(".#", name), set()).add(int(m.group(1)))
    return out


@dataclass(frozen=True)
class WindowDifference:
    """Families of numbered names covering different indices: the two captures hold different parts of the model."""

    families: tuple[str, ...]
    base: tuple[int, int]
    target: tuple[int, int]

    @property
    def what(self) -> str:
        """What the indices count: the word before the index (``blocks`` of ``blocks.#``), else ``indices``."""
        m = re.search(r"([A-Za-z_]\w*)\.#", self.families[0])
        return m.group(1) if m else "indices"

    def describe(self) -> str:
        """One warning line."""
        (a0, a1), (b0, b1) = self.base, self.target
        example = self.families[0]
        more = f" and {len(self.families) - 1} more" if len(self.families) > 1 else ""
        return (f"the captures cover different windows: {self.what} {a0}–{a1} against {b0}–{b1} ({example!r}{more}); "
                "the numbered ranges are compared as one name per family (not as added and removed ranges), and "
                "totals per capture include different work")

    def to_dict(self) -> dict[str, Any]:
        """JSON."""
        return {"families": list(self.families), "base": list(self.base), "target": list(self.target)}


def window_difference(base: Iterable[str], target: Iterable[str]) -> WindowDifference | None:
    """The families present on both sides (with :data:`MIN_FAMILY` indices each) whose indices differ, or None."""
    fa, fb = numbered_families(base), numbered_families(target)
    differ = sorted(f for f in set(fa) & set(fb) if len(fa[f]) >= MIN_FAMILY and len(fb[f]) >= MIN_FAMILY
                    and fa[f] != fb[f])
    if not differ:
        return None
    ia = set().union(*(fa[f] for f in differ))
    ib = set().union(*(fb[f] for f in differ))
    return WindowDifference(tuple(differ), (min(ia), max(ia)), (min(ib), max(ib)))


_MEANINGS = {
    "gpu": "kernel times mix the code change with the GPU's speed, and kernels built per architecture show as "
           "added and removed",
    "world_size": "communication time and each rank's share of the work change with the number of ranks",
    "gpu_count": "per-process GPU totals cover a different number of devices",
    "sms": "kernel times change with the SM count",
    "gpu_memory_gib": "batch sizes and caching may differ with the memory",
}
# fields whose meaning the GPU model's already says
_PART_OF_GPU = frozenset({"compute_capability", "sms", "gpu_memory_gib"})


def hardware_meanings(base: Mapping[str, Any], target: Mapping[str, Any], keys: Iterable[str]) -> str:
    """What the differing hardware fields mean for the numbers (a clause per known field, none repeated)."""
    keys = list(keys)
    said = [m for k in keys if (m := _MEANINGS.get(k)) and not ("gpu" in keys and k in _PART_OF_GPU)]
    return "; ".join(dict.fromkeys(said))


def context_warnings(base: Mapping[str, Any], target: Mapping[str, Any], base_hw: Mapping[str, Any],
                     target_hw: Mapping[str, Any], kernel_prefix: str = "kernel:",
                     ) -> tuple[list[str], Similarity, WindowDifference | None]:
    """Every like-for-like warning for two sides' per-name stats (``{name: OpStats}``) and hardware, in reading order.

    Returns the warnings, the similarity and the window difference (both also kept in the result).
    """
    from my_utils.profiling.analysis.diff import hardware_warning

    times_a = {n: float(s.mean) for n, s in base.items()}
    times_b = {n: float(s.mean) for n, s in target.items()}
    sim = similarity(times_a, times_b, kernel_prefix)
    out = []
    if (hw := hardware_warning(base_hw, target_hw)) is not None:
        out.append(hw)
    kern_a = {n[len(kernel_prefix):]: t for n, t in times_a.items() if n.startswith(kernel_prefix)}
    kern_b = {n[len(kernel_prefix):]: t for n, t in times_b.items() if n.startswith(kernel_prefix)}
    out += gpu_warnings(base_hw, target_hw, kern_a, kern_b)
    if (little := little_in_common_warning(sim)) is not None:
        out.append(little)
    if (dtype := dtype_warning(kern_a, kern_b)) is not None:
        out.append(dtype)
    window = window_difference(times_a, times_b)
    if window is not None:
        out.append(window.describe())
    return out, sim, window
