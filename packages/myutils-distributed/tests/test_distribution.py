"""myutils-distributed installs as its own distribution: one version, its plugin, a light import."""

from collections.abc import Callable


def test_distribution_promises(check_distribution: Callable[[str], None]) -> None:
    check_distribution("distributed")
