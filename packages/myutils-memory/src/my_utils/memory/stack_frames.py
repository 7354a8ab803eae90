"""Which frames of an allocation's stack are the user's: the identity of a stack in a summary.

A snapshot recorded with C++ stacks (``_record_memory_history(stacks="all")``) starts every
stack with the allocator itself (``torch::unwind``, ``CapturedTraceback``,
``c10::cuda::CUDACachingAllocator``, ``at::detail::empty*``), then ATen and the dispatcher,
then CPython's interpreter around the Python frames. The innermost frames are therefore the
same for every allocation. A stack is named instead by the first frames outside the allocator
and PyTorch, the user's Python frames (another library's code under ``site-packages`` counts as
the user's: the user chose to run it), together with the *operation* that allocated: the
innermost PyTorch Python frame (``batch_norm`` in ``torch/nn/functional.py``) or, when the
stack holds no Python frame (the autograd engine runs the backward pass on its own C++
threads), the outermost ATen operator of its C++ frames and the autograd node that called it.
The allocator is never the answer.

``FrameView`` chooses what identifies a stack: ``user`` (the default, above), ``python``
(every Python frame, PyTorch's included) or ``all`` (the frames as recorded). Frames made by
``_profile_to_snapshot`` carry their place in the name (``torch/nn/modules/linear.py(125):
forward``) and are read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from operator import itemgetter
from typing import Any

__all__ = ["Frame", "FrameView", "StackIdentity", "StackNamer", "frame_label", "is_torch_path", "short_path"]

Frame = tuple[Any, Any, Any]
"""A frame as (name, filename, line), the fields of a snapshot's frame dict."""

# PyTorch's own Python files: the installed package, or the relative paths of profile-made frames
_TORCH_PATH = re.compile(r"(?:^|[/\\])(?:site|dist)-packages[/\\]torch[/\\]|^torch[/\\]")
_PACKAGES = re.compile(r"(?:^|[/\\])(?:site|dist)-packages[/\\]")
_PROFILE_FRAME = re.compile(r"^(?P<file>[^()]+)\((?P<line>\d+)\): (?P<name>.+)$")
_BUILTIN = re.compile(r"^<built-in (?:function|method) (?P<op>\w+)")
# an ATen kernel (at::native::linear) and a dispatcher entry (at::_ops::linear::call)
_NATIVE = re.compile(r"^(?:[\w:<>, ]+ )?at::native::(?P<op>[A-Za-z_]\w*)[(<]")
_OPS_CALL = re.compile(r"^(?:[\w:<>, ]+ )?at::_ops::(?P<op>[A-Za-z_]\w*)::call\(")
_AUTOGRAD_NODE = re.compile(r"torch::autograd::(?:generated::)?(?P<node>[A-Z]\w*)::apply\(")
_ENGINE = "torch::autograd::Engine::"
_OVERLOAD = re.compile(r"^(?P<op>_*[a-z0-9]\w*?)_(?P<overload>[A-Z]\w*)$")
# helpers an operator calls to get its output memory: part of the allocation, never the operator
_FACTORY = re.compile(r"^_?(?:empty|new_empty|resize)")


class FrameView(str, Enum):
    """What identifies a stack: the user's frames (default), every Python frame, or every frame as recorded."""

    USER = "user"
    PYTHON = "python"
    ALL = "all"


@dataclass(frozen=True)
class StackIdentity:
    """The frames that name a stack (innermost first, as (name, filename, line)) and the operation that allocated."""

    frames: tuple[Frame, ...]
    operation: str = ""

    def text(self) -> str:
        """The operation, then the frames, innermost first, joined by `` <- ``; ``""`` for an empty stack."""
        return " <- ".join(([self.operation] if self.operation else []) + [frame_label(f) for f in self.frames])


@dataclass(frozen=True)
class _Kind:
    """One frame classified once: Python or not, PyTorch's own or not, and its (name, filename, line) as read."""

    python: bool
    torch: bool
    frame: Frame


