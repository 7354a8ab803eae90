"""``render_report``: an ``AnalysisReport`` → an HTML, Markdown or JSON file, written atomically.

HTML: the jinja2 template with the charts embedded as JSON data and plotly.js inlined
once, so the file opens offline (no CDN); Markdown: the same findings and tables, ready
to paste; JSON: ``AnalysisReport.to_json`` (``AnalysisReport.load`` reads it back).
Bad arguments raise ``UsageError``; a user template that does not parse raises
``InputError`` naming the template and the line. Nothing is left behind on failure.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.atomic import atomic_write
from my_utils.core.errors import InputError, UsageError

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport

#: Accepted ``fmt`` values → (format, file extension).
FORMATS: dict[str, tuple[str, str]] = {"html": ("html", "html"), "markdown": ("markdown", "md"),
                                       "md": ("markdown", "md"), "json": ("json", "json")}
_SCRIPT_CLOSE = re.compile(r"</(script)", re.IGNORECASE)


def report_format(fmt: Any) -> tuple[str, str]:
    """``(format, extension)`` of ``fmt``; UsageError naming the accepted values otherwise."""
    found = FORMATS.get(fmt.lower()) if isinstance(fmt, str) else None
    if found is None:
        raise UsageError(f"report format fmt={fmt!r}: expected one of 'html', 'markdown' or 'json'")
    return found


def default_report_path(output_dir: str | Path, fmt: str) -> Path:
    """``<output_dir>/analysis_report.<ext>`` for ``fmt``."""
    return Path(output_dir) / f"analysis_report.{report_format(fmt)[1]}"


def json_for_script(text: str) -> str:
    """JSON text safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or line separators.

    Those characters can only occur inside JSON strings, where ``\\uXXXX`` means the same.
    """
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def plotly_js() -> str:
    """The plotly.js bundle shipped with the ``plotly`` package (inlined once per HTML report).

    Read from the package's data file without importing plotly (as ``plotly.offline.get_plotlyjs``
    reads it), which would cost a command more than reading the file.
    """
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    bundle = (Path(next(iter(spec.submodule_search_locations)), "package_data", "plotly.min.js")
              if spec is not None and spec.submodule_search_locations else None)
    if bundle is not None and bundle.is_file():
        text = bundle.read_text(encoding="utf-8")
    else:
        try:
            from plotly.offline import get_plotlyjs
        except ImportError:
            raise UsageError("render_report(fmt='html'): the plotly package is missing; pip install plotly "
                             "(a myutils-profiling dependency) or write fmt='markdown'/'json'") from None
        text = get_plotlyjs()
    # a literal "</script" would end the inline script early; the JS escape means the same (searched first:
    # the bundle has none, and a substitution copies its megabytes)
    return _SCRIPT_CLOSE.sub(r"<\\/\1", text) if _SCRIPT_CLOSE.search(text) else text


def render_text(report: AnalysisReport, fmt: str, template_dir: str | Path | None = None) -> str:
    """The report as text in ``fmt`` (``html``, ``markdown``/``md`` or ``json``)."""
    kind, _ = report_format(fmt)
    if kind == "json":
        return report.to_json() + "\n"
    import jinja2
    from markupsafe import Markup

    from my_utils.profiling.reports.context import build_context
    from my_utils.profiling.reports.environment import TEMPLATE_NAMES, environment

    env = environment(kind, template_dir)
    context = build_context(report)
    if kind == "html":
        from my_utils.profiling.reports.charts import build_charts

        charts = build_charts(report)
        context["charts"] = [{"id": c.id, "title": c.title, "mark": c.mark, "marks": c.marks, "note": c.note,
                              "json": Markup(json_for_script(c.figure_json()))} for c in charts]
        context["plotly_js"] = Markup(plotly_js())
    name = TEMPLATE_NAMES[kind]
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(exc.filename or exc.name or name, f"line {exc.lineno}",
                         f"a valid jinja2 template ({exc.message})") from None
    except jinja2.TemplateNotFound as exc:
        raise InputError(str(template_dir or "built-in templates"), None,
                         f"the template {exc.name!r} (a user template may only extend or include existing ones)"
                         ) from None
    except jinja2.UndefinedError as exc:
        raise InputError(str(template_dir or "built-in templates"), name,
                         f"only names of the report context ({exc.message})") from None


def render_report(report: AnalysisReport, fmt: str = "html", output_path: str | Path | None = None,
                  template_dir: str | Path | None = None) -> Path:
    """Write ``report`` as ``fmt`` (``html``, ``markdown`` or ``json``) to ``output_path`` atomically; return the path.

    ``output_path`` defaults to ``./analysis_report.<ext>``; a folder gets
    ``analysis_report.<ext>`` inside it. ``template_dir`` is a folder of jinja2 templates
    looked up before the built-in ones (see ``my_utils.profiling.reports.environment``).
    The whole text is rendered before the file is opened, so a failure writes nothing.
    """
    kind, ext = report_format(fmt)
    target = Path(output_path) if output_path is not None else Path(f"analysis_report.{ext}")
    if target.is_dir():
        target = target / f"analysis_report.{ext}"
    text = render_text(report, kind, template_dir)
    with atomic_write(target) as fh:
        fh.write(text)
    return target
