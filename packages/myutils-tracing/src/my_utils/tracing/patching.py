"""``MethodPatcher``: wrap third-party functions and methods in a context, and put every original back.

Typical targets are code a user cannot edit: ``torch.optim.SGD.step``, ``DataLoader.__iter__``,
a Megatron schedule function. ``patch_with_context(target, ctx_factory)`` runs each call inside
``ctx_factory(call)`` (a MyTimer region, a labeler range, anything with ``__enter__``/``__exit__``);
``patch_with_labeler(target, labeler)`` is the NVTX case. ``unpatch_all()`` undoes them.

Decisions that shape it:

- **Layers, not swaps.** Every patch of one attribute is a layer that records what the owner
  held before (its raw ``__dict__`` entry: a ``staticmethod`` stays a ``staticmethod``, an
  inherited method is deleted again, not copied down) and calls its ``inner`` through a mutable
  slot. Removing a layer from the middle re-points the layer above it, so patches come off in
  any order and the last one out puts back the very object that was there (same identity).
- **Someone else's layer on top is left alone.** When another library wrapped our wrapper after
  we installed it (torch does this to ``Optimizer.step`` the first time an optimizer of that
  class is built), taking ours out would take theirs out too. Ours is disabled instead (a pure
  pass-through) and the outcome says so.
- **One lock for all patchers**, held while attributes change; calls never take it. A thread
  still inside a wrapper when it is removed finishes normally; a reference taken before the
  removal keeps working and no longer enters the context.
- **The context never breaks the call.** A factory or ``__enter__`` that fails is logged once per
  patch and the call goes on without it; the patched function's own exceptions pass unchanged.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.tracing.patch_target import MISSING, PatchSite, SiteKind, resolve, site_of

_log = logging.getLogger("my_utils.tracing.patching")

_LOCK = threading.RLock()
_LIVE: dict[tuple[int, str], list[_Layer]] = {}  # live layers per place, oldest first


@dataclass(frozen=True)
class PatchedCall:
    """One call of a patched target, as the context factory sees it."""

    label: str  # the patch's label ("torch.optim.sgd.SGD.step" unless one was given)
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


ContextFactory = Callable[[PatchedCall], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Unpatched:
    """What removing one patch did: ``restored`` False when it could only be disabled (see ``detail``)."""

    label: str
    restored: bool
    detail: str


class _Layer:
    """One patch of one place (mutable; the wrapper reads ``active`` and ``inner`` on every call)."""

    __slots__ = ("active", "before", "factory", "failed", "inner", "installed", "label", "site")

    def __init__(self, site: PatchSite, factory: ContextFactory, label: str) -> None:
        self.site = site
        self.factory = factory
        self.label = label
        self.active = True
        self.failed = False
        self.before: Any = MISSING
        self.installed: Any = None
        self.inner: Callable[..., Any] = _nothing


def _nothing(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a patch layer was called before it was installed")


def _enter(layer: _Layer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AbstractContextManager[Any] | None:
    """The entered context of this call, or None when the factory or ``__enter__`` failed (reported once)."""
    try:
        ctx = layer.factory(PatchedCall(layer.label, args, kwargs))
        ctx.__enter__()
    except Exception as exc:  # instrumentation must not break the patched call
        if not layer.failed:
            layer.failed = True
            _log.warning("patch of %s: the context could not be entered (%s: %s); calls go on without it",
                         layer.label, type(exc).__name__, exc)
        return None
    return ctx


def _exit(layer: _Layer, ctx: AbstractContextManager[Any], exc: BaseException | None) -> bool:
    """Leave ``ctx``; True when it swallowed ``exc`` (a context's right). A failing ``__exit__`` is reported once."""
    try:
        if exc is None:
            ctx.__exit__(None, None, None)
            return False
        return bool(ctx.__exit__(type(exc), exc, exc.__traceback__))
    except Exception as err:
        if err is exc:
            raise
        if not layer.failed:
            layer.failed = True
            _log.warning("patch of %s: the context failed on exit (%s: %s)", layer.label, type(err).__name__, err)
        return False


def _make_wrapper(layer: _Layer, underlying: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(underlying):
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if not layer.active:
                return await layer.inner(*args, **kwargs)
            ctx = _enter(layer, args, kwargs)
            if ctx is None:
                return await layer.inner(*args, **kwargs)
            try:
                result = await layer.inner(*args, **kwargs)
            except BaseException as exc:
                if not _exit(layer, ctx, exc):
                    raise
                return None
            _exit(layer, ctx, None)
            return result

        wrapper: Callable[..., Any] = async_wrapper
    else:
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            if not layer.active:
                return layer.inner(*args, **kwargs)
            ctx = _enter(layer, args, kwargs)
            if ctx is None:
                return layer.inner(*args, **kwargs)
            try:
                result = layer.inner(*args, **kwargs)
            except BaseException as exc:
                if not _exit(layer, ctx, exc):
                    raise
                return None
            _exit(layer, ctx, None)
            return result

        wrapper = sync_wrapper
    try:
        functools.update_wrapper(wrapper, underlying)  # __wrapped__, names, doc and the original's attributes
    except (AttributeError, TypeError):  # a callable object without __name__ and the like
        wrapper.__wrapped__ = underlying  # type: ignore[attr-defined]
    wrapper.__my_utils_patch__ = layer.label  # type: ignore[attr-defined]
    return wrapper


def _callable_of(site: PatchSite, raw: Any) -> Callable[..., Any]:
    """What a wrapper installed over ``raw`` calls, given how the place binds."""
    if site.kind is SiteKind.INSTANCE:
        return raw if raw is not MISSING else getattr(site.owner, site.name)
    if raw is MISSING:  # inherited: the definition the MRO would find
        raw = inspect.getattr_static(site.owner, site.name)
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def _set(site: PatchSite, value: Any) -> None:
    try:
        if value is MISSING:
            delattr(site.owner, site.name)
        else:
            setattr(site.owner, site.name, value)
    except (AttributeError, TypeError) as exc:
        raise UsageError(f"patch of {site.label}: its owner refuses the change ({exc}); patch a Python-level "
                         "subclass, module or instance instead") from None


def _install(site: PatchSite, factory: ContextFactory, label: str) -> _Layer:
    layer = _Layer(site, factory, label)
    with _LOCK:
        before = site.raw()
        layer.before = before
        underlying = _callable_of(site, before)
        layer.inner = underlying
        wrapper = _make_wrapper(layer, underlying)
        if site.kind is SiteKind.STATIC:
            layer.installed = staticmethod(wrapper)
        elif site.kind is SiteKind.CLASS:
            layer.installed = classmethod(wrapper)
        else:
            layer.installed = wrapper
        _set(site, layer.installed)
        _LIVE.setdefault(site.key, []).append(layer)
    return layer


def _remove(layer: _Layer) -> Unpatched:
    with _LOCK:
        live = _LIVE.get(layer.site.key, [])
        if layer not in live:
            return Unpatched(layer.label, True, "already removed")
        site = layer.site
        current = site.raw()
        above = next((other for other in live if other.before is layer.installed), None)
        if current is layer.installed:
            _set(site, layer.before)
            outcome = Unpatched(layer.label, True, "restored")
        elif above is not None:  # a later patch of ours sits on it: re-point that one past this layer
            above.inner = layer.inner
            above.before = layer.before
            outcome = Unpatched(layer.label, True, "taken out from under a later patch")
        else:
            outcome = Unpatched(layer.label, False, (
                f"{site.label} was replaced after it was patched (it now holds {current!r}, e.g. another "
                "library's wrapper around ours); left in place, our wrapper disabled (calls pass straight "
                "through)"))
            _log.warning("unpatch: %s", outcome.detail)
        layer.active = False
        live.remove(layer)
        if not live:
            _LIVE.pop(site.key, None)
        return outcome


class PatchHandle:
    """One ``patch_with_*`` call (one place, or each overriding subclass too): ``unpatch()`` removes it.

    Removal works in any order relative to other patches, once; later calls are no-ops.
    """

    __slots__ = ("_layers", "_patcher")

    def __init__(self, patcher: MethodPatcher, layers: tuple[_Layer, ...]) -> None:
        self._patcher = patcher
        self._layers = layers

    @property
    def label(self) -> str:
        """The label given to each call (the target's dotted name unless one was given)."""
        return self._layers[0].label

    @property
    def places(self) -> tuple[str, ...]:
        """The dotted name of every attribute this patch replaced."""
        return tuple(layer.site.label for layer in self._layers)

    @property
    def active(self) -> bool:
        """True until the patch is removed."""
        return any(layer.active for layer in self._layers)

    def unpatch(self) -> list[Unpatched]:
        """Remove this patch; see :class:`Unpatched` for what that did at each place."""
        return self._patcher._unpatch(self)

    def __repr__(self) -> str:
        return f"PatchHandle({self.label!r}, places={len(self._layers)}, active={self.active})"


class MethodPatcher:
    """Reversible patches of functions and methods (see the module docstring); a context manager too.

    ``target`` is a dotted path (``"torch.optim.SGD.step"``), a function or method object, a
    bound method (that instance only) or ``(owner, "name")``.
    """

    def __init__(self) -> None:
        self._handles: list[PatchHandle] = []
        self._lock = threading.Lock()

    def patch_with_context(self, target: Any, ctx_factory: ContextFactory, *, label: str | None = None,
                           subclasses: bool = False) -> PatchHandle:
        """Run every call of ``target`` inside ``ctx_factory(call)`` (``call``: a :class:`PatchedCall`).

        ``subclasses=True`` (a class method target) also patches every loaded subclass that
        defines its own version (``torch.optim.Optimizer.step`` → ``SGD.step``, ``AdamW.step``...).
        ``label`` names the calls (default: the dotted name of each place).
        """
        if not callable(ctx_factory):
            raise UsageError(f"patch_with_context({target!r}): ctx_factory must be callable with one PatchedCall "
                             "and return a context manager, e.g. lambda call: timer.region(call.label)")
        sites = [resolve(target)]
        if subclasses:
            sites.extend(_overriding_subclasses(sites[0]))
        layers: list[_Layer] = []
        try:
            for site in sites:
                layers.append(_install(site, ctx_factory, label if label is not None else site.label))
        except BaseException:
            for layer in reversed(layers):  # all places or none
                _remove(layer)
            raise
        handle = PatchHandle(self, tuple(layers))
        with self._lock:
            self._handles.append(handle)
        return handle

    def patch_with_labeler(self, target: Any, labeler: Any = None, *, label: str | None = None,
                           color: str | int | None = None, domain_name: str | None = None,
                           category: str | int | None = None, subclasses: bool = False) -> PatchHandle:
        """Wrap every call of ``target`` in an NVTX range of ``labeler`` (default: ``create_labeler()``)."""
        if labeler is None:
            from my_utils.tracing.nvtx_utils import create_labeler

            labeler = create_labeler()
        if not callable(getattr(labeler, "range", None)):
            raise UsageError(f"patch_with_labeler({target!r}): {labeler!r} has no range(); pass a labeler from "
                             "create_labeler()")
        registered: set[str] = set()

        def ranges(call: PatchedCall) -> AbstractContextManager[Any]:
            if call.label not in registered:  # strings and attributes cached once per label
                labeler.register_label(call.label, color=color, domain_name=domain_name, category=category)
                registered.add(call.label)
            ctx: AbstractContextManager[Any] = labeler.range(call.label, color=color, domain_name=domain_name,
                                                             category=category)
            return ctx

        return self.patch_with_context(target, ranges, label=label, subclasses=subclasses)

    @property
    def handles(self) -> tuple[PatchHandle, ...]:
        """This patcher's patches still in place, oldest first."""
        with self._lock:
            return tuple(h for h in self._handles if h.active)

    def _unpatch(self, handle: PatchHandle) -> list[Unpatched]:
        outcomes = [_remove(layer) for layer in reversed(handle._layers)]
        with self._lock:
            if handle in self._handles:
                self._handles.remove(handle)
        return outcomes

    def unpatch_all(self) -> list[Unpatched]:
        """Remove every patch this patcher made, newest first; what each removal did, per place."""
        with self._lock:
            handles = list(reversed(self._handles))
        return [outcome for h in handles for outcome in self._unpatch(h)]

    def __enter__(self) -> MethodPatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unpatch_all()


def _overriding_subclasses(site: PatchSite) -> list[PatchSite]:
    """Every loaded subclass of the site's class that defines the name itself (once each)."""
    owner = site.owner
    if not isinstance(owner, type):
        raise UsageError(f"patch of {site.label}: subclasses=True needs a class method target, not "
                         f"{type(owner).__name__}")
    seen: set[int] = set()
    out: list[PatchSite] = []
    stack: list[type] = list(type.__subclasses__(owner))
    while stack:
        cls = stack.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        stack.extend(type.__subclasses__(cls))
        if site.name in vars(cls):
            out.append(site_of(cls, site.name))
    return sorted(out, key=lambda s: s.label)


@contextmanager
def patched(target: Any, ctx_factory: ContextFactory, *, label: str | None = None) -> Iterator[PatchHandle]:
    """``with patched(target, factory):`` the patch holds inside the block only."""
    with MethodPatcher() as patcher:
        yield patcher.patch_with_context(target, ctx_factory, label=label)
