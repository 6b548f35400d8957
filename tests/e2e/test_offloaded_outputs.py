"""Outputs above the threshold live in the payload store; expressions still see them."""

from __future__ import annotations

import json
from typing import Any

from engine.language.definitions import RunStatus


def test_expressions_resolve_an_offloaded_worker_output(platform: Any) -> None:
    platform.register_task_def({"name": "big", "retryCount": 0, "responseTimeoutSeconds": 30})
    platform.register_task_def({"name": "small", "retryCount": 0, "responseTimeoutSeconds": 30})
    platform.register(
        {
            "name": "offloaded",
            "tasks": [
                {"name": "big", "taskReferenceName": "big", "type": "WORKER"},
                {
                    "name": "small",
                    "taskReferenceName": "small",
                    "type": "WORKER",
                    "inputParameters": {
                        "first": "${big.output.rows[0].id}",
                        "count": "${big.output.count}",
                    },
                },
            ],
            "outputParameters": {"last": "${big.output.rows[-1].id}"},
        }
    )
    workflow_id = platform.start("offloaded")
    body = platform.take("big")
    rows = [{"id": f"row-{i}", "pad": "x" * 100} for i in range(200)]
    output = {"rows": rows, "count": len(rows)}
    assert len(json.dumps(output)) > 10 * 1024
    # as the Task API does: the value goes to the payload store, the event carries the ref
    reference = platform.services.payloads.put(
        f"payloads/{workflow_id}/{body['taskId']}-output.json", json.dumps(output).encode()
    )
    platform.complete(body, {"outputRef": reference})
    second = platform.take("small")
    assert second["input"] == {"first": "row-0", "count": 200}
    platform.complete(second, {})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"last": "row-199"}
    # the orchestration history holds the reference, never the rows
    history = str(platform.client.get_orchestration_history(workflow_id))
    assert reference in history
    assert "row-150" not in history


def test_a_large_output_passed_to_the_next_task_travels_by_reference(platform: Any) -> None:
    platform.register_task_def({"name": "produce", "retryCount": 0})
    platform.register_task_def({"name": "consume", "retryCount": 0})
    platform.register(
        {
            "name": "by_reference",
            "tasks": [
                {"name": "produce", "taskReferenceName": "produce", "type": "WORKER"},
                {
                    "name": "consume",
                    "taskReferenceName": "consume",
                    "type": "WORKER",
                    "inputParameters": {
                        "rows": "${produce.output.rows}",
                        "whole": "${produce.output}",
                        "count": "${produce.output.count}",
                    },
                },
            ],
        }
    )
    workflow_id = platform.start("by_reference")
    body = platform.take("produce")
    rows = [{"id": f"row-{i}", "pad": "x" * 100} for i in range(200)]
    output = {"rows": rows, "count": len(rows)}
    reference = platform.services.payloads.put(
        f"payloads/{workflow_id}/{body['taskId']}-output.json", json.dumps(output).encode()
    )
    platform.complete(body, {"outputRef": reference})
    second = platform.take("consume")
    # the worker gets the values (the large input itself is offloaded for the message)
    assert "inputRef" in second and "input" not in second
    delivered = json.loads(platform.services.payloads.get(second["inputRef"]))
    assert delivered == {"rows": rows, "whole": output, "count": 200}
    platform.complete(second, {})
    platform.wait(workflow_id)
    # the run's state and history carried pointers, never the rows
    history = str(platform.client.get_orchestration_history(workflow_id))
    assert "row-150" not in history
