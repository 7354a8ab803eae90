"""Helpers for tests of my_utils and of code that uses it: trace checks and hardware fakes.

Import the submodules directly (``my_utils.core.testing.trace_check``,
``my_utils.core.testing.fake_cuda``); nothing here is imported by the runtime.
"""

__all__: list[str] = []
