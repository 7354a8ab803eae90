"""A provider module whose dependency is not installed."""

import my_utils_ext_not_installed  # noqa: F401


class Provider:
    name = "faulty_import"
