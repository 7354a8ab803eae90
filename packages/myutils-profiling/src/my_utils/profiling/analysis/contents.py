"""What a capture holds: the operator families, the framework and the features that advice depends on.

Advice is chosen by what the capture contains (``diagnosis/CASES.md``, principle 3): no
``scaled_dot_product_attention`` without an attention operator, no DDP overlap without a compute
kernel, no GPU advice on a CPU-only run, no PyTorch advice for a program that is not PyTorch.
:func:`capture_contents` reads the names the run holds (operations, kernels, NVTX ranges, CUDA API
calls, host operators of the report's tables, and any names the caller adds) and the facts, and
says which families are present, each with a few names as evidence.

A family matches a name by regular expressions over the lower-cased name (kernel names are C++
signatures, operator names ``aten::x``, NVTX ranges free text: no tokeniser fits all three);
each pattern is anchored on word-like boundaries so ``convert`` is no convolution. "Unknown" is a
value: ``pytorch`` and ``gpu`` are None when no input can tell, and a gate treats None as
"not ruled out".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from my_utils.profiling.analysis.advice import FAMILIES, bare, optimizer_class
from my_utils.profiling.model.report import Fact

Rows = Sequence[Mapping[str, Any]]

#: Operator families → patterns over a lower-cased name (provider prefix removed). One table to review.
FAMILY_PATTERNS: dict[str, re.Pattern[str]] = {
    "attention": re.compile(
        r"scaled_dot_product|(?<![a-z])sdpa|flash_?(attn|attention|fwd|bwd)|(?<![a-z])fmha|efficient_attention"
        r"|multi_?head_?attention|(?<![a-z])attention(?![a-z])|(?<![a-z])attn(?![a-z])|_attention|attention_"
        r"|cudnn_attention|flashinfer"),
    "convolution": re.compile(
        r"convolution|(?<![a-z])conv_?[123]d|conv_transpose|convolve|(?<![a-z])conv(?![a-z])|fprop_implicit"
        r"|winograd|cudnn_conv"),
    "embedding": re.compile(r"embedding|(?<![a-z])tbe(?![a-z])"),
    "gemm": re.compile(
        r"(?<!fb)gemm|matmul|(?<![a-z])(aten::)?(mm|bmm|addmm|baddbmm|addbmm|linear)(?![a-z_])|cutlass|cublas|xmma"),
    "data_loading": re.compile(r"dataloader|data_?loading(?![a-z ])|collate|(?<![a-z])(next|get|load)_batch"),
}
#: Families whose names ``analysis.advice.FAMILIES`` already tells apart by whole tokens (a name's
#: ``broadcast_tensors`` is no broadcast collective): the same matchers, so advice and contents agree.
_TOKEN_FAMILIES = {f.key: f for f in FAMILIES if f.key in ("communication", "copies")}
#: Kernel-name patterns of fused attention already in use (SDPA/flash advice is moot then).
_FLASH = re.compile(r"flash_?(fwd|bwd|attn|attention)|fmha|efficient_attention|scaled_dot_product_flash"
                    r"|scaled_dot_product_efficient|scaled_dot_product_cudnn")
#: Names that only a PyTorch program has (ATen operators, autograd, profiler steps, c10d, torch NVTX ranges).
_PYTORCH = re.compile(r"^(aten::|c10d::|autograd::|torch::|fbgemm::|profilerstep#|optimizer\.step#|at::native::|void at::)"
                      r"|at::native::|compiledfunction|torch-compiled region|(?<![a-z])torch\.")
#: Provider prefixes of names read from a torch.profiler trace.
_TORCH_PREFIXES = ("cpu_op:", "annotation:")
#: CUDA graph launches: the step is already captured as a graph.
_GRAPHS = re.compile(r"(cuda|cu)graphlaunch")
#: The model already runs under torch.compile (Inductor's kernels and regions).
_COMPILED = re.compile(r"compiledfunction|torch-compiled region|(?<![a-z])triton_|inductor")

#: Columns of the report's tables that hold names (operations, kernels, NVTX ranges, host operators).
_NAME_COLUMNS = ("name", "operator", "kernel", "short_name", "top_kernel", "collective")
#: Tables whose names come from a torch.profiler trace (a PyTorch program).
_KINETO_INPUTS = "kineto_inputs"
#: At most this many names per family are kept as evidence.
EXAMPLES = 3


@dataclass(frozen=True)
class CaptureContents:
    """What the capture holds (module docstring).

    ``families``: operator families present (``attention``, ``convolution``, ``embedding``,
    ``gemm``, ``communication``, ``data_loading``, ``copies``, ``optimizer``); ``examples``: a few
    names per family; ``optimizers``: the optimizer classes named; ``pytorch``: True (PyTorch
    names or a torch.profiler trace), False (GPU names, none of PyTorch), None (cannot tell);
    ``gpu``: False on a CPU-only run (``context.cpu_only``), True with GPU activity, None unknown;
    ``compute_kernels``: whether a computation kernel ran (None unknown); ``features``:
    ``cuda_graphs`` (graph launches seen), ``compiled`` (torch.compile in use), ``flash_attention``
    (fused attention kernels in use).
    """

    families: frozenset[str] = frozenset()
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    optimizers: tuple[str, ...] = ()
    pytorch: bool | None = None
    gpu: bool | None = None
    compute_kernels: bool | None = None
    features: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``summary["contents"]``."""
        return {"families": sorted(self.families), "examples": {k: list(v) for k, v in sorted(self.examples.items())},
                "optimizers": list(self.optimizers), "pytorch": self.pytorch, "gpu": self.gpu,
                "compute_kernels": self.compute_kernels, "features": sorted(self.features)}


