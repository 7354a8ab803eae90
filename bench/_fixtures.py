"""The real third-party files a bench reads, found through the project's fixture registry.

The registry (``fixtures/real_fixtures.py`` at the repository root: ``fetch(relpath) -> Path``,
raising ``FixtureUnavailable(reason)``) is loaded by file path, because ``fixtures/`` is not a
package any distribution installs. Until a clone has it, the local mirror beside the checkout
(``../shared/fixtures/real``) is read directly. A bench never fails on a missing file: it
skips the figure with the reason this module gives. A copy whose sha256 differs from the
registry's stops the bench (one line, exit 2): figures measured on other bytes mislead.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
REGISTRY = REPO / "fixtures" / "real_fixtures.py"
MIRROR = REPO.parent / "shared" / "fixtures" / "real"


class Unavailable(Exception):
    """A fixture cannot be read here; ``str()`` says why, in one line."""


@functools.lru_cache(maxsize=1)
def _registry() -> ModuleType | None:
    """The registry module when this clone has one, else None (the mirror is read directly)."""
    if not REGISTRY.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_myutils_real_fixtures", REGISTRY)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class body runs
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[spec.name]
        raise Unavailable(f"the fixture registry {REGISTRY} does not load: {type(exc).__name__}: {exc}") from None
    return module


def fetch(relpath: str, folder: Path | None = None) -> Path:
    """The local path of the real file ``relpath`` (e.g. ``kineto/hta/df_index_resolver.json.gz``).

    ``folder`` (a bench's ``--fixtures DIR``) bypasses the registry and reads ``DIR/relpath``.
    Raises :class:`Unavailable` naming the file and why it cannot be had.
    """
    if folder is not None:
        path = folder / relpath
        if not path.is_file():
            raise Unavailable(f"fixture {relpath} not found under --fixtures {folder}")
        return path
    registry = _registry()
    if registry is not None:
        try:
            return Path(registry.fetch(relpath))
        except registry.FixtureUnavailable as exc:
            raise Unavailable(f"fixture {relpath} unavailable: {exc}") from None
        except KeyError as exc:  # the registry's UnknownFixture: this bench names a file it does not list
            raise Unavailable(f"fixture {relpath} unavailable: {exc}") from None
        except registry.FixtureHashMismatch as exc:
            # a wrong copy is an error to mend, never a figure measured on other bytes
            print(f"bench: fixture {relpath}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    path = MIRROR / relpath
    if not path.is_file():
        raise Unavailable(f"fixture {relpath} unavailable: no registry at {REGISTRY.relative_to(REPO)} "
                          f"and no mirror copy at {path}")
    return path


def where(folder: Path | None = None) -> str:
    """Where fixtures are read from, for the report's header."""
    if folder is not None:
        return f"--fixtures {folder}"
    if REGISTRY.is_file():
        return f"registry {REGISTRY.relative_to(REPO)}"
    return f"mirror {MIRROR} (no registry in this clone yet)"
