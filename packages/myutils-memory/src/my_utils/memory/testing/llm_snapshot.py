"""A snapshot of a Llama-style training run as ``_record_memory_history(stacks="all")`` records one, made on a CPU.

No GPU is needed: ``CachingAllocatorModel`` plays the allocator, and each allocation carries
the stack such a run records. Forward allocations go through the user's ``train.py``, the
Hugging Face model (``transformers/models/llama/modeling_llama.py`` under ``site-packages``,
another library's code: the user's, for a summary) and PyTorch's modules
(``torch/nn/modules/linear.py``, ``torch/nn/functional.py``), with CPython's interpreter
frames between them and the allocator's own C++ frames (``torch::unwind``,
``CapturedTraceback``, ``CUDACachingAllocator``, ``at::detail::empty*``) innermost, as real
snapshots have them. Backward allocations come from the autograd engine's thread: C++ frames
only, the ATen operator and the autograd node among them. The optimizer's come from
``torch/optim/adamw.py``. The user's Trainer callback calls ``torch.cuda.empty_cache()`` after every step, so
the allocator returns its segments and allocates them again: cudaMalloc/cudaFree churn.

Frame dicts are shared between entries and each allocation's frames list is shared with its
frees, as torch shares them; the pickle is small for its entry count for the same reason.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from my_utils.memory.testing.allocator_model import CachingAllocatorModel

__all__ = ["LlmShape", "llm_training_snapshot"]

SITE = "/opt/conda/lib/python3.11/site-packages/"
TRAIN = "/home/user/llm-finetune/train.py"
LLAMA = SITE + "transformers/models/llama/modeling_llama.py"
MODULE = SITE + "torch/nn/modules/module.py"
LINEAR = SITE + "torch/nn/modules/linear.py"
FUNCTIONAL = SITE + "torch/nn/functional.py"
ADAMW = SITE + "torch/optim/adamw.py"
TRAINER = SITE + "transformers/trainer.py"
ACCELERATE = SITE + "accelerate/utils/operations.py"
# activation checkpointing of each decoder layer (gradient_checkpointing_enable)
CHECKPOINT = [("forward", SITE + "torch/utils/checkpoint.py", 290), ("apply", SITE + "torch/autograd/function.py", 575),
              ("checkpoint", SITE + "torch/utils/checkpoint.py", 496),
              ("_fn", SITE + "torch/_dynamo/eval_frame.py", 838),
              ("_gradient_checkpointing_func", SITE + "transformers/modeling_layers.py", 93),
              ("__call__", SITE + "transformers/modeling_layers.py", 83)]
# the Hugging Face Trainer's loop between the user's script and the model
LOOP = [("compute_loss", TRAINER, 3801), ("training_step", TRAINER, 3745), ("_inner_training_loop", TRAINER, 2560),
        ("train", TRAINER, 2245), ("main", TRAIN, 141), ("<module>", TRAIN, 163)]
OUTER = [("forward", ACCELERATE, 819), ("__call__", ACCELERATE, 807), ("decorate_autocast",
                                                                          SITE + "torch/amp/autocast_mode.py", 44)]
ALLOCATOR = [  # innermost first, as CapturedTraceback records them
    ("torch::unwind::unwind()", "??"),
    ("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
    ("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)",
     "CUDACachingAllocator.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, int, unsigned long, "
     "CUstream_st*)", ""),
    ("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long) const", ""),
    ("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, "
     "c10::ScalarType, std::optional<c10::MemoryFormat>)", ""),
    ("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, "
     "std::optional<c10::MemoryFormat>)", "??"),
    ("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, "
     "std::optional<c10::MemoryFormat>)", "??"),
]
INTERPRETER = [("_PyEval_EvalFrameDefault", "??"), ("PyCode_NewWithPosOnlyArgs", "??"),
               ("_PyFunction_Vectorcall", "??")]
PROCESS = [("Py_RunMain", "??"), ("Py_BytesMain", "??"), ("__libc_start_call_main", "??"),
           ("__libc_start_main_alias_2", ""), ("_start", "??")]
ENGINE = [("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??"),
          ("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
           "torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> "
           "const&)", "??"),
          ("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??"),
          ("torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> "
           "const&, bool)", "??"),
          ("execute_native_thread_routine", "thread.cc"), ("start_thread", "??"), ("__clone3", "")]


@dataclass(frozen=True)
class LlmShape:
    """The run: layers, hidden and MLP sizes, tokens per step (batch x sequence), steps, bytes per element."""

    layers: int = 4
    hidden: int = 2048
    intermediate: int = 5504
    heads: int = 16
    tokens: int = 2048
    vocab: int = 32000
    steps: int = 40
    element: int = 2
    seed: int = 0


class _Frames:
    """Frame dicts made once and shared, like the ones torch hands to the snapshot."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, int], dict[str, Any]] = {}

    def frame(self, name: str, filename: str, line: int = 0) -> dict[str, Any]:
        key = (name, filename, line)
        f = self._cache.get(key)
        if f is None:
            f = self._cache[key] = {"name": name, "filename": filename, "line": line}
        return f

    def cxx(self, names: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [self.frame(n, f) for n, f in names]

    def python(self, calls: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
        """Python frames (innermost first), each followed by the interpreter frames that ran it."""
        out: list[dict[str, Any]] = []
        for name, filename, line in calls:
            out.append(self.frame(name, filename, line))
            out += self.cxx(INTERPRETER)
        return out


def _op(name: str, kernel: str | None = None) -> list[tuple[str, str]]:
    """The C++ frames of one ATen operator between the allocator and its caller, innermost first: the output's
    creation, the kernel, its registration wrapper, then the dispatcher through autograd and autocast."""
    kernel = kernel or name
    functor = ("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
               "c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&)>>>::call(c10::OperatorKernel*, "
               "c10::DispatchKeySet, at::Tensor const&)")
    return [("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??"),
            ("at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
             "c10::TensorOptions const&)", "RegisterCUDA.cpp"),
            (f"at::(anonymous namespace)::structured_{name}_out_cuda_functional::set_output_raw_strided(long, "
             "c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)",
             "RegisterCUDA.cpp"),
            (f"at::meta::structured_{name}::meta(at::Tensor const&, at::Tensor const&)", "??"),
            (f"at::native::{kernel}(at::Tensor const&, at::Tensor const&)", "??"),
            (f"at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_{name}(at::Tensor const&)",
             "RegisterCUDA.cpp"),
            (functor, "RegisterCUDA.cpp"),
            (f"at::_ops::{name}::redispatch(c10::DispatchKeySet, at::Tensor const&)", "??"),
            (f"torch::ADInplaceOrView::(anonymous namespace)::{name}(c10::DispatchKeySet, at::Tensor const&)",
             "ADInplaceOrViewType_0.cpp"),
            (functor, "ADInplaceOrViewType_0.cpp"),
            (f"at::_ops::{name}::redispatch(c10::DispatchKeySet, at::Tensor const&)", "??"),
            (f"torch::autograd::VariableType::(anonymous namespace)::{name}(c10::DispatchKeySet, at::Tensor const&)",
             "VariableType_2.cpp"),
            (functor, "VariableType_2.cpp"),
            (f"at::_ops::{name}::redispatch(c10::DispatchKeySet, at::Tensor const&)", "??"),
            (f"at::autocast::WrapFunction_<at::autocast::CastPolicy::lower_precision_fp, c10::DeviceType::CUDA, "
             f"at::Tensor (at::Tensor const&), &at::_ops::{name}::call>::call(at::Tensor const&)", "autocast_mode.cpp"),
            (functor, "autocast_mode.cpp"),
            (f"at::_ops::{name}::call(at::Tensor const&)", "??")]


class _Run:
    def __init__(self, shape: LlmShape) -> None:
        self.s = shape
        self.f = _Frames()
        self.a = CachingAllocatorModel()
        self.rng = random.Random(shape.seed)
        self._stacks: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def stack(self, op: list[tuple[str, str]], python: list[tuple[str, str, int]],
              binding: str = "torch::autograd::THPVariable_linear") -> list[dict[str, Any]]:
        """A forward stack: allocator, operator, Python binding, Python frames (innermost first), process."""
        key = (tuple(op), tuple(python), binding)
        base = self._stacks.get(key)
        if base is None:
            base = self.f.cxx(ALLOCATOR + op + [(f"{binding}(_object*, _object*, _object*)", "python_nn_functions.cpp")])
            base += self.f.python(python) + self.f.cxx(PROCESS)
            self._stacks[key] = base
        return list(base)  # one list per allocation, its frees share it

    def backward_stack(self, op: list[tuple[str, str]], node: str) -> list[dict[str, Any]]:
        key = (tuple(op), node)
        base = self._stacks.get(key)
        if base is None:
            base = self.f.cxx(ALLOCATOR + op + [(f"torch::autograd::generated::{node}::apply("
                                                 "std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??")]
                              + ENGINE)
            self._stacks[key] = base
        return list(base)

    def linear(self, size: int, layer_line: int, line: int) -> int:
        """An ``nn.Linear`` output inside a decoder layer: ``modeling_llama.py`` ``line`` calls ``linear.py``."""
        return self.alloc(size, self.stack(_op("mm"), _model_calls(
            layer_line, [("forward", LINEAR, 125), ("_call_impl", MODULE, 1750), ("forward", LLAMA, line)])))

    def alloc(self, size: int, frames: list[dict[str, Any]]) -> int:
        self.a.tick(self.rng.randint(20, 400))
        return self.a.malloc(size, frames)

    def free(self, addr: int) -> None:
        self.a.tick(self.rng.randint(5, 60))
        self.a.free(addr)


def _model_calls(layer_line: int, inner: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """Python frames from ``inner`` out to the user's train.py, through the decoder layer and the model."""
    call = [("_call_impl", MODULE, 1750), ("_wrapped_call_impl", MODULE, 1739)]
    return [*inner, *call, ("forward", LLAMA, layer_line), *call, ("forward", LLAMA, 571), *call, *CHECKPOINT,
            ("forward", LLAMA, 1163), *call, *OUTER, *call, *LOOP]


def llm_training_snapshot(shape: LlmShape | None = None) -> dict[str, Any]:
    """The snapshot dict of ``shape.steps`` training steps (``torch.cuda.memory._snapshot()``'s fields)."""
    s = shape or LlmShape()
    run = _Run(s)
    e, h, m, t = s.element, s.hidden, s.intermediate, s.tokens
    # weights and their gradients: allocated once (the model's .to("cuda"), then the first backward)
    load = run.stack(_op("_to_copy"), [("_apply", MODULE, 942), ("to", MODULE, 1343), ("main", TRAIN, 118),
                                       ("<module>", TRAIN, 163)], "torch::autograd::THPVariable_to")
    weights = [(h * h, "q"), (h * h, "k"), (h * h, "v"), (h * h, "o"), (h * m, "gate"), (h * m, "up"),
               (m * h, "down")]
    for _ in range(s.layers):
        for n, _name in weights:
            run.alloc(n * e, load)
    run.alloc(s.vocab * h * e, load)
    grads: list[int] = []
    states: list[int] = []
    for step in range(s.steps):
        saved: list[int] = []  # activations kept for backward
        x = run.alloc(t * h * e, run.stack(_op("embedding"), _model_calls(
            1156, [("forward", SITE + "torch/nn/modules/sparse.py", 190), ("embedding", FUNCTIONAL, 2551)])))
        saved.append(x)
        for _layer in range(s.layers):
            for line in (318, 319, 320):  # q_proj, k_proj, v_proj
                saved.append(run.linear(t * h * e, 484, line))
            scores = run.alloc(s.heads * t * t * e, run.stack(
                _op("_scaled_dot_product_efficient_attention"),
                _model_calls(484, [("sdpa_attention_forward", SITE + "transformers/integrations/sdpa_attention.py",
                                    66), ("forward", LLAMA, 354)]),
                "torch::autograd::THPVariable_scaled_dot_product_attention"))
            saved.append(run.linear(t * h * e, 484, 367))  # o_proj
            run.free(scores)
            gate = run.linear(t * m * e, 496, 164)
            act = run.alloc(t * m * e, run.stack(_op("silu"), _model_calls(
                496, [("silu", FUNCTIONAL, 2380), ("forward", SITE + "torch/nn/modules/activation.py", 434),
                      ("_call_impl", MODULE, 1750), ("forward", LLAMA, 164)]), "torch::autograd::THPVariable_silu"))
            saved += [gate, act, run.linear(t * m * e, 496, 164), run.linear(t * h * e, 496, 164)]
        head = [("forward", LINEAR, 125), ("_call_impl", MODULE, 1750), ("forward", LLAMA, 1181), *OUTER, *LOOP]
        logits = run.alloc(t * s.vocab * 4, run.stack(_op("mm"), head))
        loss = run.alloc(4, run.stack(_op("nll_loss_forward", "nll_loss_forward_out_cuda"), [
            ("cross_entropy", FUNCTIONAL, 3494), ("ForCausalLMLoss", SITE + "transformers/loss/loss_utils.py", 63),
            ("forward", LLAMA, 1190), *OUTER, *LOOP], "torch::autograd::THPVariable_cross_entropy_loss"))
        # backward: the engine's thread, C++ only; activations freed as their gradients are made
        dlogits = run.alloc(t * s.vocab * 4, run.backward_stack(_op("_log_softmax_backward_data"),
                                                                "LogSoftmaxBackward0"))
        run.free(logits)
        run.free(dlogits)
        run.free(loss)
        for _layer in range(s.layers):
            for _ in range(3):
                g = run.alloc(t * m * e, run.backward_stack(_op("mm"), "MmBackward0"))
                run.free(g)
            g = run.alloc(t * m * e, run.backward_stack(_op("silu_backward"), "SiluBackward0"))
            run.free(g)
            for _ in range(4):
                g = run.alloc(t * h * e, run.backward_stack(_op("mm"), "MmBackward0"))
                run.free(g)
            g = run.alloc(s.heads * t * t * e, run.backward_stack(
                _op("_scaled_dot_product_efficient_attention_backward"),
                "ScaledDotProductEfficientAttentionBackward0"))
            run.free(g)
            for _ in range(8):
                run.free(saved.pop())
            if step == 0:  # the first backward allocates each weight's gradient, kept for the optimizer
                for n, _name in weights:
                    grads.append(run.alloc(n * e, run.backward_stack(_op("mm"), "MmBackward0")))
        while saved:
            run.free(saved.pop())
        # AdamW: the first step makes exp_avg and exp_avg_sq; every step makes foreach temporaries
        step_loop = [("step", SITE + "accelerate/optimizer.py", 178), ("_inner_training_loop", TRAINER, 2620),
                     ("train", TRAINER, 2245), ("main", TRAIN, 141), ("<module>", TRAIN, 163)]
        adam = [("_multi_tensor_adamw", ADAMW, 480), ("adamw", ADAMW, 330), ("step", ADAMW, 209),
                ("wrapper", SITE + "torch/optim/optimizer.py", 485), *step_loop]
        if step == 0:
            init = [("_init_group", ADAMW, 130), ("step", ADAMW, 200),
                    ("wrapper", SITE + "torch/optim/optimizer.py", 485), *step_loop]
            for _ in range(2):
                for n, _name in weights * s.layers:
                    states.append(run.alloc(n * 4, run.stack(_op("zeros_like"), init,
                                                             "torch::autograd::THPVariable_zeros_like")))
        for n, _name in weights:
            tmp = run.alloc(n * 4 * s.layers, run.stack(_op("_foreach_sqrt", "foreach_tensor_sqrt_cuda"), adam,
                                                        "torch::autograd::THPVariable__foreach_sqrt"))
            run.free(tmp)
        run.a.tick(2000)
        run.a.release_cache(run.f.python([("empty_cache", SITE + "torch/cuda/memory.py", 222),
                                          ("on_step_end", "/home/user/llm-finetune/callbacks.py", 31),
                                          ("call_event", SITE + "transformers/trainer_callback.py", 557),
                                          ("_inner_training_loop", TRAINER, 2650), ("train", TRAINER, 2245),
                                          ("main", TRAIN, 141), ("<module>", TRAIN, 163)]))
        run.a.tick(run.rng.randint(30_000, 60_000))
    return run.a.snapshot()
