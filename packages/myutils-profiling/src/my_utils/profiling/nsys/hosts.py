"""Which host an export was captured on: what groups ranks by machine (stragglers by host before rank).

In order: the ``Hostname`` nsys records in ``TARGET_INFO_SYSTEM_ENV``; the capture's
``DEVICE_DISPLAY_NAME`` (``META_DATA_CAPTURE``); the file name when it follows nsys's
``%h_%p`` pattern (``<host>_<pid>.sqlite``, the host holding a letter and a dot or a digit);
otherwise unknown (None), never guessed. A host name is the machine's own: it is shown to the
user of the run, as the export gives it.
"""

from __future__ import annotations

import re
from pathlib import Path

from my_utils.profiling.nsys.schema import NsysExport

#: ``<host>_<pid>.sqlite`` as ``nsys profile -o %h_%p`` writes it.
_HOST_PID = re.compile(r"^(?P<host>[A-Za-z][A-Za-z0-9.-]*[.0-9][A-Za-z0-9.-]*)_(?P<pid>\d+)$")
_NOT_HOSTS = frozenset({"report", "profile", "nsys", "trace", "rank", "worker"})


def host_from_name(path: str | Path) -> str | None:
    """The host in a ``<host>_<pid>`` file name, None when the name does not follow that pattern."""
    m = _HOST_PID.match(Path(path).stem)
    if m is None or m.group("host").split(".")[0].rstrip("0123456789").lower() in _NOT_HOSTS:
        return None
    return m.group("host")


def export_host(db: NsysExport) -> tuple[str | None, str]:
    """(host, where it was read) of an open export; (None, "not recorded") when nothing names it."""
    if db.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        rows = db.query("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' AND value IS NOT NULL "
                        "AND value != '' LIMIT 1", place="table TARGET_INFO_SYSTEM_ENV")
        if rows:
            return str(rows[0][0]), "TARGET_INFO_SYSTEM_ENV Hostname"
    if db.has("META_DATA_CAPTURE", "name", "value"):
        rows = db.query("SELECT value FROM META_DATA_CAPTURE WHERE name = 'DEVICE_DISPLAY_NAME' AND value IS NOT NULL "
                        "AND value != '' LIMIT 1", place="table META_DATA_CAPTURE")
        if rows:
            return str(rows[0][0]), "META_DATA_CAPTURE DEVICE_DISPLAY_NAME"
    named = host_from_name(db.path)
    if named is not None:
        return named, "file name (<host>_<pid>)"
    return None, "not recorded"
