"""myutils-distributed: see the distribution's README for what it offers."""

from my_utils.distributed._version import __version__

__all__ = ["__version__"]
