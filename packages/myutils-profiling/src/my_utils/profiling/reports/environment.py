"""The jinja2 environments of the reports: template lookup, escaping, user overrides.

Lookup is a ``ChoiceLoader``: the user's template folder first (``template_dir``), then
the templates shipped beside this module. A user folder may replace ``report.html.j2`` or
``report.md.j2`` whole, or extend the shipped one and override a block:
``{% extends "builtin/report.html.j2" %}`` (the ``builtin/`` prefix always names the
shipped file, so an override can build on the template it replaces).

Escaping is never left to the template author: HTML templates autoescape, and the
Markdown environment escapes every ``{{ }}`` output (``finalize``) for Markdown *and* HTML,
because Markdown viewers pass raw HTML through — a name carrying ``<script>`` must show as
text in both.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import UsageError

if TYPE_CHECKING:
    import jinja2

BUILTIN_TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAMES: dict[str, str] = {"html": "report.html.j2", "markdown": "report.md.j2"}
# inline syntax only: values never start a line (the templates put them after text or a table pipe)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")
# a heading, list item or setext underline where a line starts: a marker then a space, or the end
_BLOCK_START = re.compile(r"^(\d{0,9})([.)]|#{1,6}|[-+=]+)(?=[ \t]|$)")


def md_escape(value: Any) -> str:
    """``value`` as inline Markdown text: HTML entities for ``<>&``, backslashes before Markdown syntax.

    Line breaks become spaces, so a value never breaks a table row; and a value that a
    template places at the start of a line cannot open a block either (``# h`` after a folded
    ``\\r``: a heading; ``1.``/``-``/``+``: a list; four spaces: code): leading spaces go and the
    first character is escaped.
    """
    text = _LINE_BREAKS.sub(" ", str(value)).lstrip()
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _BLOCK_START.sub(r"\1\\\2", text, count=1)


def _md_finalize(value: Any) -> Any:
    """Every Markdown output is escaped unless the template marked it safe (``markupsafe.Markup``)."""
    from markupsafe import Markup

    if value is None:
        return ""
    return value if isinstance(value, Markup) else md_escape(value)


def environment(fmt: str, template_dir: str | Path | None = None) -> jinja2.Environment:
    """The environment for ``fmt`` (``html`` or ``markdown``), ``template_dir`` first in the lookup."""
    import jinja2

    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        folder = Path(template_dir)
        if not folder.is_dir():
            raise UsageError(f"render_report(template_dir={str(folder)!r}): not a folder; pass the folder that "
                             f"holds your {' or '.join(TEMPLATE_NAMES.values())}, or None for the built-in ones")
        loaders.append(jinja2.FileSystemLoader(str(folder)))
    builtin = jinja2.FileSystemLoader(str(BUILTIN_TEMPLATES))
    loaders.append(builtin)
    loader = jinja2.ChoiceLoader([*loaders, jinja2.PrefixLoader({"builtin": builtin})])
    if fmt == "html":
        return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                  trim_blocks=True, lstrip_blocks=True)
    return jinja2.Environment(loader=loader, autoescape=False, finalize=_md_finalize,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)
