"""Fails at import time, like a plugin whose dependency is missing."""

import my_utils_ext_missing_dependency  # noqa: F401
