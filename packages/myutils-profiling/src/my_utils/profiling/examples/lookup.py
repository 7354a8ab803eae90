"""``--config`` names for the shipped examples: the seed's path, and the bare file name.

The seed ran ``myutils-profile ingest --config ./my_utils/profiling/examples/collector_config_example.json``
from its repository root; the file now ships inside myutils-profiling (wherever it is
installed). A config path that does not exist is read as the shipped example only when it
is that example's bare name or ends with the seed's ``my_utils/profiling/examples/<name>``;
any other missing path is an error that lists the names the examples can be given by.
"""

from __future__ import annotations

from pathlib import Path, PurePath

from my_utils.core.errors import InputError

_EXAMPLES = Path(__file__).resolve().parent
_SEED_FOLDER = ("my_utils", "profiling", "examples")


def shipped_examples() -> list[str]:
    """File names of the collector configs shipped in ``my_utils/profiling/examples/``."""
    return sorted(p.name for p in _EXAMPLES.iterdir() if p.suffix in (".json", ".yaml", ".yml") and p.is_file())


def resolve_config_path(path: Path) -> tuple[Path, bool]:
    """``(path, False)`` when it exists; ``(shipped example, True)`` for an example's name or seed path.

    Raises ``InputError`` for any other missing path, naming the shipped examples.
    """
    if path.exists() or path.is_symlink():
        return path, False
    parts = PurePath(path).parts
    names = shipped_examples()
    if path.name in names and (len(parts) == 1 or tuple(parts[-4:-1]) == _SEED_FOLDER):
        return _EXAMPLES / path.name, True
    raise InputError(path, None, "an existing config file (no such file); the examples shipped with "
                                 f"myutils-profiling can be given by name: {', '.join(names)}")
