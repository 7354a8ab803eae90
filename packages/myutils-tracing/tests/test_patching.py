"""MethodPatcher: every kind of place, exact restoration in any order, threads, and real torch targets."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.tracing.patching import MethodPatcher, PatchedCall, patched


class Recorder:
    """A context factory that records entries and exits (label, args) in order."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def __call__(self, call: PatchedCall) -> Iterator[None]:
        with self.lock:
            self.log.append(("enter", self.tag or call.label))
        try:
            yield
        finally:
            with self.lock:
                self.log.append(("exit", self.tag or call.label))


class Base:
    def method(self, x: int) -> int:
        return x + 1

    @staticmethod
    def static(x: int) -> int:
        return x * 2

    @classmethod
    def klass(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


class Child(Base):
    pass


def module_function(x: int) -> int:
    """A module-level function."""
    return x - 1


module_function.tag = "kept"  # type: ignore[attr-defined]


def _raw(owner: Any, name: str) -> Any:
    return vars(owner).get(name, "<absent>")


def test_class_function_is_wrapped_and_restored_by_identity() -> None:
    before = _raw(Base, "method")
    rec = Recorder()
    with MethodPatcher() as p:
        handle = p.patch_with_context(Base.method, rec)
        assert Base().method(1) == 2 and Child().method(2) == 3
        assert Base.method.__wrapped__ is before and Base.method.__name__ == "method"
        assert handle.places == (f"{__name__}.Base.method",)
    assert _raw(Base, "method") is before
    assert rec.log == [("enter", f"{__name__}.Base.method"), ("exit", f"{__name__}.Base.method")] * 2
    assert not handle.active


def test_staticmethod_and_classmethod_keep_their_descriptor() -> None:
    static_before, class_before = _raw(Base, "static"), _raw(Base, "klass")
    rec = Recorder()
    p = MethodPatcher()
    p.patch_with_context(Base.static, rec)            # a staticmethod's function object
    p.patch_with_context(Child.klass, rec)           # bound to Child, defined on Base
    assert isinstance(_raw(Base, "static"), staticmethod) and isinstance(_raw(Base, "klass"), classmethod)
    assert Base().static(3) == 6 and Base.static(3) == 6   # still no self
    assert Child.klass(4) == "Child:4" and Child().klass(5) == "Child:5"  # still the calling class
    assert len(rec.log) == 8
    outcomes = p.unpatch_all()
    assert [o.restored for o in outcomes] == [True, True]
    assert _raw(Base, "static") is static_before and _raw(Base, "klass") is class_before


def test_inherited_method_patched_on_the_subclass_is_deleted_again() -> None:
    rec = Recorder()
    with MethodPatcher() as p:
        p.patch_with_context((Child, "method"), rec)
        assert "method" in vars(Child)
        Base().method(1)
        assert rec.log == []                      # the base class is untouched
        Child().method(1)
        assert len(rec.log) == 2
    assert "method" not in vars(Child) and Child.method is Base.method


def test_module_function_keeps_its_attributes_and_is_restored() -> None:
    import sys

    module = sys.modules[__name__]
    before = module.module_function
    rec = Recorder()
    with MethodPatcher() as p:
        p.patch_with_context(f"{__name__}.module_function", rec, label="fn")
        assert module.module_function(5) == 4
        assert module.module_function.tag == "kept" and module.module_function.__doc__ == "A module-level function."
    assert module.module_function is before
    assert rec.log == [("enter", "fn"), ("exit", "fn")]


def test_bound_method_patches_one_instance_only() -> None:
    a, b = Base(), Base()
    rec = Recorder()
    with MethodPatcher() as p:
        p.patch_with_context(a.method, rec)
        a.method(1)
        b.method(1)
        assert len(rec.log) == 2
    assert "method" not in vars(a)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_nested_patches_come_off_in_any_order(order: tuple[int, ...]) -> None:
    before = _raw(Base, "method")
    recorders = [Recorder(f"p{i}") for i in range(3)]
    patchers = [MethodPatcher() for _ in range(3)]
    handles = [p.patch_with_context(Base.method, r) for p, r in zip(patchers, recorders, strict=True)]
    assert Base().method(1) == 2
    assert [r.log for r in recorders] == [[("enter", f"p{i}"), ("exit", f"p{i}")] for i in range(3)]
    remaining = set(range(3))
    for i in order:
        assert [o.restored for o in handles[i].unpatch()] == [True]
        remaining.discard(i)
        for r in recorders:
            r.log.clear()
        assert Base().method(10) == 11
        # exactly the patches still in place run, each once
        assert sorted(tag for kind, tag in itertools.chain(*(r.log for r in recorders)) if kind == "enter") == \
            sorted(f"p{j}" for j in remaining)
    assert _raw(Base, "method") is before
    assert handles[order[0]].unpatch()[0].detail == "already removed"


def test_a_foreign_wrapper_on_top_is_left_and_ours_disabled(caplog: pytest.LogCaptureFixture) -> None:
    before = _raw(Base, "method")
    rec = Recorder()
    p = MethodPatcher()
    p.patch_with_context(Base.method, rec)
    ours = _raw(Base, "method")

    def foreign(self: Base, x: int) -> int:
        return ours(self, x) * 10

    Base.method = foreign  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.WARNING, "my_utils.tracing.patching"):
            (outcome,) = p.unpatch_all()
        assert not outcome.restored and "left in place" in outcome.detail
        assert "replaced after it was patched" in caplog.text
        rec.log.clear()
        assert Base().method(1) == 20 and rec.log == []   # ours passes straight through
    finally:
        Base.method = before  # type: ignore[method-assign]


