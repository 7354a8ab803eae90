"""The kinds of file a run folder holds, and what ``analyze`` does with each.

One table, so the sniffer, the run model, the report's inputs table and the terminal all say
the same thing about a kind: what it is in words, whether ``analyze`` reads it and as what
(events, a Kineto trace, an Nsight export), and for the kinds it does not read, the command
that does (``{path}`` stands for the file, shell-quoted).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    """What ``analyze`` makes of a file of a kind."""

    EVENTS_FILE = "events file"  # metric-events JSONL: streamed into the analyzer as it is
    EVENTS = "events"  # a provider's reader turns it into metric events
    KINETO = "kineto"  # the Kineto pass: events and every Kineto analysis
    NSYS = "nsys"  # the Nsight Systems analyses (and its events)
    NCU = "ncu"  # the Nsight Compute analyses (and its events)
    OTHER_TOOL = "other tool"  # known, but another command reads it
    CONVERT = "convert"  # known, read once converted (an nsys report exported to SQLite)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class KindInfo:
    """A kind in words, its role for ``analyze``, the provider that reads it, and the command for the others."""

    label: str
    role: Role
    provider: str = ""
    command: str = ""
    use: str = ""  # what to do with it, when no command reads it


class FileKind(enum.Enum):
    """A file's kind, as its content tells it (``formats.sniff``)."""

    EVENTS_JSONL = KindInfo("metric events (metrics_events.jsonl)", Role.EVENTS_FILE)
    PROFILE_CSV = KindInfo("MyTimer profile CSV (profile_rank_<r>.csv; also what the Lightning and Hugging Face "
                           "callbacks write)", Role.EVENTS, "mytimer")
    MODULE_SUMMARY = KindInfo("ModuleProfiler summary CSV (module_summary_rank<r>.csv)", Role.EVENTS,
                              "module_profiler")
    KINETO_TRACE = KindInfo("torch.profiler (Kineto) trace", Role.KINETO, "torch_profiler")
    NSYS_SQLITE = KindInfo("Nsight Systems SQLite export", Role.NSYS, "nsys_sqlite")
    NSYS_REP = KindInfo("Nsight Systems report (.nsys-rep)", Role.CONVERT,
                        command="nsys export --type sqlite --output {sqlite} {path}")
    NCU_CSV = KindInfo("Nsight Compute CSV export", Role.NCU, "ncu_csv")
    NCU_REP = KindInfo("Nsight Compute report (.ncu-rep)", Role.NCU, "ncu_csv",
                       command="ncu --import {path} --csv --page details > {stem}.csv")
    NCCL_LOG = KindInfo("NCCL_DEBUG=INFO log", Role.EVENTS, "nccl_log")
    NCCL_INSPECTOR = KindInfo("NCCL Inspector log", Role.EVENTS, "nccl_inspector")
    PERF_STAT = KindInfo("perf stat output", Role.EVENTS, "perf_stat")
    DCGM_DMON = KindInfo("dcgmi dmon output", Role.EVENTS, "dcgm_dmon")
    CPROFILE = KindInfo("cProfile dump (pstats)", Role.EVENTS, "cprofile")
    MEMORY_SNAPSHOT = KindInfo("PyTorch CUDA memory snapshot (pickle)", Role.OTHER_TOOL,
                               command="myutils memory summarize {path}")
    MERGED_TRACE = KindInfo("timeline my_utils wrote (myutils-profile trace, csv_to_trace)", Role.OTHER_TOOL,
                            command="open it in https://ui.perfetto.dev (analyze reads the rank traces it was "
                                    "made from)")
    NSYS_CONSOLE = KindInfo("nsys console output (text, not an export)", Role.OTHER_TOOL,
                            command="nsys export --type sqlite <the .nsys-rep of that run>, then analyze the "
                                    ".sqlite")
    NCU_CONSOLE = KindInfo("Nsight Compute console output (no CSV table)", Role.OTHER_TOOL,
                           command="ncu --import <the .ncu-rep> --csv --page details > kernels.csv, then analyze "
                                   "the CSV")
    ANALYSIS_REPORT = KindInfo("analysis report (analysis_report.json)", Role.OTHER_TOOL,
                               command="myutils-profile diff --base-report {path} --target-report "
                                       "<another run's analysis_report.json>")
    RUN_LOG = KindInfo("my_utils run log (rank_<r>.log)", Role.OTHER_TOOL,
                       use="text for people, nothing to analyse: read it for the run's own warnings")
    WEB_PAGE = KindInfo("HTML page (a report or timeline page)", Role.OTHER_TOOL,
                        use="open it in a browser; nothing to analyse")
    SQLITE_OTHER = KindInfo("SQLite database that is no nsys export", Role.UNKNOWN)
    UNKNOWN = KindInfo("not a profiling input analyze knows", Role.UNKNOWN)

    @property
    def label(self) -> str:
        """The kind in words."""
        return self.value.label

    @property
    def role(self) -> Role:
        """What ``analyze`` makes of it."""
        return self.value.role

    @property
    def provider(self) -> str:
        """The provider plugin that reads it into events ("" when none does)."""
        return self.value.provider

    @property
    def readable(self) -> bool:
        """Whether ``analyze`` reads this kind itself."""
        return self.role in (Role.EVENTS_FILE, Role.EVENTS, Role.KINETO, Role.NSYS, Role.NCU)
