"""Development only: make ``importlib.util.find_spec("my_utils")`` list every installed portion.

``my_utils`` is a regular package shipped by myutils-core whose ``__init__`` widens ``__path__`` with
``pkgutil.extend_path`` (ARCHITECTURE.md). In the development venv the seven distributions are
editable installs, one ``packages/*/src`` folder per ``sys.path`` entry, so before ``my_utils`` is
imported its spec names core's folder alone. Tools that read the spec instead of importing the package,
import-linter's graph builder grimp among them, then see only core's modules.

This module's meta path finder answers for the one name ``my_utils``: it asks the standard
``PathFinder`` and, when that finds a regular package, sets the spec's ``submodule_search_locations``
to what ``extend_path`` will make of them once ``__init__`` runs (the same function, so the same
portions in the same order, without duplicates). Imports themselves are unchanged: ``__init__``'s own
``extend_path`` call then adds nothing.

It is installed by the root ``requirements-dev.txt`` through a ``.pth`` file and must never ship in any
of the seven distributions: an installed product keeps Python's ordinary import behaviour. Start-up
cost is one ``sys.meta_path`` entry (only importlib, os and sys are imported); any error makes it
answer ``None`` so the ordinary finders decide. ``MYUTILS_DEV_NAMESPACE=off`` keeps it off for one
process, for a run that must see a single ``my_utils`` folder (``.ci/lint_imports.py``'s merged copy).
"""

import os
import sys
from importlib.machinery import ModuleSpec, PathFinder

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing-only names, not imported at interpreter start-up
    from collections.abc import Sequence
    from types import ModuleType

NAME = "my_utils"
# set to "off" (or "0") for a run that must see one my_utils folder alone, such as the merged copy of
# every distribution that .ci/lint_imports.py lints: widened, it would add the installed portions too
SWITCH = "MYUTILS_DEV_NAMESPACE"


class MyUtilsNamespaceFinder:
    """Meta path finder for ``my_utils`` alone: the standard spec, with every portion as its search path."""

    @classmethod
    def find_spec(cls, fullname: str, path: "Sequence[str] | None" = None,
                  target: "ModuleType | None" = None) -> "ModuleSpec | None":
        """The ``PathFinder`` spec of ``my_utils`` with its search locations widened; ``None`` otherwise."""
        if fullname != NAME:
            return None
        try:
            spec = PathFinder.find_spec(fullname, path, target)
            locations = spec.submodule_search_locations if spec is not None else None
            # a regular package (an __init__ file); a namespace package already lists every portion
            if spec is None or spec.origin is None or not isinstance(locations, list):
                return spec
            # imported here, not at start-up: my_utils/__init__ imports pkgutil in any case
            from pkgutil import extend_path

            spec.submodule_search_locations = extend_path(locations, fullname)
            return spec
        except Exception:  # never in the way of an import: the ordinary finders answer instead
            return None


def install() -> None:
    """Put the finder on ``sys.meta_path`` just before ``PathFinder``, once, unless switched off; never raises."""
    try:
        if os.environ.get(SWITCH, "").strip().lower() in ("0", "off"):
            return
        if any(finder is MyUtilsNamespaceFinder for finder in sys.meta_path):
            return
        # before PathFinder, after any finder an editable install or a test put ahead of it
        index = next((i for i, finder in enumerate(sys.meta_path) if finder is PathFinder), len(sys.meta_path))
        sys.meta_path.insert(index, MyUtilsNamespaceFinder)
    except Exception:
        return