def test_context_failures_never_break_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(call: PatchedCall) -> Any:
        raise OSError("disk full")

    with caplog.at_level(logging.WARNING, "my_utils.tracing.patching"), MethodPatcher() as p:
        p.patch_with_context(Base.method, broken)
        assert [Base().method(i) for i in range(3)] == [1, 2, 3]
    assert caplog.text.count("could not be entered") == 1 and "disk full" in caplog.text


def test_the_patched_functions_exception_passes_unchanged_and_the_context_exits() -> None:
    class Boom(Exception):
        pass

    def fails(self: Base, x: int) -> int:
        raise Boom(x)

    rec = Recorder("r")
    Child.method = fails  # type: ignore[assignment]
    try:
        with MethodPatcher() as p:
            p.patch_with_context((Child, "method"), rec)
            with pytest.raises(Boom) as info:
                Child().method(7)
            assert info.value.args == (7,)
    finally:
        del Child.method
    assert rec.log == [("enter", "r"), ("exit", "r")]


def test_async_function_is_awaited_inside_the_context() -> None:
    module = types.ModuleType("fake_async_mod")
    order: list[str] = []

    async def fetch(x: int) -> int:
        order.append("body")
        await asyncio.sleep(0)
        return x * 3

    module.fetch = fetch  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def ctx(call: PatchedCall) -> Iterator[None]:
        order.append("enter")
        yield
        order.append("exit")

    with patched((module, "fetch"), ctx):
        assert asyncio.run(module.fetch(2)) == 6
    assert order == ["enter", "body", "exit"] and module.fetch is fetch


def test_misuse_names_the_fix() -> None:
    p = MethodPatcher()
    with pytest.raises(UsageError, match="no attribute 'nope'"):
        p.patch_with_context("torch.optim.SGD.nope", Recorder())
    with pytest.raises(UsageError, match="no importable module"):
        p.patch_with_context("not_a_module_xyz.f", Recorder())
    with pytest.raises(UsageError, match="not callable"):
        p.patch_with_context((Base, "__module__"), Recorder())
    with pytest.raises(UsageError, match="no importable __module__"):
        p.patch_with_context(lambda: None, Recorder())
    with pytest.raises(UsageError, match="a builtin is bound into several modules"):
        p.patch_with_context(len, Recorder())
    replaced = types.ModuleType("replaced_mod")

    def g() -> None:
        pass

    g.__module__, g.__qualname__ = "replaced_mod", "g"
    replaced.g = lambda: None  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(__import__("sys").modules, "replaced_mod", replaced)
        with pytest.raises(UsageError, match="does not lead back"):
            p.patch_with_context(g, Recorder())
    with pytest.raises(UsageError, match="refuses the change"):
        p.patch_with_context((int, "bit_length"), Recorder())
    with pytest.raises(UsageError, match="ctx_factory must be callable"):
        p.patch_with_context(Base.method, None)  # type: ignore[arg-type]
    assert p.handles == ()


def test_calls_and_patches_from_many_threads() -> None:
    """Threads call the method while others patch and unpatch it in random orders: no call fails,
    every result is right, and the original is back at the end."""
    before = _raw(Base, "method")
    stop = threading.Event()
    errors: list[BaseException] = []
    results: list[bool] = []

    def caller() -> None:
        obj = Base()
        while not stop.is_set():
            try:
                results.append(obj.method(41) == 42)
            except BaseException as exc:
                errors.append(exc)

    def patcher_thread(seed: int) -> None:
        rng = random.Random(seed)
        p = MethodPatcher()
        for _ in range(60):
            handles = [p.patch_with_context(Base.method, Recorder()) for _ in range(rng.randint(1, 3))]
            rng.shuffle(handles)
            for h in handles:
                assert all(o.restored for o in h.unpatch())

    callers = [threading.Thread(target=caller) for _ in range(3)]
    patchers = [threading.Thread(target=patcher_thread, args=(seed,)) for seed in range(4)]
    for t in callers + patchers:
        t.start()
    for t in patchers:
        t.join()
    stop.set()
    for t in callers:
        t.join()
    assert errors == [] and results and all(results)
    assert _raw(Base, "method") is before


