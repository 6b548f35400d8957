"""JSON nested deeper than the limit is refused where it enters the engine, with a reason
that names the limit: never a RecursionError or a crash."""

from __future__ import annotations

from typing import Any

from engine.language.definitions import RunStatus
from protocol.limits import MAX_JSON_DEPTH

from .conftest import Platform


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_worker_result_nested_deeper_than_the_limit_fails_its_task(platform: Platform) -> None:
    platform.register_task_def({"name": "deep_worker", "retryCount": 2})
    platform.register(
        {
            "name": "deep_result",
            "tasks": [{"name": "deep_worker", "taskReferenceName": "w", "type": "WORKER"}],
        }
    )
    workflow_id = platform.start("deep_result")
    body = platform.take("deep_worker")
    platform.complete(body, {"value": nested(MAX_JSON_DEPTH + 5)})
    state = platform.client.wait_for_orchestration_completion(workflow_id, timeout=30)
    assert state is not None
    run = platform.services.run_store.get_run(workflow_id)
    assert run is not None and run.status == RunStatus.FAILED
    # terminal: the same result would come back, so the task is not retried
    reason = run.reason_for_incompletion or ""
    assert (
        "the output of task 'w' is nested more than "
        f"{MAX_JSON_DEPTH} levels deep (at $.value.a.a" in reason
    ), reason
    # not retried: the run has the one attempt only
    assert len(platform.services.run_store.list_tasks(workflow_id)) == 1
    assert reason.rstrip("'").endswith(f"; the limit is {MAX_JSON_DEPTH}")
    assert run.failed_reference_task_names == ["w"]
    assert platform.tasks(workflow_id)["w"].attempt == 1
