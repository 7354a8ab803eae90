"""Where a patch goes: a target (a dotted path, a function, a method, ``(owner, name)``) → owner and name.

A patch replaces one attribute of one object: a class, a module or an instance. Resolving
that place from what a user naturally writes is the whole job here:

- ``"torch.optim.SGD.step"`` or ``"torch.optim:SGD.step"``: the longest importable module
  prefix, then attributes;
- ``torch.optim.SGD.step`` (a function): its ``__module__`` and ``__qualname__``, checked to
  lead back to the very same object (a function re-exported elsewhere, or a builtin whose
  ``__module__`` is a private extension, must be named by path or by ``(owner, name)``);
- ``optimizer.step`` (a bound method): that one instance only;
- ``SomeClass.from_config`` (a classmethod, bound to its class): the class that defines it;
- ``(owner, "name")``: exactly that attribute.

The kind of the attribute (plain function, ``staticmethod``, ``classmethod``, an instance's
own attribute) is read from the owner's ``__dict__`` (or the class's MRO when the name is
inherited), so that the wrapper can be installed as the same kind of descriptor.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import types
from dataclasses import dataclass
from typing import Any

from my_utils.core.errors import UsageError

#: Marks an attribute the owner did not hold in its own ``__dict__`` before the patch.
MISSING: Any = object()


class SiteKind(enum.Enum):
    """How the wrapper is installed and how it calls what it wraps."""

    FUNCTION = "function"  # a class's plain function (binds self) or a module's callable
    STATIC = "staticmethod"
    CLASS = "classmethod"
    INSTANCE = "instance"  # one object's attribute: the bound method is wrapped


@dataclass(frozen=True)
class PatchSite:
    """One attribute of one object: what a patch replaces and restores."""

    owner: Any
    name: str
    kind: SiteKind
    label: str  # "torch.optim.sgd.SGD.step": the default label of ranges and regions

    @property
    def key(self) -> tuple[int, str]:
        """Identity of the place (the owner by ``id``: classes and modules are not all hashable by value)."""
        return id(self.owner), self.name

    def raw(self) -> Any:
        """What the owner holds under the name in its own ``__dict__`` (descriptors unbound), or MISSING."""
        try:
            own = object.__getattribute__(self.owner, "__dict__")
        except AttributeError:
            return MISSING
        return own.get(self.name, MISSING)


def _describe(target: Any) -> str:
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return f"{type(target).__name__} {name}" if name else repr(target)[:80]


def _owner_label(owner: Any) -> str:
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}"
    return f"{type(owner).__module__}.{type(owner).__qualname__}"


def _import_path(path: str) -> tuple[Any, str]:
    """``"pkg.mod.Class.attr"`` / ``"pkg.mod:Class.attr"`` → (owner, attr)."""
    if ":" in path:
        module_name, _, rest = path.partition(":")
        parts = rest.split(".")
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise UsageError(f"patch target {path!r}: cannot import {module_name!r} ({exc})") from None
    else:
        parts = path.split(".")
        obj = None
        for i in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            parts = parts[i:]
            break
        if obj is None:
            raise UsageError(f"patch target {path!r}: no importable module in it; write 'package.module.attr' "
                             "or 'package.module:Class.attr'")
    if not parts or not all(parts):
        raise UsageError(f"patch target {path!r}: expected an attribute after the module")
    for i, part in enumerate(parts[:-1]):
        if not hasattr(obj, part):
            raise UsageError(f"patch target {path!r}: {_owner_label(obj)} has no attribute {part!r} "
                             f"(at {'.'.join(parts[:i + 1])})")
        obj = getattr(obj, part)
    return obj, parts[-1]


def _owner_of_function(fn: Any) -> tuple[Any, str]:
    """The class or module whose attribute ``fn`` is, from its ``__module__`` and ``__qualname__``."""
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module_name or not qualname or "<locals>" in qualname or "<lambda>" in qualname:
        raise UsageError(f"patch target {_describe(fn)}: cannot tell which object holds it (no importable "
                         "__module__/__qualname__); pass (owner, 'name') or a dotted path")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        raise UsageError(f"patch target {_describe(fn)}: its module {module_name!r} does not import; pass "
                         "(owner, 'name') or a dotted path") from None
    parts = qualname.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            break
    return owner, parts[-1]


def _unwrap_descriptor(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def resolve(target: Any) -> PatchSite:
    """The :class:`PatchSite` of ``target`` (see the module docstring); UsageError naming the fix otherwise."""
    if isinstance(target, tuple):
        if len(target) != 2 or not isinstance(target[1], str):
            raise UsageError(f"patch target {target!r}: expected (owner, 'attribute name')")
        owner, name = target
        if not hasattr(owner, name):
            raise UsageError(f"patch target: {_owner_label(owner)} has no attribute {name!r}")
    elif isinstance(target, str):
        owner, name = _import_path(target)
        if not hasattr(owner, name):
            raise UsageError(f"patch target {target!r}: {_owner_label(owner)} has no attribute {name!r}")
    elif inspect.ismethod(target):
        bound_to = target.__self__
        name = target.__func__.__name__
        if isinstance(bound_to, type):  # a classmethod: patch it where it is defined
            owner = next((c for c in bound_to.__mro__ if name in vars(c)), bound_to)
        else:
            owner = bound_to
    elif callable(target):
        if isinstance(target, types.BuiltinFunctionType):
            raise UsageError(f"patch target {_describe(target)}: a builtin is bound into several modules and its "
                             "__module__ is not where callers find it; pass the path you call it by, e.g. "
                             "'torch.nn.functional.gelu', or (module, 'name')")
        owner, name = _owner_of_function(target)
        found = _unwrap_descriptor(inspect.getattr_static(owner, name, MISSING)) if owner is not None else MISSING
        if found is not target:
            raise UsageError(f"patch target {_describe(target)}: {getattr(target, '__module__', '?')}."
                             f"{getattr(target, '__qualname__', '?')} does not lead back to this object (a "
                             "re-export or a builtin); pass the path you call it by, e.g. "
                             "'torch.nn.functional.gelu', or (module, 'name')")
    else:
        raise UsageError(f"patch target {target!r}: expected a dotted path, a function, a method or "
                         "(owner, 'name')")
    return site_of(owner, name)


def site_of(owner: Any, name: str) -> PatchSite:
    """The place ``owner.name`` and how it binds; UsageError when it is no callable or cannot be replaced."""
    label = f"{_owner_label(owner)}.{name}"
    if isinstance(owner, (type, types.ModuleType)):
        raw = inspect.getattr_static(owner, name)
        if isinstance(owner, type) and (isinstance(raw, staticmethod) or not hasattr(type(raw), "__get__")):
            kind = SiteKind.STATIC  # also a callable that does not bind (a builtin or a partial in a class)
        elif isinstance(owner, type) and isinstance(raw, classmethod):
            kind = SiteKind.CLASS
        else:
            kind = SiteKind.FUNCTION
    else:
        if not hasattr(owner, "__dict__"):
            raise UsageError(f"patch target {label}: {type(owner).__name__} objects hold no attributes of their "
                             "own (no __dict__); patch the class instead")
        raw = getattr(owner, name)
        kind = SiteKind.INSTANCE
    if not callable(_unwrap_descriptor(raw)):
        raise UsageError(f"patch target {label}: {type(raw).__name__} is not callable; only functions and "
                         "methods can be patched")
    return PatchSite(owner, name, kind, label)
