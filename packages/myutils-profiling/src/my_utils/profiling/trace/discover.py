"""The torch traces the metric events name (``attrs.file``), found inside the events' folder — never elsewhere.

A name read from the events is data: it is matched as a name, never as a glob pattern
(``**/x**`` is a file called ``x**``, not a search), and it never leads outside the folder the
user pointed at: an absolute path or one climbing out with ``..`` is looked up by its last
component inside that folder. A trace outside it is merged only when the user names it on the
command line (``--torch-trace``). Lookup: the relative path inside the folder, else a file of
that name anywhere below it (symlinked folders are not followed). A named trace that is not
found, or found more than once below, is reported in one warning, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from my_utils.profiling.formats._files import locate_named

__all__ = ["find_named_traces"]

_SHOWN = 5  # names listed in a warning


def find_named_traces(folder: Path, names: Iterable[str]) -> tuple[list[Path], list[str]]:
    """(the traces found, warnings) for the trace file ``names`` the events in ``folder`` carry."""
    located, missing, ambiguous = locate_named(folder, names)
    found = list(located.values())
    warnings = []
    if missing:
        warnings.append(f"the events name {_names(missing)} that {'is' if len(missing) == 1 else 'are'} not in "
                        f"{folder} (nor below it), so {'it is' if len(missing) == 1 else 'they are'} not merged; "
                        "pass a trace with --torch-trace to merge it")
    if ambiguous:
        warnings.append(f"the events name {_names(ambiguous)} and several files below {folder} have "
                        f"{'that name' if len(ambiguous) == 1 else 'those names'}, so none is merged; pass the "
                        "right one with --torch-trace")
    return sorted(set(found)), warnings


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n if len(n) <= 80 else "..." + n[-77:]) for n in names[:_SHOWN])
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    noun = "torch trace" if len(names) == 1 else f"{len(names)} torch traces"
    return f"{noun} {shown}{more}"
