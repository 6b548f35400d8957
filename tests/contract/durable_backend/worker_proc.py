"""An engine process for test_worker_death.py: connects to the backend at ADDRESS and
hosts the ``kill_orch`` orchestration and the ``slow_step`` activity.

    python worker_proc.py ADDRESS MODE MARKER_DIR

MODE ``hang_activity``: the activity writes MARKER_DIR/activity_started and hangs.
MODE ``hang_orchestrator``: the orchestrator writes MARKER_DIR/orchestrator_started and
hangs. MODE ``normal``: everything completes. Prints ``ready`` once the worker started.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from durabletask import task

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_worker, register, start_worker, stop_worker

address, mode, marker_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def slow_step(ctx: task.ActivityContext, value: str) -> str:
    if mode == "hang_activity":
        (marker_dir / "activity_started").write_text(str(os.getpid()))
        time.sleep(600)
    return f"done:{value}:{os.getpid()}"


def kill_orch(ctx: task.OrchestrationContext, value: str) -> Any:
    if mode == "hang_orchestrator":
        (marker_dir / "orchestrator_started").write_text(str(os.getpid()))
        time.sleep(600)
    result = yield ctx.call_activity("slow_step", input=value)
    return result


worker = make_worker(BackendConfig.embedded(address))
register(worker, "all", {"kill_orch": kill_orch}, {"slow_step": slow_step})
start_worker(worker)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print("ready", flush=True)
stop.wait()
stop_worker(worker)
