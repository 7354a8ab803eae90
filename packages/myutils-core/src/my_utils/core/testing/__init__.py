"""Helpers for tests of my_utils and of code that uses it: plugin contracts, trace checks, fakes.

- ``contract``: ``check_metrics_provider``, ``check_capture_backend``, ``check_analysis_rule``,
  ``check_event_sink`` (re-exported here) check a plugin component against its contract.
- ``plugin_env``: ``PluginEnv`` (re-exported here), an isolated environment in which plugin
  packages are installed for real.
- ``csv_cells``: the cells of a CSV as each kind of reader splits its rows, and those a spreadsheet
  would run as formulas.
- ``trace_check``, ``fake_cuda``, ``crash`` (a command stopped by SIGKILL, SIGTERM and Ctrl-C at
  seeded moments leaves no process, no partial result, no scratch): import the submodules directly.

Nothing here is imported by the runtime; the names above resolve on first use.
"""

from my_utils.core.lazy import lazy_exports

_EXPORTS = {
    "ContractError": "my_utils.core.testing.contract",
    "check_analysis_rule": "my_utils.core.testing.contract",
    "check_capture_backend": "my_utils.core.testing.contract",
    "check_event_sink": "my_utils.core.testing.contract",
    "check_metrics_provider": "my_utils.core.testing.contract",
    "PluginEnv": "my_utils.core.testing.plugin_env",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
