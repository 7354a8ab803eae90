"""The version of the myutils-legacy distribution (read by hatchling; written only here)."""

__version__ = "0.1.0"
