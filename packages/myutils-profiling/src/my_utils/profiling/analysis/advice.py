"""Advice, keyed by the *kind* of evidence: operator family, optimizer class, jitter cause, idle cause.

One place to review and test what the analysis tells people to do. Names are never searched
for substrings (``DistributedDataParallel.forward`` is no data loading): a name is cut into
identifier tokens (:func:`tokens`) and a family matches whole tokens, the ``_``-separated
parts of a token, or known operator names (:data:`FAMILIES`, first match wins, most specific
first). Optimizer advice names the optimizer in use and what torch.optim has for it
(:data:`TORCH_OPTIMIZERS`: ``fused`` / ``foreach`` per class, as in torch 2.13), and says when
there is none. Jitter has its own causes (GC, data-loader stalls, host contention, the
allocator, periodic work), chosen from the evidence by the rules.

Every piece of advice that holds only for some runs (GPU work, a PyTorch program, a verdict, an
operator family) is a named piece of :data:`PIECES`, and the texts below are composed of them
(:func:`compose`: a lead, a colon, the pieces separated by ``; ``). The rules attach the full
texts; after the verdict is known, ``analysis.advice_gate`` removes the pieces that do not apply
to the run (its one table, ``GATES``, says when each applies) and drops an advice left with its
lead alone: no advice rather than a generic one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Prefixes the providers put before a name (``cpu_op:aten::mm``): not part of the name itself.
_PREFIXES = ("cpu_op:", "annotation:", "kernel:", "memcpy:", "memset:", "device_op:", "cuda:")
_SPLIT = re.compile(r"[^A-Za-z0-9_]+")


def bare(name: str) -> str:
    """``name`` without a provider prefix (``cpu_op:aten::mm`` → ``aten::mm``)."""
    for p in _PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


def tokens(name: str) -> list[str]:
    """Identifier tokens of a name, lower-cased, with leading/trailing underscores dropped.

    ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` → ``enumerate``,
    ``dataloader``, ``singleprocessdataloaderiter``, ``next``; ``c10d::allreduce_`` → ``c10d``,
    ``allreduce``. CamelCase is never split: ``DistributedDataParallel`` stays one token.
    """
    return [t.strip("_").lower() for t in _SPLIT.split(bare(name)) if t.strip("_")]


#: Advice pieces that hold only for some runs, by key (``analysis.advice_gate.GATES`` says when). Each text
#: is unique and no piece is part of another, so a gate can remove it from any advice text it appears in.
PIECES: dict[str, str] = {
    "cuda_graphs": "capture the step as a CUDA graph and replay it (one launch for all its kernels)",
    "cuda_graphs_short": "launch them as one CUDA graph",
    "reduce_overhead": 'torch.compile(mode="reduce-overhead") captures the graph for you',
    "larger_batch_launch": "give each kernel more work (a larger batch)",
    "mixed_precision_backward": "mixed precision (torch.autocast) halves its kernels' time",
    "mixed_precision": "bf16/fp16 mixed precision (torch.autocast)",
    "sdpa": "fused attention for its attention operators (torch.nn.functional.scaled_dot_product_attention)",
    "compile_fusion": "torch.compile to fuse its operators",
    "larger_batch": "a larger batch per kernel",
    "activation_checkpointing": "activation checkpointing trades it for memory, never the other way round",
    "find_unused_parameters": "check for unused parameters (find_unused_parameters)",
    "ddp_buckets": "overlap communication with compute (DDP buckets: bucket_cap_mb, gradient_as_bucket_view=True; "
                   "FSDP prefetch)",
    "stragglers": "check for stragglers across ranks: a collective waits for the slowest rank",
    "ddp_overlap": "let DDP overlap gradient buckets with backward (no sync after backward; bucket_cap_mb)",
    "fsdp_prefetch": "use FSDP's backward_prefetch",
    "no_barrier": "avoid a barrier or .item() right after a collective",
    "own_stream": "issue collectives on a stream of their own, so that computation can run beside them",
    "wrapped_operators": "look at the operators inside it",
    "broadcast_buffers": "set broadcast_buffers=False when buffers do not change",
    "fsdp_forward_prefetch": "let FSDP prefetch the next all-gather (forward_prefetch=True)",
    "dataloader_workers": "raise DataLoader num_workers and prefetch_factor and set persistent_workers=True",
    "pin_memory": "set pin_memory=True",
    "device_prefetch": "prefetch the next batch to the device while this one trains",
    "keep_on_device": "keep tensors on the device",
    "pinned_copies": "use pinned memory with non_blocking=True",
    "avoid_sync": "avoid .item()/.cpu()/.tolist() inside the step (each one waits for the GPU)",
    "less_often": "run them less often, off the training step",
    "async_save": "save checkpoints asynchronously (torch.distributed.checkpoint.async_save)",
    "fused_optimizer": "pass fused=True: one fused step for all parameters, on CUDA and on the CPU",
    "foreach_next": "foreach=True, the default on CUDA, is the next best",
    "foreach_path": "make sure it runs the multi-tensor path (foreach=True, the default when every parameter is on "
                    "CUDA)",
    "optimizer_unnamed_why": "the evidence does not name the optimizer class (a torch.profiler trace of a step "
                             "does: Optimizer.step#<Class>.step)",
    "optimizer_unnamed": "torch.optim's Adam, AdamW, SGD and Adagrad have fused=True, most others foreach=True",
    "optimizer_not_torch": "not a torch.optim class, so torch's fused=/foreach= do not apply: look for a multi-tensor "
                           "or fused mode in its own library, and run its expensive parts (e.g. preconditioner "
                           "updates) less often",
    "optimizer_per_parameter": "torch.optim has neither a fused nor a foreach implementation of it: its step runs "
                               "per parameter, so fewer, larger parameter tensors (or another optimizer) are what "
                               "helps",
    "input_shapes": "variable input shapes (bucket sequence lengths, fixed batch shapes)",
    "caching_allocator": "the caching allocator (torch.cuda.memory_stats: num_alloc_retries; expandable_segments)",
    "gc_freeze": "Python's garbage collector (gc.freeze() after set-up)",
    "host_work": "other work on the host",
    "host_contention": "the host (other processes, CPU frequency scaling)",
    "gc_step": "Python's garbage collector (gc.freeze() after set-up, or gc.disable() around the step)",
    "allocator_retries": "the caching allocator (torch.cuda.memory_stats: num_alloc_retries)",
    "host_syncs": "synchronisations (.item(), prints)",
    "loader_workers": "raise num_workers and prefetch_factor and set persistent_workers=True",
    "uneven_samples": "look for uneven samples (decoding, augmentation)",
    "gpu_queue": "a copy or .item()/.cpu() waits for the GPU queue, whose length varies, so take the sync out of "
                 "the step",
}


def compose(lead: str, *keys: str) -> str:
    """``lead: piece; piece; ...`` of the pieces ``keys`` (:data:`PIECES`)."""
    return f"{lead}: " + "; ".join(PIECES[k] for k in keys)


@dataclass(frozen=True)
class Family:
    """An operator family: ``tokens`` (whole tokens), ``parts`` (``_``-separated parts of a token),
    ``patterns`` (regexes a whole token must match) and ``ops`` (exact operator names)."""

    key: str
    label: str
    advice: str
    tokens: frozenset[str] = frozenset()
    parts: frozenset[str] = frozenset()
    patterns: tuple[re.Pattern[str], ...] = ()
    ops: frozenset[str] = frozenset()

    def matches(self, name: str) -> bool:
        """Whether ``name`` belongs to this family (see the class docstring)."""
        if bare(name) in self.ops:
            return True
        for t in tokens(name):
            if t in self.tokens or any(p.fullmatch(t) for p in self.patterns):
                return True
            if self.parts and any(part in self.parts for part in t.split("_")):
                return True
        return False


def _re(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


#: Operator families, most specific first; the first that matches a name gives its advice.
FAMILIES: tuple[Family, ...] = (
    Family("model_wrapper", "a DDP/FSDP-wrapped model's forward",
           compose("this is the wrapped model's forward (compute, plus the wrapper's buffer broadcasts and parameter "
                   "all-gathers)", "wrapped_operators", "broadcast_buffers", "fsdp_forward_prefetch"),
           tokens=frozenset({"distributeddataparallel", "fullyshardeddataparallel", "dataparallel", "fsdp", "ddp"})),
    Family("communication", "communication", compose("communication", "ddp_buckets", "stragglers"),
           tokens=frozenset({"c10d", "allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter",
                             "reducescatter", "alltoall", "all_to_all", "broadcast", "barrier",
                             "record_param_comms", "all_gather_into_tensor", "reduce_scatter_tensor"}),
           patterns=_re(r"nccl\w*", r"rccl\w*", r"hccl\w*")),
    Family("data_loading", "data loading", compose("data loading", "dataloader_workers", "pin_memory", "device_prefetch"),
           tokens=frozenset({"dataloader", "collate", "default_collate", "load_batch", "next_batch", "get_batch",
                             "prefetch", "data_loading", "dataloading"}),
           parts=frozenset({"data", "dataloader", "collate"}),
           patterns=_re(r"(singleprocess|multiprocessing)?dataloader(iter)?")),
    Family("copies", "host↔device copies", compose("host↔device copies", "keep_on_device", "pinned_copies", "avoid_sync"),
           tokens=frozenset({"memcpy", "memset", "htod", "dtoh", "dtod", "h2d", "d2h", "pin_memory"}),
           patterns=_re(r"cuda(memcpy|memset)\w*"),
           ops=frozenset({"aten::copy_", "aten::to", "aten::_to_copy", "aten::item", "aten::_local_scalar_dense",
                          "aten::cpu", "aten::pin_memory"})),
    Family("optimizer", "the optimizer step", "",  # advice comes from optimizer_advice(): it depends on the class
           tokens=frozenset({"optimizer", "optim", "zero_grad"})),
    Family("backward", "the backward pass",
           compose("backward", "mixed_precision_backward", "activation_checkpointing", "find_unused_parameters"),
           tokens=frozenset({"backward", "autograd"}),
           patterns=_re(r"\w*backward\d*")),
    Family("compute", "compute", compose("compute", "mixed_precision", "sdpa", "compile_fusion", "larger_batch"),
           tokens=frozenset({"forward", "attention", "attn", "matmul", "mm", "bmm", "addmm", "gemm", "linear",
                             "conv", "conv2d", "conv1d", "conv3d", "sdpa", "scaled_dot_product_attention",
                             "layer_norm", "softmax", "gelu", "baddbmm"}),
           patterns=_re(r"\w*gemm\w*", r"cutlass\w*", r"triton_\w+", r"\w*xmma\w*", r"\w*_elementwise_kernel")),
    Family("io", "checkpointing, evaluation or logging",
           compose("checkpointing, evaluation and logging", "less_often", "async_save"),
           tokens=frozenset({"save", "checkpoint", "ckpt", "eval", "evaluate", "validation", "validate", "log",
                             "logging"}),
           parts=frozenset({"save", "checkpoint", "ckpt", "validation"})),
)
_FAMILY = {f.key: f for f in FAMILIES}


def family_of(name: str) -> Family | None:
    """The first family of :data:`FAMILIES` that ``name`` belongs to (an optimizer step name counts
    as ``optimizer``), None when none does."""
    if optimizer_class(name) is not None:
        return _FAMILY["optimizer"]
    for family in FAMILIES:
        if family.matches(name):
            return family
    return None


#: torch.optim classes (torch 2.13) → (has ``fused=``, has ``foreach=``). ``test_analysis_advice.py``
#: checks this against the installed torch's signatures.
TORCH_OPTIMIZERS: dict[str, tuple[bool, bool]] = {
    "ASGD": (False, True), "Adadelta": (False, True), "Adafactor": (False, True), "Adagrad": (True, True),
    "Adam": (True, True), "AdamW": (True, True), "Adamax": (False, True), "LBFGS": (False, False),
    "Muon": (False, False), "NAdam": (False, True), "RAdam": (False, True), "RMSprop": (False, True),
    "Rprop": (False, True), "SGD": (True, True), "SparseAdam": (False, False),
}
_OPT_STEP = re.compile(r"^Optimizer\.(?:step|zero_grad)#(\w+)\.(?:step|zero_grad)$")
_CLASS_STEP = re.compile(r"^(\w+)\.step$")
_OPTIMIZER_LIKE = re.compile(r"(?i).*(optim|adam|sgd|shampoo|lamb|lion|lars|adafactor|sophia|muon|adagrad|rmsprop).*")


def optimizer_class(name: str) -> str | None:
    """The optimizer class a name is the step of: ``Optimizer.step#AdamW.step`` → ``AdamW``,
    ``Shampoo.step`` → ``Shampoo``; None for anything else."""
    b = bare(name)
    m = _OPT_STEP.match(b)
    if m:
        return m.group(1)
    m = _CLASS_STEP.match(b)
    if m and (m.group(1) in TORCH_OPTIMIZERS or _OPTIMIZER_LIKE.fullmatch(m.group(1))):
        return m.group(1)
    return None


def optimizer_advice(cls: str | None) -> str:
    """What to try for the step of optimizer class ``cls`` (None: the class is not in the evidence)."""
    if cls is None:
        return compose("optimizer", "optimizer_unnamed_why", "optimizer_unnamed")
    flags = TORCH_OPTIMIZERS.get(cls)
    if flags is None:
        return compose(f"optimizer {cls}", "optimizer_not_torch")
    fused, foreach = flags
    if fused:
        return compose(f"optimizer {cls} (torch.optim.{cls}(..., fused=True))", "fused_optimizer", "foreach_next")
    if foreach:
        return compose(f"optimizer {cls} (torch.optim.{cls} has no fused implementation)", "foreach_path")
    return compose(f"optimizer {cls}", "optimizer_per_parameter")


def advice_for(name: str, names: set[str] | frozenset[str] = frozenset()) -> tuple[str, str]:
    """``(family key, advice)`` for a name; ``names``: the run's other names (to find the optimizer class
    behind a MyTimer ``optimizer`` region). ``("", "")`` when no family matches."""
    family = family_of(name)
    if family is None:
        return "", ""
    if family.key == "optimizer":
        cls = optimizer_class(name)
        if cls is None:
            found = sorted({c for n in names if (c := optimizer_class(n)) is not None})
            if len(found) > 1:  # a wrapper (EMA, gradient scaling) around the optimizer: advise for each
                return "optimizer", "; ".join(optimizer_advice(c) for c in found)
            cls = found[0] if found else None
        return "optimizer", optimizer_advice(cls)
    return family.key, family.advice


#: Jitter causes → advice (variability and outlying steps), picked from the evidence.
JITTER_ADVICE: dict[str, str] = {
    "explained": "the extra time is in {name} on those steps: {advice}",
    "periodic": "the slow steps come every {period} steps: something periodic runs then (checkpointing, "
                "evaluation, logging, an LR-schedule or data-shard boundary, Python's generation-2 garbage "
                "collection); time it, or move it off the step",
    "faster": "these steps were faster than usual: part of the work was skipped (cached or empty batches, "
              "a different code path) or the host was less contended on them; the median is the representative time",
    "unexplained": compose("no timed region explains it; on those steps, look at", "host_contention", "gc_step",
                           "allocator_retries", "host_syncs"),
    "spread": "the spread is mostly in {name}: {advice}",
}

#: Why a region of each family varies from step to step: jitter causes, never bottleneck remedies.
JITTER_BY_FAMILY: dict[str, str] = {
    "data_loading": compose("a data-loader stall (the workers do not keep up on some steps)", "loader_workers",
                            "uneven_samples"),
    "communication": "collectives wait for the slowest rank on those steps: a straggler or network contention "
                     "(compare the ranks on one clock: myutils-profile trace --auto-align-ranks)",
    "copies": compose("its copies vary", "gpu_queue"),
    "io": "checkpointing, evaluation or logging run on some steps only: move them off the step or make them async",
    "default": compose("the work in it varies", "input_shapes", "caching_allocator", "gc_freeze", "host_work"),
}


def jitter_cause(name: str) -> str:
    """Why ``name`` varies, from its family (:data:`JITTER_BY_FAMILY`)."""
    family = family_of(name)
    return JITTER_BY_FAMILY.get(family.key if family is not None else "", JITTER_BY_FAMILY["default"])


#: GPU idle causes → advice.
IDLE_ADVICE: dict[str, str] = {
    "host_wait": compose("the GPU waits for the CPU to launch work", "cuda_graphs", "reduce_overhead",
                         "larger_batch_launch"),
    "short_kernels": "{short:,} of {launches:,} kernels ran shorter than their launch took on the CPU: launch "
                     "overhead dominates them",
    "short_kernels_fix": "; ".join(PIECES[k] for k in ("cuda_graphs_short", "reduce_overhead")),
    "sync": "the host blocks on the GPU ({sync_ms:,.1f} ms of {names}): remove .item()/.cpu()/torch.cuda."
            "synchronize() from the step",
    "other": "the idle gaps are not launch-bound: look for syncs and waits on other streams",
}

#: Communication evidence → advice.
COMM_ADVICE: dict[str, str] = {
    "no_overlap_own_stream": compose("NCCL runs on its own stream, yet only {overlap:.0f}% of its time has "
                                     "computation beside it (compute waits for the collectives)",
                                     "ddp_overlap", "fsdp_prefetch", "no_barrier"),
    "no_overlap_shared_stream": compose("NCCL kernels share the compute stream, so they cannot overlap", "own_stream"),
    "spike": "the communication time of one step is {ratio:.1f}× the median of the others: a straggling rank, "
             "a bigger message (uneven buckets), or network contention on that step",
}