def is_torch_path(filename: str) -> bool:
    """Whether ``filename`` is a Python file of PyTorch itself (``.../site-packages/torch/...``, ``torch/...``)."""
    return bool(_TORCH_PATH.search(filename))


def short_path(filename: str) -> str:
    """A path for display: from the package root under ``site-packages``, else the last two parts of an absolute
    path; a relative path as it is."""
    ends = [m.end() for m in _PACKAGES.finditer(filename)]
    if ends:  # the last one: a virtualenv inside another's site-packages is still a package root
        return filename[ends[-1]:]
    if not filename.startswith(("/", "\\")) and ":" not in filename[:3]:
        return filename
    parts = re.split(r"[/\\]", filename)
    return "/".join(parts[-2:]) if len(parts) > 2 else filename


def frame_label(frame: Any) -> str:
    """``name (file:line)`` of a (name, filename, line) frame, the path shortened; a C++ frame without a line as
    ``name (file)`` or its name alone; profile-made frames as recorded."""
    if isinstance(frame, tuple) and len(frame) == 3:
        name, filename, line = frame
        shown = str(name if name is not None else "?")
        if filename in (None, "none", "", "??") and not line:
            return shown
        where = short_path(filename) if isinstance(filename, str) else "?"
        if not line and not where.endswith(".py"):
            return f"{shown} ({where})"
        return f"{shown} ({where}:{line if line is not None else '?'})"
    return str(frame)


def _classify(raw: Frame) -> _Kind:
    name, filename, _ = raw
    if isinstance(filename, str) and filename.endswith(".py"):
        return _Kind(True, is_torch_path(filename), raw)
    if isinstance(name, str) and filename in (None, "none", ""):
        m = _PROFILE_FRAME.match(name)
        if m:  # a frame made from a CPU profile: "torch/nn/modules/linear.py(125): forward"
            read = (m["name"], m["file"], int(m["line"]))
            return _Kind(True, is_torch_path(m["file"]), read)
        if name.startswith("nn.Module: "):  # the module a profile saw called: names the user's layer
            return _Kind(True, False, raw)
    return _Kind(False, False, raw)


def aten_operation(names: Sequence[str]) -> str:
    """``aten::<op>`` for the outermost ATen operator among C++ frame ``names`` (innermost first), with the
    autograd node that called it; ``""`` when there is none.

    A kernel (``at::native::op``) is preferred to a dispatcher entry (``at::_ops::op::call``,
    whose name carries the overload); the factories an operator calls for its output
    (``empty*``, ``resize*``) are the allocation's, not the operator.
    """
    native = ops = node = ""
    for name in names:
        m = _NATIVE.match(name)
        if m and not _FACTORY.match(m["op"]):
            native = m["op"]
            continue
        m = _OPS_CALL.match(name)
        if m:
            ops = m["op"]
            continue
        if not node:
            n = _AUTOGRAD_NODE.search(name)
            if n:
                node = n["node"]
            elif name.startswith(_ENGINE):  # called by the engine itself (anomaly mode's NaN checks)
                node = "the autograd engine"
    op = native or _dotted(ops)
    if not op:
        return f"(in {node})" if node else ""
    return f"aten::{op} in {node}" if node else f"aten::{op}"


def _dotted(op: str) -> str:
    """``mul_Tensor`` -> ``mul.Tensor``: a dispatcher entry's overload written as the profiler writes it."""
    m = _OVERLOAD.match(op)
    return f"{m['op']}.{m['overload']}" if m else op


