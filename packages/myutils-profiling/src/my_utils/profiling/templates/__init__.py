"""Shell templates for launching profiled runs (nsys / torch.profiler / disabled presets).

``get_profiling_templates_dir()`` is the folder a launcher sources::

    source "$(python -c 'from my_utils import get_profiling_templates_dir as d; print(d())')/profile_cli_common.sh"
    profile_prepare "$TPL_DIR/preset_nsys_default.env"
    profile_wrap_exec_with_nsys EXEC_CMD       # prefixes EXEC_CMD with `nsys profile ...`
    "${EXEC_CMD[@]}" "${PROFILE_SETTINGS[@]}"  # the framework parses them with parse_profiling_args

The framework side of ``PROFILE_SETTINGS`` is ``my_utils.profiling.launch_args``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TEMPLATE_FILES", "get_profiling_templates_dir"]

TEMPLATE_FILES = (
    "profile_cli_common.sh",
    "preset_nsys_default.env",
    "preset_torch_profiler.env",
    "preset_disabled.env",
)


def get_profiling_templates_dir() -> Path:
    """The folder holding ``profile_cli_common.sh`` and the three ``preset_*.env`` files."""
    return Path(__file__).resolve().parent
