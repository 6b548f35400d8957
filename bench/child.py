"""One system under test in a process of its own: ``python -m bench.child SYSTEM``.

Reads JSON commands on stdin, one a line, and answers on stdout with lines prefixed by
``bench.common.MARK``:

* at start: ``{"ready": {versions...}}`` or ``{"skip": "why"}`` (a peer not installed);
* ``{"op": "run", "workload": W, "variant": V, "params": {...}}`` -> ``{"result": {...}}``
  or ``{"error": "traceback"}``;
* ``{"op": "end", "workload": W}`` -> ``{"ok": true}`` (releases that workload's
  worker processes);
* ``{"op": "quit"}`` tears the system down and exits.

A system module ``bench.sys_<name>`` defines ``System(config)`` with ``versions()``,
``run(workload, variant, params)``, ``end(workload)`` and ``close()``; importing it
raises ImportError when its engine is not installed.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import traceback
from typing import Any

from bench.common import emit


def main() -> int:
    name = sys.argv[1]
    config: dict[str, Any] = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    logging.basicConfig(level=logging.WARNING)
    logging.disable(logging.WARNING)
    try:
        module = importlib.import_module(f"bench.sys_{name}")
    except ImportError as exc:
        emit({"skip": f"not installed ({exc.name or exc}); uv sync --group bench"})
        return 0
    try:
        system = module.System(config)
    except Exception:
        emit({"skip": "could not start: " + traceback.format_exc(limit=3)})
        return 0
    emit({"ready": system.versions()})
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            op = command["op"]
            if op == "quit":
                break
            try:
                if op == "run":
                    result = system.run(command["workload"], command["variant"], command["params"])
                    emit({"result": result})
                elif op == "end":
                    system.end(command["workload"])
                    emit({"ok": True})
                else:
                    emit({"error": f"unknown op {op!r}"})
            except Exception:
                emit({"error": traceback.format_exc()})
    finally:
        system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
