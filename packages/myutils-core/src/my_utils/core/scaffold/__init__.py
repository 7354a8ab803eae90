"""``myutils plugins new``: a ready plugin package per kind (templates in ``templates/``)."""

from my_utils.core.scaffold.writer import KINDS, PackageNames, plan_package, write_plugin_package

__all__ = ["KINDS", "PackageNames", "plan_package", "write_plugin_package"]
