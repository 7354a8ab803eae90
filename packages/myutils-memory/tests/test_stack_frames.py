"""Which frames name a stack: Python-only, C++-only and mixed stacks as torch records them, and the views."""

from __future__ import annotations

from typing import Any

import pytest

from my_utils.memory.stack_frames import (
    FrameView,
    StackNamer,
    aten_operation,
    frame_label,
    is_torch_path,
    short_path,
)

SITE = "/venv/lib/python3.11/site-packages/"

# the allocator's own frames, as CapturedTraceback records them at the start of every C++ stack
ALLOCATOR = [
    ("torch::unwind::unwind()", "??"),
    ("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
    ("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)",
     "CUDACachingAllocator.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long) const", ""),
    ("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, "
     "std::optional<c10::MemoryFormat>)", "??"),
    ("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??"),
]
BATCH_NORM_CXX = [
    ("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)", "??"),
    ("at::native::cudnn_batch_norm(at::Tensor const&, at::Tensor const&)", "??"),
    ("at::_ops::cudnn_batch_norm::call(at::Tensor const&, at::Tensor const&)", "??"),
    ("at::native::_batch_norm_impl_index(at::Tensor const&, at::Tensor const&)", "??"),
    ("at::native::batch_norm(at::Tensor const&, at::Tensor const&)", "??"),
    ("c10::impl::wrap_kernel_functor_unboxed_<...>::call(c10::OperatorKernel*)", "RegisterCompositeImplicitAutograd.cpp"),
    ("at::_ops::batch_norm::call(at::Tensor const&, at::Tensor const&)", "??"),
    ("torch::autograd::THPVariable_batch_norm(_object*, _object*, _object*)", "python_torch_functions_2.cpp"),
]
INTERPRETER = [("_PyEval_EvalFrameDefault", "??"), ("_PyFunction_Vectorcall", "??")]
PROCESS = [("Py_BytesMain", "??"), ("__libc_start_main_alias_2", ""), ("_start", "??")]
ENGINE_TAIL = [
    ("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??"),
    ("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)", "??"),
    ("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??"),
    ("execute_native_thread_routine", "thread.cc"), ("start_thread", "??"), ("__clone3", ""),
]


def cxx(frames: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"name": n, "filename": f, "line": 0} for n, f in frames]