class StackNamer:
    """Numbers the stacks of one summary (1, 2, ...; ``identities[k - 1]`` names stack ``k``).

    The hot path reads each allocation's frames list. torch makes one dict per distinct frame
    and shares it between all the lists that hold the frame, so a list is recognised first by
    the identities of its frame dicts (one C call), and only then by their contents (snapshots
    whose frames are all distinct objects). The lists behind the identities kept as keys stay
    referenced, so those identities stay unique while the namer lives. Once ``UNSHARED`` lists
    were found by content only, the frames are taken as unshared and no more identities are
    kept: a snapshot of distinct frame objects costs no memory per entry.
    """

    UNSHARED = 1000

    def __init__(self, view: FrameView | str = FrameView.USER, depth: int = 4) -> None:
        self.view = FrameView(view)
        self.depth = max(1, int(depth))
        self.identities: list[StackIdentity] = []
        self._numbers: dict[StackIdentity, int] = {}
        self._kinds: dict[Frame, _Kind] = {}
        self._by_ids: dict[tuple[int, ...], tuple[Any, int]] = {}
        self._by_content: dict[tuple[Frame, ...], int] = {}
        self._found_by_content = 0

    def number(self, frames: Any) -> int:
        """The number of the stack ``frames`` (a snapshot entry's list of frame dicts, or None)."""
        frames = frames or ()
        ids = tuple(map(id, frames))
        known = self._by_ids.get(ids)
        if known is not None:
            return int(known[1])
        raw = _contents(frames[:self.depth] if self.view is FrameView.ALL else frames)
        k = self._by_content.get(raw, 0)
        if not k:
            k = self._by_content[raw] = self._intern(self._identity(raw))
        else:
            self._found_by_content += 1
        if self._found_by_content < self.UNSHARED:
            self._by_ids[ids] = (frames, k)
        return k

    def identify(self, frames: Any) -> StackIdentity:
        """The identity of the stack ``frames``."""
        return self.identities[self.number(frames) - 1]

    def _intern(self, ident: StackIdentity) -> int:
        k = self._numbers.get(ident)
        if k is None:
            self.identities.append(ident)
            k = self._numbers[ident] = len(self.identities)
        return k

    def _identity(self, raw: tuple[Frame, ...]) -> StackIdentity:
        if not raw:
            return _EMPTY
        return StackIdentity(raw[:self.depth]) if self.view is FrameView.ALL else self._filtered(raw)

    def _kind(self, raw: Frame) -> _Kind:
        kind = self._kinds.get(raw)
        if kind is None:
            kind = self._kinds[raw] = _classify(raw)
        return kind

    def _filtered(self, raw: tuple[Frame, ...]) -> StackIdentity:
        kinds = [self._kind(r) for r in raw]
        first = next((i for i, k in enumerate(kinds) if k.python), None)
        if first is None:  # C++ only: the ATen operator that allocated, never the allocator
            return StackIdentity((), aten_operation(_names(raw)) or "(no Python frame, no ATen operator)")
        python = [k for k in kinds[first:] if k.python]
        if self.view is FrameView.PYTHON:
            return StackIdentity(tuple(k.frame for k in python[:self.depth]))
        user = [k.frame for k in python if not k.torch]
        if not user:  # only PyTorch's own Python frames (a thread PyTorch started): show those
            return StackIdentity(tuple(k.frame for k in python[:self.depth]))
        # the innermost Python frame is PyTorch's (F.batch_norm): that is the operation; else the user's frame
        # called ATen directly (torch.empty, x.to): the operator its C++ frames ran
        operation = frame_label(python[0].frame) if python[0].torch else (
            aten_operation(_names(raw[:first])) or _builtin(raw[:first]))
        return StackIdentity(tuple(user[:self.depth]), operation)


_FIELDS = itemgetter("name", "filename", "line")


def _contents(frames: Sequence[dict[str, Any]]) -> tuple[Frame, ...]:
    """(name, filename, line) of each frame dict; a field a frame lacks is None."""
    try:
        return tuple(map(_FIELDS, frames))  # one C call per frame: the fast path
    except KeyError:
        return tuple([(f.get("name"), f.get("filename"), f.get("line")) for f in frames])


def _builtin(raw: Sequence[Frame]) -> str:
    """``torch.<op>`` of the innermost builtin a CPU profile recorded (``<built-in method empty of type ...>``)."""
    for name, _, _ in raw:
        m = _BUILTIN.match(name) if isinstance(name, str) else None
        if m:
            return f"torch.{m['op']}"
    return ""


def _names(raw: Sequence[Frame]) -> list[str]:
    return [r[0] for r in raw if isinstance(r[0], str)]


_EMPTY = StackIdentity(())
