"""MetricsCollector: pulls events from registered providers and appends them to the run's log.

``collect(step)`` asks every provider for the events new since its last call, stamps
them (source, run id, rank, step when missing) and appends them to
``<output_dir>/metrics_events.jsonl`` in one write, flushed, so a killed run loses at most
the batch being written and a reader never sees half a batch from a failed call.

Two ways of reading, two error policies (ARCHITECTURE.md §7):
- ``collect(step)`` runs inside a training loop: a provider that fails for an environment
  reason (a missing GPU, a full disk, a library error) is reported once through logging
  and skipped, never raising into the loop.
- ``read_all()`` is an offline read of files the user named (``myutils-profile ingest``):
  any provider failure is an error naming the provider, its input and the cause.
In both, bad input (``InputError``, e.g. a corrupt file) and misuse (``UsageError``) raise
at once, unless the collector was built with ``ignore_provider_errors``: then the provider
is skipped, said once (a logging warning) and listed in ``failures``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.dist_env import env_rank
from my_utils.core.errors import MyUtilsError, ProviderError, UsageError
from my_utils.core.events import EventLogWriter, MetricEvent, events_path
from my_utils.profiling.formats.rank_files import Stamp, stamp

if TYPE_CHECKING:
    from my_utils.profiling.config import AnalysisSettings
    from my_utils.profiling.model.report import AnalysisReport

_log = logging.getLogger("my_utils.profiling.collector")


REPORT_FORMATS: dict[str, str] = {"json": "json", "markdown": "md", "md": "md", "html": "html"}


def write_report(report: AnalysisReport, fmt: str, path: str | Path | None, output_dir: str | Path) -> Path:
    """Write ``report`` as ``fmt`` to ``path`` (default ``<output_dir>/analysis_report.<ext>``); return the path.

    JSON is the report's own ``to_json``; Markdown and HTML are rendered by
    ``my_utils.profiling.reports`` (jinja2 templates, plotly inlined).
    """
    ext = REPORT_FORMATS.get(fmt.lower()) if isinstance(fmt, str) else None
    if ext is None:
        raise UsageError(f"export_report(fmt={fmt!r}): expected one of 'html', 'markdown' or 'json'")
    target = Path(path) if path is not None else Path(output_dir) / f"analysis_report.{ext}"
    if ext == "json":
        return report.write(target)
    try:
        from my_utils.profiling import reports
    except ImportError:
        raise UsageError(f"export_report(fmt={fmt!r}): the HTML/Markdown reports (my_utils.profiling.reports) "
                         "are not available in this version; use fmt='json'") from None
    return Path(reports.render_report(report, "markdown" if ext == "md" else ext, target))


def describe_host() -> dict[str, Any]:
    """This machine's hardware, for a report's ``hardware``: CPU model and count, and the GPU when torch is loaded.

    Only hardware: two runs on identical machines compare as equal (no host name, no
    software versions). torch is never imported here (a CPU-only user may not have it);
    when the program already did and CUDA is up, the device name and count are added.
    """
    import os
    import platform
    import sys

    out: dict[str, Any] = {"machine": platform.machine(), "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    out["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:  # not Linux: the platform's own word, when it has one
        if platform.processor():
            out["cpu"] = platform.processor()
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                out["gpu"] = torch.cuda.get_device_name(0)
                out["gpu_count"] = torch.cuda.device_count()
        except Exception as exc:  # a broken CUDA setup is described, never raised into the caller
            out["gpu_error"] = f"{type(exc).__name__}: {exc}"
    return out


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYmmdd-HHMMSS-<6 hex>``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


@dataclasses.dataclass(frozen=True)
class ProviderFailure:
    """A provider that could not be built or read, kept for reporting (``ignore_provider_errors``).

    ``place`` is its config key (``providers[1]``) or its registration index; ``input`` the
    file or folder it was reading (empty for live providers).
    """

    provider: str
    place: str
    reason: str
    input: str = ""

    def describe(self) -> str:
        """One line: ``providers[1] (nsys_sqlite, run.sqlite): reason``."""
        what = ", ".join(x for x in (self.provider, self.input) if x)
        return f"{self.place} ({what}): {self.reason}"


def _input_of(provider: Any) -> str:
    path = getattr(provider, "path", None)
    return str(path) if isinstance(path, Path) and path != Path() else ""


def _name_of(provider: Any) -> str:
    return str(getattr(provider, "name", "") or type(provider).__name__)


def _executor(plan: Sequence[tuple[Any, str | None, list[Path]]]) -> Any:
    """Where rank files are read by default: the first ``executor`` option a provider was given, else local
    processes for large inputs (:func:`~my_utils.profiling.formats.parallel.pool_for`), else this process."""
    from my_utils.profiling.formats.parallel import pool_for

    for provider, kind, _files in plan:
        chosen = getattr(provider, "executor", None) if kind else None
        if chosen is not None:
            return chosen
    return pool_for([f for _p, kind, files in plan if kind for f in files])


class MetricsCollector:
    """Collects metric events from providers into ``<output_dir>/metrics_events.jsonl``."""

    def __init__(self, output_dir: str | Path = "./metrics_out", *, run_id: str | None = None,
                 rank: int | None = None, ignore_provider_errors: bool = False) -> None:
        self.output_dir = Path(output_dir)
        self.run_id = run_id or new_run_id()
        self.rank = rank if rank is not None else env_rank(None)
        self.ignore_provider_errors = ignore_provider_errors
        self.providers: list[Any] = []
        self.failures: list[ProviderFailure] = []
        self._writer: EventLogWriter | None = None
        self._reported: set[int] = set()
        self._places: dict[int, str] = {}  # id(provider) -> config key, for messages
        self.last_report: AnalysisReport | None = None
        self.analysis_settings: AnalysisSettings | None = None  # a config's ``analysis`` section
        self.inputs: list[Path] = []  # the files and folders a config's providers read (outputs must not replace them)

    # -- set-up --------------------------------------------------------------------------

    @property
    def events_path(self) -> Path:
        """Where this collector appends its events."""
        return events_path(self.output_dir)

    def register_provider(self, provider: Any) -> Any:
        """Add a provider (anything with ``collect(step)``); returns it for chaining."""
        if not callable(getattr(provider, "collect", None)):
            raise UsageError(
                f"MetricsCollector.register_provider(): {type(provider).__name__} has no collect(step) method; "
                "pass a metrics provider such as MyTimerMetricsProvider(timer)"
            )
        if any(p is provider for p in self.providers):
            raise UsageError(
                f"MetricsCollector.register_provider(): this {type(provider).__name__} is already registered; "
                "registering it twice would return its events twice"
            )
        self.providers.append(provider)
        return provider

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | str | Path, ignore_provider_errors: bool = False,
                    **overrides: Any) -> MetricsCollector:
        """Build a collector and its file providers from a config (dict, or a JSON/YAML file).

        See ``my_utils.profiling.config`` for the format; ``overrides`` (``output_dir``,
        ``run_id``) win over the config's. Errors name the key (``providers[1].provider``);
        with ``ignore_provider_errors`` a provider that cannot be built or read is skipped,
        said once (logging warning) and recorded in ``failures``.
        """
        from my_utils.profiling.config import open_provider, parse_config

        unknown = sorted(set(overrides) - {"output_dir", "run_id"})
        if unknown:
            raise UsageError(f"MetricsCollector.from_config(): unknown override {unknown[0]!r}; "
                             "pass output_dir= or run_id=")
        config = parse_config(cfg, keep_going=ignore_provider_errors)
        collector = cls(overrides.get("output_dir") or config.output_dir,
                        run_id=overrides.get("run_id") or config.run_id, rank=config.rank,
                        ignore_provider_errors=ignore_provider_errors)
        collector.analysis_settings = config.analysis
        for key, name, exc in config.errors:
            collector._skip(ProviderFailure(str(name), key, str(exc)))
        for entry in config.providers:
            collector.inputs.append(Path(entry.input))
            try:
                provider = open_provider(entry, config.where)
            except MyUtilsError as exc:
                if not ignore_provider_errors:
                    raise
                collector._skip(ProviderFailure(entry.provider, entry.key, str(exc), str(entry.input)))
                continue
            collector.register_provider(provider)
            collector._places[id(provider)] = entry.key
        return collector

    def _skip(self, failure: ProviderFailure) -> None:
        """Record a skipped provider and say it once."""
        self.failures.append(failure)
        _log.warning("skipped %s", failure.describe())

    # -- collection ----------------------------------------------------------------------

    def gather(self, step: int | None = None) -> list[MetricEvent]:
        """Ask every provider for its new events and stamp them; nothing is written.

        The training-loop policy: environment failures are reported once and skipped (see
        the module docstring); ``read_all`` is the offline one.
        """
        out: list[MetricEvent] = []
        for provider in list(self.providers):
            try:
                events = provider.collect(step)
            except MyUtilsError as exc:
                if not self.ignore_provider_errors:
                    raise
                self._drop(provider, exc)
                continue
            except Exception as exc:  # environment trouble inside a provider: report once, keep going
                if id(provider) not in self._reported:
                    self._reported.add(id(provider))
                    _log.warning("metrics provider %s failed and was skipped: %s: %s",
                                 _name_of(provider), type(exc).__name__, exc)
                continue
            how = self._stamps(provider, step)
            out.extend(stamp(e, how) for e in events)
        return out

    def read_all(self, progress: Any = None, executor: Any = None,
                 max_workers: int | None = None) -> list[MetricEvent]:
        """Read every provider once, offline (files the user named): no failure passes silently.

        A provider that fails raises: ``InputError``/``UsageError`` as they are, anything else
        as ``ProviderError`` naming the provider, its input and the cause. With
        ``ignore_provider_errors`` it is skipped instead, said once and kept in ``failures``.
        ``progress`` (a ``my_utils.core.progress.Progress``) is advanced once per file of rank
        files and once per other provider. Rank files (profile CSVs, torch traces) are read
        where ``executor`` says (see :meth:`stream_to`).
        """
        out: list[MetricEvent] = []
        current: list[MetricEvent] = []
        owner: Any = None
        for what, provider, payload in self._read(progress, executor, max_workers, lines=False):
            if provider is not owner:
                out += current
                current, owner = [], provider
            if what == "dropped":
                current = []
            else:
                current += payload
        return out + current

    def stream_to(self, path: Path, progress: Any = None, executor: Any = None,
                  max_workers: int | None = None) -> tuple[int, list[str]]:
        """Read every provider once, as :meth:`read_all` does, appending the events to ``path`` as they come.

        Returns (events written, their sources). Rank files (profile CSVs, torch traces) are read
        one per call of ``stream_many`` (:mod:`~my_utils.profiling.formats.rank_files`): the
        worker reads the file, stamps its events and writes their lines; this process appends the
        bytes in provider order, then file order (the order of :meth:`read_all`), so memory does
        not grow with the number of files. ``executor``: ``None`` takes the first ``executor``
        option a provider was given (``torch_profiler``), else local processes for more than
        16 MB of input text, else this process; ``"serial"``, ``"process"``, ``"dask"``, a
        scheduler address or a ``distributed.Client`` as in ``run_many``. A provider skipped
        with ``ignore_provider_errors`` leaves nothing in ``path`` (its lines are cut off again).
        """
        from my_utils.profiling.formats.rank_files import RankFile

        path = Path(path)
        path.touch()
        writer = EventLogWriter(path)
        count = 0
        sources: set[str] = set()
        start, pending, owner = path.stat().st_size, (0, set[str]()), None
        for what, provider, payload in self._read(progress, executor, max_workers, lines=True):
            if provider is not owner:
                count, sources = count + pending[0], sources | pending[1]
                start, pending, owner = path.stat().st_size, (0, set()), provider
            if what == "dropped":
                os.truncate(path, start)
                pending = (0, set())
            elif isinstance(payload, RankFile):
                with open(path, "ab") as fh:
                    payload.copy_to(fh)
                pending = (pending[0] + payload.count, pending[1] | set(payload.sources))
            else:
                writer.append(payload)
                pending = (pending[0] + len(payload), pending[1] | {e.source for e in payload})
        return count + pending[0], sorted(sources | pending[1])

    def _read(self, progress: Any, executor: Any, max_workers: int | None,
              lines: bool) -> Iterator[tuple[str, Any, Any]]:
        """(``"events"``, provider, stamped events) or (``"lines"``, provider, RankFile) in provider order, then
        file order; (``"dropped"``, provider, None) after a provider's output when it failed and was skipped."""
        import contextlib

        from my_utils.profiling.formats import rank_files
        from my_utils.profiling.formats.parallel import Failed

        plan: list[tuple[Any, str | None, list[Path]]] = []
        for provider in list(self.providers):
            kind = rank_files.kind_of(provider)
            files: list[Path] = []
            if kind is not None:
                try:
                    files = rank_files.unread_files(provider)
                except Exception as exc:
                    if not self._failed(provider, exc, None):
                        continue
            plan.append((provider, kind, files))
        if progress is not None and hasattr(progress, "total"):
            progress.total = sum(len(files) if kind else 1 for _p, kind, files in plan)
        calls = [(kind, str(f), provider.rank, self._stamps(provider) if lines else None)
                 for provider, kind, files in plan if kind for f in files]
        where = executor if executor is not None else _executor(plan)
        results = rank_files.read_rank_files(calls, where, max_workers, self.ignore_provider_errors)
        with contextlib.closing(results):
            for provider, kind, files in plan:
                name, how = _name_of(provider), self._stamps(provider)
                if kind is None:
                    if progress is not None:
                        progress.note(f"{name}: {_input_of(provider) or 'live'}")
                    events = self._read_provider(provider)
                    if events is not None:
                        yield "events", provider, [stamp(e, how) for e in events]
                    if progress is not None:
                        progress.advance()
                    continue
                failed: tuple[BaseException, Path] | None = None
                ranks: dict[Path, int | None] = {}
                for file in files:
                    if progress is not None and failed is None:
                        progress.note(f"{name}: {file}")
                    try:
                        result = next(results)
                    except MyUtilsError:
                        raise
                    except Exception as exc:  # not bad input: a bug or a library failure, named with its file
                        raise ProviderError(name, str(file), exc) from exc
                    if failed is not None:
                        if isinstance(result, rank_files.RankFile):
                            result.discard()
                        continue  # the rest of a failed provider's files: not used
                    if isinstance(result, Failed):
                        failed = (result.error, file)
                        continue
                    if isinstance(result, list):
                        ranks[file] = next((e.rank for e in result), provider.rank)
                        yield "events", provider, [stamp(e, how) for e in result]
                    else:
                        ranks[file] = result.rank
                        yield "lines", provider, result
                    if progress is not None:
                        progress.advance()
                if failed is None:
                    try:
                        rank_files.check_ranks(kind, ranks)
                    except MyUtilsError as exc:
                        failed = (exc, Path(_input_of(provider)))
                if failed is not None:
                    if progress is not None:
                        progress.advance(len(files) - len(ranks))
                    self._failed(provider, failed[0], failed[1])
                    yield "dropped", provider, None
                    continue
                rank_files.mark_read(provider, files)

    def _read_provider(self, provider: Any) -> list[MetricEvent] | None:
        """One provider read by its own ``collect`` (the offline policy); None when it failed and was skipped."""
        try:
            return list(provider.collect(None))
        except Exception as exc:
            self._failed(provider, exc, None)
            return None

    def _failed(self, provider: Any, exc: BaseException, file: Path | None) -> bool:
        """Raise the offline error for ``exc``, or (``ignore_provider_errors``) drop the provider; False when dropped.

        ``InputError``/``UsageError`` are raised as they are, anything else as ``ProviderError`` naming the
        provider, its input (``file`` when known) and the cause.
        """
        name = _name_of(provider)
        error: BaseException = exc
        if not isinstance(exc, MyUtilsError):
            error = ProviderError(name, str(file or _input_of(provider) or self._places.get(id(provider), name)), exc)
            if not self.ignore_provider_errors:
                raise error from exc
        elif not self.ignore_provider_errors:
            raise exc
        self._drop(provider, error)
        return False

    def _drop(self, provider: Any, exc: BaseException) -> None:
        """Unregister a provider that failed (``ignore_provider_errors``) and say so once."""
        index = next(i for i, p in enumerate(self.providers) if p is provider)
        place = self._places.get(id(provider), f"provider #{index}")
        self.providers.pop(index)
        closer = getattr(provider, "close", None)
        if callable(closer):  # a live provider detaches from its timer/profiler
            try:
                closer()
            except Exception as close_exc:  # already failing: its close must not hide why
                _log.debug("closing skipped provider %s failed: %s", _name_of(provider), close_exc)
        self._skip(ProviderFailure(_name_of(provider), place, str(exc), _input_of(provider)))

    def _stamps(self, provider: Any, step: int | None = None) -> Stamp:
        """What this collector fills in on ``provider``'s events (source, run id, rank, step)."""
        return Stamp(_name_of(provider), self.run_id, self.rank, step)

    def collect(self, step: int | None = None) -> list[MetricEvent]:
        """Gather the new events of every provider and append them to the log in one write."""
        events = self.gather(step)
        if events:
            if self._writer is None:
                self._writer = EventLogWriter(self.events_path)
            try:
                self._writer.append(events)  # opens, writes once and closes: no handle outlives it
            except OSError as exc:  # a full disk must not stop training; the events stay returned
                if -1 not in self._reported:
                    self._reported.add(-1)
                    _log.warning("cannot append metric events to %s: %s", self.events_path, exc)
        return events

    def analyze(self, workload: str | None = None, **options: Any) -> AnalysisReport:
        """Analyse every event collected so far (read back from the events file) into a report.

        ``workload`` picks the thresholds (``pretrain``, ``finetune``, ``inference``; default:
        the config's ``analysis.workload``, else ``pretrain``);
        ``options`` go to ``MetricsAnalyzer`` (``rules=``, ``rule_options=``, ``traces=``).
        The report describes this host (``hardware``), and the timer's overhead is
        calibrated here, in the training process. The last report is kept for ``export_report``.
        """
        from my_utils.profiling.analysis.analyzer import MetricsAnalyzer

        settings = self.analysis_settings
        if settings is not None:
            workload = workload or settings.workload
            if settings.rules is not None:
                options.setdefault("rules", list(settings.rules))
            options.setdefault("rule_options", settings.rule_options)
        options.setdefault("traces", self.trace_files())
        options.setdefault("hardware", describe_host())
        options.setdefault("overhead_host", "training host (this process)")
        source: Any = self.events_path if self.events_path.is_file() else []
        self.last_report = MetricsAnalyzer(source, workload or "pretrain", **options).analyze()
        return self.last_report

    def export_report(self, fmt: str = "html", report: AnalysisReport | None = None,
                      path: str | Path | None = None, template_dir: str | Path | None = None) -> Path:
        """Write ``report`` (default: the last ``analyze()``'s, else a new one) as html, markdown or json.

        The file goes to ``path`` or ``<output_dir>/analysis_report.<ext>``; it is written
        atomically and its path returned. ``template_dir`` holds jinja2 templates that
        override the built-in ones (``my_utils.profiling.reports.render_report``).
        """
        from my_utils.profiling.reports.render import default_report_path, render_report

        target = Path(path) if path is not None else default_report_path(self.output_dir, fmt)  # checks fmt first
        if report is None:
            report = self.last_report if self.last_report is not None else self.analyze()
        return render_report(report, fmt, target, template_dir=template_dir)

    def trace_files(self) -> list[Path]:
        """The torch.profiler trace files this collector's file providers read (for the Kineto analyses)."""
        files: list[Path] = []
        for provider in self.providers:
            path = getattr(provider, "path", None)
            if _name_of(provider) != "torch_profiler" or not isinstance(path, Path) or path == Path():
                continue
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if p.name.endswith((".json", ".json.gz"))))
            elif path.is_file():
                files.append(path)
        return files

    def close(self) -> None:
        """Close the events file (collecting again reopens it)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for provider in self.providers:
            closer = getattr(provider, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> MetricsCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names: Sequence[str] = [str(getattr(p, "name", type(p).__name__)) for p in self.providers]
        return f"MetricsCollector(output_dir={str(self.output_dir)!r}, providers={list(names)})"
