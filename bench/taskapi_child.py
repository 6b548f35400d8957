"""A second Task API process over the data directory of the hand-off cell's first
(``bench.sys_stepway_taskapi``, variant ``two``): ``python -m bench.taskapi_child DIR``.

Prints its URL once it serves; then answers each line on stdin: ``go`` (marks its CPU
time and its count of accepted results), ``count`` (the results it accepted since
``go``), ``stop`` (its CPU seconds since ``go``). Ends at the end of stdin."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.stepway_setup import TaskApiOnly


def main() -> int:
    api = TaskApiOnly(Path(sys.argv[1]))
    print(api.url, flush=True)
    cpu_at_go, results_at_go = time.process_time(), api.signals.results
    try:
        for line in sys.stdin:
            command = line.strip()
            if command == "go":
                cpu_at_go, results_at_go = time.process_time(), api.signals.results
            elif command == "count":
                print(api.signals.results - results_at_go, flush=True)
            elif command == "stop":
                print(f"{time.process_time() - cpu_at_go:.6f}", flush=True)
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
