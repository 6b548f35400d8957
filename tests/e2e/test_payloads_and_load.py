"""Payload offload of WORKER inputs, and many concurrent runs, over the real gRPC backend."""

from __future__ import annotations

import json
from typing import Any

from engine.language.definitions import RunStatus, TaskStatus
from engine.ports.payload_store import PayloadLimits


def _register(platform: Any) -> None:
    platform.register_task_def({"name": "big", "retryCount": 2, "retryDelaySeconds": 0})
    platform.register(
        {
            "name": "bulky",
            "tasks": [
                {
                    "name": "big",
                    "taskReferenceName": "big",
                    "type": "WORKER",
                    "inputParameters": {"blob": "${workflow.input.blob}"},
                }
            ],
        }
    )


def test_large_worker_input_goes_to_the_payload_store(platform: Any) -> None:
    _register(platform)
    blob = "x" * 12_000
    workflow_id = platform.start("bulky", {"blob": blob})
    body = platform.take("big")
    assert "input" not in body
    ref = body["inputRef"]
    assert json.loads(platform.services.payloads.get(ref)) == {"blob": blob}
    row = platform.tasks(workflow_id)["big"]
    assert row.input_ref == ref
    assert row.input_data is None
    platform.complete(body, {"size": len(blob)})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"size": 12_000}


def test_worker_input_above_the_maximum_fails_the_task(platform: Any) -> None:
    _register(platform)
    platform.services.payload_limits = PayloadLimits(max_size=50_000)
    workflow_id = platform.start("bulky", {"blob": "y" * 60_000})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    row = platform.tasks(workflow_id)["big"]
    # terminal: a retry would not make the payload smaller
    assert (row.status, row.attempt) == (TaskStatus.FAILED_WITH_TERMINAL_ERROR, 1)
    reason = row.reason_for_incompletion or ""
    assert reason.startswith("input of task 'big': task input payloads/"), reason
    assert "-input.json is 60011 bytes" in reason, reason
    assert "maximum payload size of 50000 bytes" in reason, reason
    assert reason in (run.reason_for_incompletion or "")
    assert platform.services.queue.depth("big").total == 0


def test_fifty_concurrent_runs_waiting_on_workers(platform: Any) -> None:
    platform.register_task_def({"name": "crowd", "retryCount": 0})
    platform.register(
        {
            "name": "waiter",
            "tasks": [
                {
                    "name": "crowd",
                    "taskReferenceName": "crowd",
                    "type": "WORKER",
                    "inputParameters": {"n": "${workflow.input.n}"},
                }
            ],
            "outputParameters": {"n": "${crowd.output.n}"},
        }
    )
    ids = [platform.start("waiter", {"n": n}, workflow_id=f"crowd-{n}") for n in range(50)]
    bodies = [platform.take("crowd") for _ in ids]
    assert sorted(b["input"]["n"] for b in bodies) == list(range(50))
    for body in bodies:
        platform.complete(body, {"n": body["input"]["n"] * 2})
    for n, workflow_id in enumerate(ids):
        run = platform.wait(workflow_id)
        assert run.status == RunStatus.COMPLETED
        assert run.output == {"n": 2 * n}
    assert platform.services.queue.depth("crowd").total == 0