def table_names(tables: Mapping[str, Rows]) -> set[str]:
    """Every name the report's tables hold in a name column (operations, kernels, NVTX, CUDA API, operators)."""
    out: set[str] = set()
    for name, rows in tables.items():
        if name in ("steps", "memory", "series"):
            continue
        for row in rows or ():
            for col in _NAME_COLUMNS:
                v = row.get(col)
                if isinstance(v, str) and v:
                    out.add(v)
    return out


def capture_contents(tables: Mapping[str, Rows], facts: Mapping[str, Fact],
                     names: Iterable[str] = ()) -> CaptureContents:
    """The families, framework and features of the run (module docstring); ``names``: more names to read."""
    every = table_names(tables) | set(names)
    families: dict[str, list[str]] = {}
    optimizers: set[str] = set()
    features: set[str] = set()
    pytorch = bool(tables.get(_KINETO_INPUTS))
    for raw in sorted(every):
        name = bare(raw)
        low = name.lower()
        cls = optimizer_class(name)
        if cls is not None:
            optimizers.add(cls)
            families.setdefault("optimizer", []).append(name)
        for family, pattern in FAMILY_PATTERNS.items():
            if pattern.search(low):
                families.setdefault(family, []).append(name)
        for family, matcher in _TOKEN_FAMILIES.items():
            if matcher.matches(raw):
                families.setdefault(family, []).append(name)
        if not pytorch and (raw.startswith(_TORCH_PREFIXES) or _PYTORCH.search(low)):
            pytorch = True
        if _GRAPHS.search(low):
            features.add("cuda_graphs")
        if _COMPILED.search(low):
            features.add("compiled")
        if _FLASH.search(low):
            features.add("flash_attention")
    cpu = facts.get("context.cpu_only")
    gpu: bool | None = None
    if cpu is not None and cpu.number is not None:
        gpu = cpu.number == 0
    kernels = any(n.startswith("kernel:") for n in every) or any(
        tables.get(t) for t in ("nsys_top_kernels", "kineto_top_kernels", "ncu_kernels"))
    if gpu is None and (kernels or tables.get("nsys_busy_device") or tables.get("kineto_temporal")):
        gpu = True
    # GPU kernels without a single PyTorch name (PyTorch runs at::native kernels): another framework or plain CUDA
    framework: bool | None = True if pytorch else (False if kernels else None)
    return CaptureContents(
        families=frozenset(families), examples={k: tuple(v[:EXAMPLES]) for k, v in families.items()},
        optimizers=tuple(sorted(optimizers)), pytorch=framework, gpu=gpu,
        compute_kernels=_compute_kernels(facts, tables), features=frozenset(features))


def _compute_kernels(facts: Mapping[str, Fact], tables: Mapping[str, Rows]) -> bool | None:
    """Whether a computation kernel ran: the ``gpu.compute`` fact, else the kernel-kind tables; None without either."""
    compute = facts.get("gpu.compute")
    if compute is not None and compute.number is not None:
        return compute.number > 0
    kinds = [r for name in ("kineto_kernel_kinds", "nsys_kernel_kinds") for r in tables.get(name) or ()]
    if kinds:
        return any(str(r.get("kind")) == "computation" and float(r.get("count") or 0) > 0 for r in kinds)
    return None
