"""myutils-tracing: see the distribution's README for what it offers."""

from my_utils.tracing._version import __version__

__all__ = ["__version__"]