def py(*calls: tuple[str, str, int], interpreter: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, filename, line in calls:
        out.append({"name": name, "filename": filename, "line": line})
        if interpreter:
            out += cxx(INTERPRETER)
    return out


BN = ("batch_norm", SITE + "torch/nn/functional.py", 2482)
BN_MODULE = ("forward", SITE + "torch/nn/modules/batchnorm.py", 175)
CALL = ("_call_impl", SITE + "torch/nn/modules/module.py", 1520)
USER_FWD = ("forward", "/home/me/project/models/cnn.py", 59)
USER_STEP = ("train_step", "/home/me/project/train.py", 115)
USER_MAIN = ("<module>", "/home/me/project/train.py", 218)


def mixed_batch_norm() -> list[dict[str, Any]]:
    """A forward batch norm recorded with stacks="all": allocator, ATen, binding, then Python with CPython around."""
    return cxx(ALLOCATOR + BATCH_NORM_CXX) + py(BN, BN_MODULE, CALL, USER_FWD, CALL, USER_STEP, USER_MAIN) + \
        cxx(PROCESS)


def label(frame: tuple[str, str, int]) -> str:
    return frame_label(frame)


def test_mixed_stack_is_named_by_the_operation_and_the_users_frames() -> None:
    ident = StackNamer().identify(mixed_batch_norm())
    assert ident.operation == "batch_norm (torch/nn/functional.py:2482)"
    assert ident.frames == (USER_FWD, USER_STEP, USER_MAIN)
    assert [label(f) for f in ident.frames] == ["forward (models/cnn.py:59)", "train_step (project/train.py:115)",
                                                "<module> (project/train.py:218)"]


def test_depth_counts_the_users_frames() -> None:
    assert StackNamer(depth=2).identify(mixed_batch_norm()).frames == (USER_FWD, USER_STEP)


def test_python_only_stack() -> None:
    """stacks="python": no C++ frame at all; PyTorch's frames still give the operation, not the name."""
    frames = py(BN, BN_MODULE, CALL, USER_FWD, USER_MAIN, interpreter=False)
    ident = StackNamer().identify(frames)
    assert (ident.operation, ident.frames) == ("batch_norm (torch/nn/functional.py:2482)", (USER_FWD, USER_MAIN))


def test_cpp_only_stack_goes_to_the_aten_operator_never_the_allocator() -> None:
    """The autograd engine's thread: the outermost ATen operator and the node that called it."""
    frames = cxx([*ALLOCATOR, ("at::native::empty_cuda(c10::ArrayRef<long>)", "??"), ("at::native::cudnn_convolution_backward_input(at::Tensor const&)", "??"), ("at::native::cudnn_convolution_backward(at::Tensor const&)", "??"), ("at::_ops::cudnn_convolution_backward::call(at::Tensor const&)", "??"), ("at::native::convolution_backward(at::Tensor const&, at::Tensor const&)", "??"), ("at::_ops::convolution_backward::call(at::Tensor const&, at::Tensor const&)", "??"), ("torch::autograd::generated::ConvolutionBackward0::apply(std::vector<at::Tensor>&&)", "??"), *ENGINE_TAIL])
    ident = StackNamer().identify(frames)
    assert ident.frames == () and ident.operation == "aten::convolution_backward in ConvolutionBackward0"
    assert "Caching" not in ident.operation and "unwind" not in ident.operation


def test_cpp_only_stack_without_a_kernel_frame_uses_the_dispatcher_entry() -> None:
    """Structured kernels leave no at::native frame: the at::_ops entry names the operator, its overload dotted."""
    frames = cxx([*ALLOCATOR, ("at::meta::structured_threshold_backward::meta(at::Tensor const&)", "??"), ("at::_ops::threshold_backward::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", "??"), ("torch::autograd::generated::ReluBackward0::apply(std::vector<at::Tensor>&&)", "??"), *ENGINE_TAIL])
    assert StackNamer().identify(frames).operation == "aten::threshold_backward in ReluBackward0"
    assert aten_operation(["at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)"]) == "aten::mul.Tensor"
    assert aten_operation(["at::_ops::_to_copy::call(at::Tensor const&)"]) == "aten::_to_copy"


def test_anomaly_checks_run_by_the_engine_itself() -> None:
    frames = cxx([*ALLOCATOR, ("at::native::isnan(at::Tensor const&)", "??"), ("at::_ops::isnan::call(at::Tensor const&)", "??"), *ENGINE_TAIL])
    assert StackNamer().identify(frames).operation == "aten::isnan in the autograd engine"


def test_cpp_only_stack_without_aten_says_so() -> None:
    frames = cxx([*ALLOCATOR, ("ncclCommInitRank", "??")])
    assert StackNamer().identify(frames).operation == "(no Python frame, no ATen operator)"


def test_another_librarys_code_in_site_packages_counts_as_the_users() -> None:
    """transformers is not PyTorch: its modeling file names the stack; torch's linear.py is the operation."""
    llama = SITE + "transformers/models/llama/modeling_llama.py"
    frames = cxx(ALLOCATOR) + py(("forward", SITE + "torch/nn/modules/linear.py", 125), CALL, ("forward", llama, 318),
                                 CALL, ("forward", llama, 484), ("train", SITE + "transformers/trainer.py", 2245),
                                 USER_MAIN)
    ident = StackNamer().identify(frames)
    assert ident.operation == "forward (torch/nn/modules/linear.py:125)"
    assert [label(f) for f in ident.frames] == [
        "forward (transformers/models/llama/modeling_llama.py:318)",
        "forward (transformers/models/llama/modeling_llama.py:484)",
        "train (transformers/trainer.py:2245)", "<module> (project/train.py:218)"]


def test_users_frame_calling_aten_directly_gets_the_operator_from_its_cpp_frames() -> None:
    """``x.to("cuda")`` in the user's own code: no PyTorch Python frame, so the ATen operator names what allocated."""
    to = [("at::native::_to_copy(at::Tensor const&)", "??"), ("at::_ops::_to_copy::call(at::Tensor const&)", "??"),
          ("at::native::to(at::Tensor const&, std::optional<c10::ScalarType>)", "??"),
          ("at::_ops::to_dtype_layout::call(at::Tensor const&)", "??"),
          ("torch::autograd::THPVariable_to(_object*, _object*, _object*)", "python_variable_methods.cpp")]
    frames = cxx(ALLOCATOR + to) + py(USER_STEP, USER_MAIN)
    ident = StackNamer().identify(frames)
    assert (ident.operation, ident.frames) == ("aten::to", (USER_STEP, USER_MAIN))


def test_only_pytorch_frames_shows_those() -> None:
    """A thread PyTorch started (no user frame): its own Python frames, rather than nothing."""
    pin = ("_pin_memory_loop", SITE + "torch/utils/data/_utils/pin_memory.py", 52)
    loop = ("do_one_step", SITE + "torch/utils/data/_utils/pin_memory.py", 31)
    ident = StackNamer().identify(cxx(ALLOCATOR) + py(loop, pin))
    assert ident.frames == (loop, pin)


@pytest.mark.parametrize(("view", "first"), [
    ("python", BN),
    ("all", ("torch::unwind::unwind()", "??", 0)),
])
def test_views_keep_pytorchs_frames_or_everything(view: str, first: tuple[str, str, int]) -> None:
    ident = StackNamer(FrameView(view), depth=3).identify(mixed_batch_norm())
    assert ident.frames[0] == first and len(ident.frames) == 3 and ident.operation == ""


def test_profile_made_frames_carry_their_place_in_the_name() -> None:
    """``_profile_to_snapshot`` writes ``file(line): name`` with filename "none"."""
    frames = [{"filename": "none", "line": 0, "name": "<built-in function linear>"},
              {"filename": "none", "line": 0, "name": "torch/nn/modules/linear.py(130): forward"},
              {"filename": "none", "line": 0, "name": "torch/nn/modules/module.py(1782): _call_impl"},
              {"filename": "none", "line": 0, "name": "nn.Module: Linear_0"},
              {"filename": "none", "line": 0, "name": "examples/fit.py(7): <module>"}]
    ident = StackNamer().identify(frames)
    assert ident.operation == "forward (torch/nn/modules/linear.py:130)"
    assert [label(f) for f in ident.frames] == ["nn.Module: Linear_0", "<module> (examples/fit.py:7)"]
    direct = [frames[0], {"filename": "none", "line": 0, "name": "<stdin>(3): <module>"}]
    assert StackNamer().identify(direct).operation == "torch.linear"


def test_frames_lists_are_read_once() -> None:
    namer = StackNamer()
    frames = mixed_batch_norm()
    assert namer.identify(frames) is namer.identify(frames)
    assert namer.identify(None).frames == () and namer.identify([]).operation == ""


@pytest.mark.parametrize(("path", "torch"), [
    (SITE + "torch/nn/functional.py", True),
    ("/usr/lib/python3/dist-packages/torch/_tensor.py", True),
    ("torch/nn/modules/linear.py", True),
    (SITE + "torchvision/models/resnet.py", False),
    (SITE + "transformers/models/llama/modeling_llama.py", False),
    ("/home/me/torch_experiments/train.py", False),
])
def test_torch_paths(path: str, torch: bool) -> None:
    assert is_torch_path(path) is torch


def test_short_paths() -> None:
    assert short_path(SITE + "torch/nn/functional.py") == "torch/nn/functional.py"
    assert short_path("/home/me/project/models/cnn.py") == "models/cnn.py"
    assert short_path("train.py") == "train.py" and short_path("torch/nn/functional.py") == "torch/nn/functional.py"
