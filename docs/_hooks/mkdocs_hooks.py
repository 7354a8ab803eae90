"""MkDocs hooks: fill the generated reference and refuse a build whose facts disagree with the code."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(Path(__file__).resolve().parent))  # MkDocs loads hooks by path, not as a package

import reference_gen

CHECKLIST = Path("docs/MIGRATION_CHECKLIST.md")
PACKAGED_CHECKLIST = Path("packages/myutils-profiling/src/my_utils/profiling/docs/MIGRATION_CHECKLIST.md")


def on_pre_build(config: Any) -> None:
    """The checklist is edited in docs/; the copy shipped with myutils-profiling must be identical."""
    root = reference_gen.ROOT
    if (root / CHECKLIST).read_bytes() != (root / PACKAGED_CHECKLIST).read_bytes():
        raise PluginError(f"{PACKAGED_CHECKLIST} differs from {CHECKLIST}: copy it over "
                          f"(cp {CHECKLIST} {PACKAGED_CHECKLIST})")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Refuse a stale checked-in command reference; check the env-var table against what the code reads."""
    if page.file.src_uri == "reference/cli.md":
        reason = reference_gen.stale_cli_reference()
        if reason:
            raise PluginError(reason)
    if page.file.src_uri == "reference/environment.md":
        listed = set(re.findall(r"`([A-Z][A-Z0-9_]{2,})`", markdown))
        missing = sorted(set(reference_gen.env_vars_in_code()) - listed)
        if missing:
            raise PluginError(f"docs/reference/environment.md: no row for {', '.join(missing)}, which the "
                              "code reads; add a row saying what each does")
    return markdown