# --- real targets -------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _train_steps(opt: Any, model: Any, steps: int) -> None:
    for _ in range(steps):
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
        opt.zero_grad()


def test_optimizer_step_of_every_subclass() -> None:
    """``Optimizer.step`` with subclasses=True patches SGD and AdamW (each defines its own step)."""
    model = torch.nn.Linear(3, 2)
    sgd, adamw = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.AdamW(model.parameters())
    originals = {cls: _raw(cls, "step") for cls in (torch.optim.SGD, torch.optim.AdamW, torch.optim.Optimizer)}
    rec = Recorder()
    with MethodPatcher() as p:
        handle = p.patch_with_context(torch.optim.Optimizer.step, rec, label="optimizer.step", subclasses=True)
        assert "torch.optim.sgd.SGD.step" in handle.places and "torch.optim.adamw.AdamW.step" in handle.places
        _train_steps(sgd, model, 2)
        _train_steps(adamw, model, 1)
        assert getattr(torch.optim.SGD.step, "hooked", False)  # torch's own profiler hook is kept
    assert rec.log == [("enter", "optimizer.step"), ("exit", "optimizer.step")] * 3
    assert all(_raw(cls, "step") is before for cls, before in originals.items())


def test_optimizer_patched_before_its_first_instance_is_disabled_not_broken() -> None:
    """torch wraps a subclass's ``step`` when the first instance is built: patching a class that has
    no instance yet puts torch's wrapper on top of ours, so ours can only be disabled, and says so."""
    # SGD's own step without torch's profiling wrapper (its "hooked" mark), under no_grad as its
    # decorator would run it: the raw function updates leaf tensors in place, which autograd refuses
    cls = type("FreshSGD", (torch.optim.SGD,), {"step": torch.no_grad()(torch.optim.SGD.step.__wrapped__)})
    rec = Recorder()
    p = MethodPatcher()
    p.patch_with_context((cls, "step"), rec)
    model = torch.nn.Linear(3, 2)
    opt = cls(model.parameters(), lr=0.1)
    hooked: list[int] = []
    opt.register_step_post_hook(lambda *a: hooked.append(1))
    _train_steps(opt, model, 1)
    (outcome,) = p.unpatch_all()
    assert not outcome.restored and "left in place" in outcome.detail
    rec.log.clear()
    _train_steps(opt, model, 1)
    assert rec.log == [] and hooked == [1, 1]


def test_dataloader_iter_and_a_module_function() -> None:
    """``DataLoader.__iter__`` and ``torch.nn.functional.layer_norm`` (reached through nn.LayerNorm)."""
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=2)
    iter_before, ln_before = _raw(DataLoader, "__iter__"), F.layer_norm
    rec = Recorder()
    with MethodPatcher() as p:
        p.patch_with_context("torch.utils.data.DataLoader.__iter__", rec, label="epoch")
        p.patch_with_context(F.layer_norm, rec, label="layer_norm")
        batches = [b[0].tolist() for b in loader]
        torch.nn.LayerNorm(4)(torch.randn(2, 4))
    assert batches == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert rec.log == [("enter", "epoch"), ("exit", "epoch"), ("enter", "layer_norm"), ("exit", "layer_norm")]
    assert _raw(DataLoader, "__iter__") is iter_before and F.layer_norm is ln_before


def test_mytimer_region_around_optimizer_step() -> None:
    from my_utils.core.timer import MyTimer

    timer = MyTimer(tag="t")
    seen: list[list[str]] = []
    timer.add_listener(lambda step, regions: seen.append([r.name for r in regions]))
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with MethodPatcher() as p:
        p.patch_with_context(opt.step, lambda call: timer.region("optimizer.step"))
        timer.set_step(0)
        with timer.region("iter"):
            _train_steps(opt, model, 1)
        timer.step()
    assert seen == [["iter", "optimizer.step"]]
    assert "step" not in vars(opt)


def test_nvtx_ranges_around_optimizer_step(run_recorded: Any) -> None:
    """Real NVTX ranges (recorded by the injection library): one push/pop per step while patched."""
    run = run_recorded("""
        import torch
        from my_utils.tracing import create_labeler
        from my_utils.tracing.patching import MethodPatcher

        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        labeler = create_labeler(enabled=True, default_domain="train")
        patcher = MethodPatcher()
        patcher.patch_with_labeler("torch.optim.SGD.step", labeler, label="optimizer.step", color="green")
        for _ in range(2):
            model(torch.randn(4, 3)).sum().backward()
            opt.step()
        print([o.restored for o in patcher.unpatch_all()])
        opt.step()
    """)
    assert run.stdout.strip() == "[True]"
    assert run.ops("push", "pop") == [("push", "train", "optimizer.step"), ("pop", "train", "-")] * 2
