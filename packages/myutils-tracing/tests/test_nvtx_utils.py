"""Labelers: backend choice, the no-tool path, and the NVTX calls really emitted (recorded)."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest

from my_utils.tracing import nvtx_utils
from my_utils.tracing.nvtx_utils import NoOpLabeler, NvtxLabeler, TorchNvtxLabeler, create_labeler

LABELER_METHODS = ("register_label", "start", "stop", "range", "mark", "push", "pop")


# -- choosing a labeler -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "enabled", "expected"),
    [
        ("1", None, NvtxLabeler),
        ("true", None, NvtxLabeler),
        ("0", None, NoOpLabeler),
        (None, None, NoOpLabeler),
        ("0", True, NvtxLabeler),  # an explicit argument wins over the variable
        ("1", False, NoOpLabeler),
    ],
)
def test_create_labeler_reads_enable_nvtx_only_when_enabled_is_none(
    monkeypatch: pytest.MonkeyPatch, env: str | None, enabled: bool | None, expected: type
) -> None:
    if env is None:
        monkeypatch.delenv("ENABLE_NVTX", raising=False)
    else:
        monkeypatch.setenv("ENABLE_NVTX", env)
    labeler = create_labeler(enabled=enabled, default_domain="training")
    assert isinstance(labeler, expected)
    assert labeler.default_domain == "training"


def test_without_a_tool_nvtx_labeler_binds_the_no_op_path() -> None:
    labeler = NvtxLabeler(enabled=True, default_domain="training")
    assert not labeler.active
    assert "no NVTX tool is attached" in labeler.reason
    # every call is a real no-op: none raises, tokens are None, ranges are shared
    labeler.register_label("x", color="blue")
    assert labeler.start("x") is None
    labeler.stop(None)
    labeler.pop()  # unbalanced, but nothing is tracked on the no-op path
    assert labeler.range("a") is labeler.range("b")
    with labeler.range("x"):
        labeler.mark("m")
    assert labeler.problems == 0


def test_without_nvtx_package_falls_back_to_torch_then_noop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nvtx", None)  # makes `import nvtx` raise ImportError
    labeler = create_labeler(enabled=True)
    torch_ok, _ = nvtx_utils.torch_nvtx_status()
    if torch_ok:
        assert isinstance(labeler, TorchNvtxLabeler)
    else:
        assert isinstance(labeler, NoOpLabeler)
        assert "nvtx is not installed" in labeler.reason and "without CUDA" in labeler.reason
    dormant = NvtxLabeler(enabled=True)
    assert not dormant.active and "pip install nvtx" in dormant.reason


def test_noop_labeler_has_the_whole_protocol() -> None:
    labeler = NoOpLabeler()
    assert isinstance(labeler, nvtx_utils.Labeler)
    for name in LABELER_METHODS:
        assert callable(getattr(labeler, name))
    token = labeler.start("a", color="red", domain_name="d", category="c")  # type: ignore[func-returns-value]
    labeler.stop(token)
    with labeler.range("r"):
        labeler.push("p")
        labeler.pop()
    assert not labeler.active


def test_torch_labeler_on_a_cpu_build_goes_dormant_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    if hasattr(torch._C, "_nvtx"):
        pytest.skip("this torch is a CUDA build: torch.cuda.nvtx works here")
    # the real failure the labeler protects from
    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        torch.cuda.nvtx.range_push("x")
    from my_utils.tracing import _torch_labeler

    _torch_labeler._warned.clear()
    with caplog.at_level(logging.WARNING, logger="my_utils.tracing"):
        first = TorchNvtxLabeler(enabled=True, default_domain="torch_app")
        second = TorchNvtxLabeler(enabled=True)
    warnings = [r for r in caplog.records if "TorchNvtxLabeler emits nothing" in r.getMessage()]
    assert len(warnings) == 1 and "without CUDA" in warnings[0].getMessage()
    for labeler in (first, second):
        assert isinstance(labeler, TorchNvtxLabeler) and not labeler.active
        with labeler.range("training_step"):
            labeler.push("data_processing")
            labeler.pop()
        labeler.stop(labeler.start("s"))
        labeler.mark("m")


def test_torch_labeler_disabled_never_imports_torch() -> None:
    code = ("import sys\nfrom my_utils.tracing.nvtx_utils import TorchNvtxLabeler\n"
            "l = TorchNvtxLabeler(enabled=False)\nassert not l.active, l\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_legacy_paths_resolve_to_the_same_objects() -> None:
    import my_utils
    import my_utils.nvtx_utils as flat

    assert flat is nvtx_utils
    assert my_utils.create_labeler is create_labeler
    assert my_utils.TorchNvtxLabeler is TorchNvtxLabeler
    assert my_utils.NoOpLabeler is NoOpLabeler


# -- what really reaches NVTX (injection recorder, one subprocess per case) ----------------


def test_names_domains_categories_colours_and_marks_are_emitted(run_recorded: Any) -> None:
    run = run_recorded("""
        from my_utils.tracing.nvtx_utils import create_labeler
        lab = create_labeler(enabled=True, default_domain="training")
        assert lab.active, lab
        lab.register_label("model.forward", color="blue", category="fwd")
        lab.register_label("model.layer_00.ffn", color="red", domain_name="layers")
        with lab.range("model.forward"):
            with lab.range("model.layer_00.ffn"):
                lab.mark("checkpoint_saved", color="green")
        lab.push("custom", color=0xFF123456, category=7)
        lab.pop()
    """)
    calls = run.calls
    assert [(c.op, c.domain, c.message) for c in calls if c.op == "domain"] == [
        ("domain", "training", "-"), ("domain", "layers", "-")]
    assert ("category", "training", "fwd") in run.ops("category")
    fwd = next(c for c in calls if c.op == "push" and c.message == "model.forward")
    assert (fwd.domain, fwd.color, fwd.category) == ("training", "000000ff", "1")
    ffn = next(c for c in calls if c.op == "push" and c.message == "model.layer_00.ffn")
    assert (ffn.domain, ffn.color) == ("layers", "00ff0000")
    mark = next(c for c in calls if c.op == "mark")
    assert (mark.domain, mark.message, mark.color) == ("training", "checkpoint_saved", "00008000")
    custom = next(c for c in calls if c.message == "custom")
    assert (custom.color, custom.category) == ("ff123456", "7")
    # nesting: pops close the inner domain's range first
    assert run.ops("push", "pop") == [
        ("push", "training", "model.forward"), ("push", "layers", "model.layer_00.ffn"),
        ("pop", "layers", "-"), ("pop", "training", "-"),
        ("push", "training", "custom"), ("pop", "training", "-")]


def test_start_stop_are_process_ranges_with_matching_ids(run_recorded: Any) -> None:
    run = run_recorded("""
        import threading
        from my_utils.tracing.nvtx_utils import NvtxLabeler
        lab = NvtxLabeler(enabled=True, default_domain="async")
        a = lab.start("a", color="yellow")
        b = lab.start("b")
        lab.stop(a)  # not LIFO: allowed for process ranges
        t = threading.Thread(target=lab.stop, args=(b,))  # and may end on another thread
        t.start(); t.join()
        print(lab.problems)
    """)
    starts = {c.message: c for c in run.calls if c.op == "start"}
    ends = [c.range_id for c in run.calls if c.op == "end"]
    assert starts["a"].color == "00ffff00" and starts["a"].domain == "async"
    assert ends == [starts["a"].range_id, starts["b"].range_id]
    assert run.stdout.strip() == "0"


def test_unbalanced_stop_and_pop_are_repaired_and_reported_once(run_recorded: Any) -> None:
    run = run_recorded("""
        from my_utils.tracing.nvtx_utils import NvtxLabeler
        lab = NvtxLabeler(enabled=True, default_domain="d")
        tok = lab.start("once")
        lab.stop(tok)
        lab.stop(tok)        # already stopped
        lab.stop("bogus")    # never started
        lab.pop()            # nothing pushed
        with lab.range("outer"):
            lab.push("leaked")   # never popped: the range closes it
        try:
            with lab.range("raises"):
                raise ValueError("boom")
        except ValueError:
            pass
        print(lab.problems)
    """)
    assert run.stdout.strip() == "4"
    assert run.stderr.count("reported once") == 1, run.stderr
    assert "stop(<NVTX range 'once'" in run.stderr
    assert [c.op for c in run.calls if c.op in ("start", "end")] == ["start", "end"]
    assert run.ops("push", "pop") == [
        ("push", "d", "outer"), ("push", "d", "leaked"), ("pop", "d", "-"), ("pop", "d", "-"),
        ("push", "d", "raises"), ("pop", "d", "-")]


def test_push_stacks_are_per_thread(run_recorded: Any) -> None:
    run = run_recorded("""
        import threading
        from my_utils.tracing.nvtx_utils import NvtxLabeler
        lab = NvtxLabeler(enabled=True, default_domain="d")
        lab.push("main")
        def worker():
            lab.pop()  # this thread pushed nothing
        t = threading.Thread(target=worker); t.start(); t.join()
        lab.pop()
        print(lab.problems)
    """)
    assert run.stdout.strip() == "1"
    assert run.ops("push", "pop") == [("push", "d", "main"), ("pop", "d", "-")]


def test_bad_colour_is_misuse_raised_at_once(run_recorded: Any) -> None:
    run = run_recorded("""
        from my_utils.core.errors import UsageError
        from my_utils.tracing.nvtx_utils import NvtxLabeler
        lab = NvtxLabeler(enabled=True, default_domain="d")
        try:
            lab.register_label("x", color="no-such-colour")
        except UsageError as exc:
            print(exc)
    """)
    assert "label 'x'" in run.stdout and "no-such-colour" in run.stdout and "'blue'" in run.stdout


def test_the_seed_labeler_example_runs_unchanged(run_recorded: Any) -> None:
    run = run_recorded("""
        import time
        def model(x): return x
        def attention(x): return x
        input = x = 1
        from my_utils import create_labeler

        # 推荐：框架代码统一通过 create_labeler 获取后端
        labeler = create_labeler(enabled=True, default_domain="my_app")

        # 预注册常用标签（可选，提升性能）
        labeler.register_label("model.forward", color="blue")
        labeler.register_label("model.layer_00.attention", color="green")
        labeler.register_label("model.layer_00.ffn", color="red")

        # 方式1: 上下文管理器（推荐）
        with labeler.range("model.forward"):
            output = model(input)
            with labeler.range("model.layer_00.attention"):
                attn_out = attention(x)

        # 方式2: 手动start/stop
        token = labeler.start("custom_operation", color="yellow")
        # ... 你的代码 ...
        labeler.stop(token)

        # 方式3: 标记单点事件
        labeler.mark("checkpoint_saved")

        from my_utils import TorchNvtxLabeler
        nvtx = TorchNvtxLabeler(enabled=True, default_domain="torch_app")
        with nvtx.range("training_step"):
            loss = 0.0
        nvtx.push("data_processing")
        nvtx.pop()
    """)
    assert run.ops("push", "pop", "start", "end", "mark") == [
        ("push", "my_app", "model.forward"), ("push", "my_app", "model.layer_00.attention"),
        ("pop", "my_app", "-"), ("pop", "my_app", "-"),
        ("start", "my_app", "custom_operation"), ("end", "my_app", "-"),
        ("mark", "my_app", "checkpoint_saved")]
    attention = next(c for c in run.calls if c.message == "model.layer_00.attention")
    assert attention.color == "00008000"


def test_nvtx_disable_keeps_the_labeler_dormant(run_recorded: Any) -> None:
    run = run_recorded("""
        from my_utils.tracing.nvtx_utils import create_labeler
        lab = create_labeler(enabled=True)
        with lab.range("x"):
            pass
        print(lab.active, lab.reason)
    """, env={"NVTX_DISABLE": "1"})
    assert run.stdout.startswith("False NVTX_DISABLE")
    assert run.ops("push") == []


@pytest.mark.cuda
def test_torch_labeler_emits_through_torch_cuda_nvtx(run_recorded: Any) -> None:
    torch = pytest.importorskip("torch")
    if not hasattr(torch._C, "_nvtx"):
        pytest.skip("needs a CUDA build of torch (torch.cuda.nvtx raises on this CPU build)")
    run = run_recorded("""
        from my_utils.tracing.nvtx_utils import TorchNvtxLabeler
        lab = TorchNvtxLabeler(enabled=True)
        assert lab.active, lab
        with lab.range("torch_step"):
            lab.mark("torch_mark")
        lab.stop(lab.start("torch_async"))
        lab.pop()
        print(lab.problems)
    """)
    assert ("push", "<default>", "torch_step") in run.ops("push")
    assert ("mark", "<default>", "torch_mark") in run.ops("mark")
    assert [c.op for c in run.calls if c.op in ("start", "end")] == ["start", "end"]
    assert run.stdout.strip() == "1"
