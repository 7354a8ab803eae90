"""``analyze_stragglers`` under a lowered open-file limit, in its own process (the limit stays with it).

    python limited_stragglers.py SOFT HARD LOG_DIR [EXECUTOR]     # SOFT/HARD "open+N": N above what is open now

Prints one JSON line: the report (strict JSON) and the soft limit afterwards, or the error.
Not collected by pytest.
"""

from __future__ import annotations

import json
import os
import resource
import sys

from my_utils.core.errors import MyUtilsError
from my_utils.core.safe_io import strict_json
from my_utils.distributed.stragglers import analyze_stragglers


def _limit(text: str) -> int:
    if text.startswith("open+"):
        return len(os.listdir("/proc/self/fd")) + int(text[5:])
    return int(text)


def main() -> None:
    soft, hard = _limit(sys.argv[1]), _limit(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    executor = sys.argv[4] if len(sys.argv) > 4 else None
    try:
        report = analyze_stragglers(sys.argv[3], executor=executor, max_workers=2)
    except (MyUtilsError, OSError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return
    print(strict_json({"report": report.to_dict(), "soft_after": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))


if __name__ == "__main__":
    main()
