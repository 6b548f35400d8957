"""A second Task API process over the data directory of the hand-off cell's first
(``bench.sys_stepway_taskapi``, variant ``two``): ``python -m bench.taskapi_child DIR``.

Prints its URL once it serves, then its CPU seconds since each ``go`` line on stdin at
the next ``stop`` line; ends at the end of stdin."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.stepway_setup import TaskApiOnly


def main() -> int:
    api = TaskApiOnly(Path(sys.argv[1]))
    print(api.url, flush=True)
    cpu_at_go = time.process_time()
    try:
        for line in sys.stdin:
            if line.strip() == "go":
                cpu_at_go = time.process_time()
            elif line.strip() == "stop":
                print(f"{time.process_time() - cpu_at_go:.6f}", flush=True)
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
