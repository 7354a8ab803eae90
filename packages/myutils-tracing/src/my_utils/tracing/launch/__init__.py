"""Framework launchers: ``nsys profile`` command prefixes chosen by the installed nsys version, per framework.

``probe_nsys()`` asks ``nsys --version``; ``build_nsys_command(profile, version, command)`` turns a
framework's launch profile (``profiles/<framework>.yaml``, or a YAML file of yours) into the full
command line, keeping only the options that nsys version documents (``nsys_docs.NSYS_DOCS``,
each row with its source) and saying which it left out and why.
"""

from my_utils.tracing.launch.nsys_command import NsysCommand, NsysOptions, build_nsys_command, check_nsys_args
from my_utils.tracing.launch.nsys_docs import NSYS_DOCS, NsysVersion, documented_flags
from my_utils.tracing.launch.nsys_probe import NsysProbe, probe_nsys
from my_utils.tracing.launch.profiles import LaunchProfile, framework_profiles, load_profile

__all__ = ["NSYS_DOCS", "LaunchProfile", "NsysCommand", "NsysOptions", "NsysProbe", "NsysVersion", "build_nsys_command",
           "check_nsys_args", "documented_flags", "framework_profiles", "load_profile", "probe_nsys"]
