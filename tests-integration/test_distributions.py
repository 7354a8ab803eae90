"""Every distribution keeps the packaging promises (version in one place, plugin, light import)."""

from collections.abc import Callable

import pytest


@pytest.mark.parametrize("name", ["core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy"])
def test_distribution_promises(name: str, check_distribution: Callable[[str], None]) -> None:
    check_distribution(name)
