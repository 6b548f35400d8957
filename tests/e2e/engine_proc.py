"""An engine process for test_engine_restart.py: the interpreter and its activities on the
embedded backend at ADDRESS, with the SQLite run store, queues and payloads in DATA_DIR.

    python tests/e2e/engine_proc.py ADDRESS DATA_DIR PAYLOAD_SECRET

Prints ``ready`` once the worker is connected; stops on SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import start_worker, stop_worker
from engine.app.host import LocalSettings, build_local_services, make_engine_worker


def main() -> None:
    address, data_dir, secret = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    config = BackendConfig.embedded(address)
    services = build_local_services(LocalSettings(data_dir=data_dir, payload_secret=secret), config)
    worker = make_engine_worker(config, services)
    start_worker(worker)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    stop_worker(worker)


if __name__ == "__main__":
    main()
