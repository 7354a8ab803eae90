"""myutils-core: the logger, the timer, trace conversion, events and the plugin system.

Importing this package is light: no torch, numpy, pandas or plotly.
"""

from my_utils.core._version import __version__

__all__ = ["__version__"]
