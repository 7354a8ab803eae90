"""Short display names for GPU kernels and other long names read from a trace.

A kernel name as Kineto records it is a demangled C++ signature that may run to 600
characters (``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
...>(int, ...)``); a chart needs ``vectorized_elementwise_kernel<…>`` in its margin and the full
name on hover. ``short_kernel_name`` drops the return type, namespaces and parameter list
and folds template arguments to ``<…>`` (keeping a single short argument, which is what names
the kernel in ``cutlass::Kernel<cutlass_80_tensorop_…>``); mangled names (``_Z…``) are
demangled as far as their name goes. ``short_names`` does it for a list and keeps the labels
distinct (a chart axis merges equal labels), naming what tells two folded names apart.

Display only: nothing here changes what a name means, and the full name is always kept
beside the short one (hover text, ``title`` attribute).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Characters of a label at most (a chart's left margin, a table cell before the hover).
MAX_LABEL = 56
#: A single template argument longer than this is folded too.
MAX_SIMPLE_ARG = 64
ELLIPSIS = "…"
# a single template argument kept as it is: an identifier (cutlass_80_tensorop_s1688gemm_…, float)
_SIMPLE_ARG = re.compile(r"^[A-Za-z_][\w:]*$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_MANGLED = re.compile(r"^_Z")
# parts that qualify a name without naming it; dropped before the parameter list is looked for
_NOISE = re.compile(r"\((?:anonymous namespace)\)::|\{lambda\([^()]*\)#\d+\}::")
_KEYWORDS = frozenset({"void", "const", "unsigned", "signed", "int", "long", "short", "char", "bool", "float",
                       "double", "struct", "class", "enum", "volatile", "static", "inline", "anonymous",
                       "namespace", "lambda", "decltype", "nullptr"})


def _demangle_name(name: str) -> str:
    """The unqualified function name of an Itanium-mangled ``name`` (``_ZN2at6native3fooIiEEvv`` → ``foo<…>``).

    Only the name is decoded (source names, nested names, a template argument list);
    anything else returns ``name`` unchanged: a label, never a parser of the whole grammar.
    """
    i = 2
    if name.startswith("N", i):
        i += 1
        while i < len(name) and name[i] in "rVKL":  # cv/ref qualifiers of a nested name
            i += 1
    last = ""
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        length = int(name[i:j])
        if length <= 0 or j + length > len(name):
            return name
        last = name[j:j + length]
        i = j + length
        if name.startswith("St", i) or (name.startswith("S", i) and i + 1 < len(name) and name[i + 1] == "_"):
            break
    if not last:
        return name
    return last + ("<…>" if name.startswith("I", i) else "")


def _top_level(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the ``close_ch`` that matches ``text[start] == open_ch``, or -1 when unbalanced."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _strip_parameters(name: str) -> str:
    """``name`` without its trailing C++ parameter list (kept when the ``(`` follows a space: ``Memset (Device)``)."""
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            if i == 0 or name[i - 1] == " ":
                return name
            end = _top_level(name, i, "(", ")")
            if end == -1:
                return name
            rest = name[end + 1:].strip()
            # "f(int)::{lambda(int)#1}" names the lambda: keep what follows ::
            return name[:i] + (rest if rest.startswith("::") else "")
    return name


def _unqualified(name: str) -> str:
    """``name`` without its namespaces: the text after the last top-level ``::``."""
    depth = 0
    cut = 0
    i = 0
    while i < len(name):
        ch = name[i]
        if ch in "<({":
            depth += 1
        elif ch in ">)}" and depth:
            depth -= 1
        elif ch == ":" and depth == 0 and name.startswith("::", i):
            cut = i + 2
            i += 1
        i += 1
    return name[cut:]


def _fold_templates(name: str) -> str:
    """Top-level ``<...>`` folded to ``<…>``; a single short identifier argument stays."""
    out: list[str] = []
    i = 0
    while i < len(name):
        if name[i] == "<":
            end = _top_level(name, i, "<", ">")
            if end == -1:
                out.append(name[i:])
                break
            arg = name[i + 1:end].strip()
            out.append(f"<{_unqualified(arg)}>" if _SIMPLE_ARG.match(arg) and len(arg) <= MAX_SIMPLE_ARG
                       else "<…>")
            i = end + 1
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def ellipsize(text: str, limit: int = MAX_LABEL) -> str:
    """``text`` cut to ``limit`` characters with ``…`` in the middle (both ends of a name tell most)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def distinct_cuts(names: Sequence[str], limit: int = MAX_LABEL) -> list[str]:
    """Each name cut in the middle to ``limit`` characters, and cut around where it differs when two cuts match.

    Display labels for full names that must stay told apart (a diff lists
    ``…adagrad_unweighted_kernel_cta_per_row_1<float, float, float, 2ul>(…`` removed and the
    same with ``5ul`` added): a label equal to another one's keeps its start and the part
    from just before its first difference with the closest other name; numbered as a last resort.
    """
    out = [ellipsize(n, limit) for n in names]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(out):
        groups.setdefault(s, []).append(i)
    for members in groups.values():
        if len(members) < 2 or len({names[i] for i in members}) < len(members):
            continue
        for i in members:
            at = _first_difference(names[i], [names[j] for j in members if j != i])
            out[i] = _window_at(names[i], at, limit)
    return _numbered(out, limit)


def _window_at(text: str, at: int, limit: int) -> str:
    """``text`` cut to ``limit``: its first half, then the part from just before ``at`` (ellipses where cut)."""
    if len(text) <= limit:
        return text
    head = (limit - 2) // 2
    start = max(head, at - 12)
    if start <= head:
        return ellipsize(text, limit)
    room = limit - head - 1
    piece = text[start:start + room]
    if start + room < len(text):
        piece = piece[:-1] + ELLIPSIS
    return text[:head] + ELLIPSIS + piece


def short_kernel_name(name: str, limit: int = MAX_LABEL) -> str:
    """A GPU kernel's display name: no return type, namespaces or parameters, templates folded.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>(int, ...)``
    → ``vectorized_elementwise_kernel<…>``; ``ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)``
    → ``ncclKernel_AllReduce_RING_LL_Sum_float``; ``Memcpy DtoD (Device -> Device)`` stays.
    """
    text = " ".join(str(name).split())
    if _MANGLED.match(text):
        text = _demangle_name(text)
    if text.startswith("void "):
        text = text[len("void "):]
    text = _NOISE.sub("", text)
    text = _strip_parameters(text)
    text = _fold_templates(text)
    text = _unqualified(text) or text
    return ellipsize(text.strip(), limit)


def _hint(name: str, others: Sequence[str]) -> str | None:
    """The first identifier of ``name``'s template arguments that none of ``others`` holds."""
    start = name.find("<")
    if start == -1:
        return None
    mine = [t for t in _IDENT.findall(name[start:]) if t not in _KEYWORDS]
    theirs: set[str] = set()
    for other in others:
        k = other.find("<")
        theirs.update(_IDENT.findall(other[k:]) if k != -1 else ())
    return next((t for t in mine if t not in theirs), None)


def _around(text: str, at: int, limit: int) -> str:
    """``text`` cut to ``limit`` characters keeping its start and the part from just before ``at``."""
    if len(text) <= limit:
        return text
    head = min(12, limit // 4)
    start = max(head + 1, min(at - 8, len(text) - (limit - head - 1)))
    return text[:head] + ELLIPSIS + text[start:start + limit - head - 1]


def _first_difference(text: str, others: Sequence[str]) -> int:
    """The first index where ``text`` differs from the closest of ``others``."""
    best = 0
    for other in others:
        i = 0
        while i < len(text) and i < len(other) and text[i] == other[i]:
            i += 1
        best = max(best, i)
    return best


def short_names(names: Sequence[str], limit: int = MAX_LABEL) -> list[str]:
    """``short_kernel_name`` of each name, made distinct where two would fold alike.

    Two labels that differ only in their cut middle keep the part where they differ
    (``split_embed…adagrad_unweighted_kernel…``); two that fold to the same text name what
    tells them apart (``kernel<…CUDAFunctor_add…>``), else a number (``kernel #2``).
    """
    full = [short_kernel_name(n, 10 ** 6) for n in names]
    out = [ellipsize(f, limit) for f in full]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(out):
        groups.setdefault(s, []).append(i)
    for label, members in groups.items():
        if len(members) < 2:
            continue
        distinct = {full[i] for i in members}
        if len(distinct) == len(members):  # the cut hid the difference: show it
            cut = [_around(full[i], _first_difference(full[i], [full[j] for j in members if j != i]), limit)
                   for i in members]
            if len(set(cut)) == len(cut):
                for i, c in zip(members, cut, strict=True):
                    out[i] = c
                continue
        taken: set[str] = set()
        for n, i in enumerate(members, start=1):
            others = [names[j] for j in members if j != i and names[j] != names[i]]
            hint = _hint(names[i], others) if others else None
            if hint and label.endswith("<…>"):
                candidate = ellipsize(f"{label[:-len('<…>')]}<…{hint}…>", limit)
            elif hint:
                candidate = ellipsize(f"{label} [{hint}]", limit)
            else:
                candidate = ""
            if not candidate or candidate in taken:
                candidate = f"{ellipsize(label, limit - 4)} #{n}"
            taken.add(candidate)
            out[i] = candidate
    return _numbered(out, limit)


def _numbered(labels: list[str], limit: int) -> list[str]:
    """``labels`` with any label that is still repeated numbered (``name #2``): a last resort, rarely reached."""
    seen: dict[str, int] = {}
    used = set(labels)
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        if seen[label] == 1:
            out.append(label)
            continue
        n = seen[label]
        candidate = f"{ellipsize(label, limit - 5)} #{n}"
        while candidate in used:
            n += 1
            candidate = f"{ellipsize(label, limit - 5)} #{n}"
        used.add(candidate)
        out.append(candidate)
    return out
