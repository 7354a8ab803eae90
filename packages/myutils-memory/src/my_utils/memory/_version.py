"""The version of the myutils-memory distribution (read by hatchling; written only here)."""

__version__ = "0.1.0"
