"""A run whose data would outgrow one orchestration message fails with a reason naming
the size and the limit, instead of a message the backend refuses or redelivers."""

from __future__ import annotations

import time

from engine.language.definitions import RunStatus
from engine.ports.run_store import RunQuery, RunRecord
from engine.runtime.run_limits import RunLimits

from .conftest import Platform


def test_a_run_whose_state_outgrows_the_message_limit_fails_with_the_sizes(
    platform: Platform,
) -> None:
    limit = 64 * 1024
    platform.services.definitions.limits = RunLimits(max_message_bytes=limit)
    platform.register(
        {
            "name": "growing",
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "$.loop.iteration < 100",
                    "loopOver": [
                        {
                            "name": "chunk",
                            "taskReferenceName": "chunk",
                            "type": "INLINE",
                            # 5 KB a step: below the offload threshold, so the loop's
                            # output (every iteration's) grows in the run state
                            "inputParameters": {"expression": "'x'.repeat(5000)"},
                        }
                    ],
                }
            ],
        }
    )
    workflow_id = platform.start("growing")
    state = platform.client.wait_for_orchestration_completion(workflow_id, timeout=120)
    assert state is not None
    run = platform.services.run_store.get_run(workflow_id)
    assert run is not None and run.status == RunStatus.FAILED
    reason = run.reason_for_incompletion or ""
    assert reason.startswith("the run's state (carried into a new execution) would be an "), reason
    assert reason.endswith(
        f"bytes, above the limit of {limit} bytes (STEPWAY_MAX_MESSAGE_BYTES): the run "
        "carries too much data"
    )


def test_a_run_that_starts_itself_stops_at_the_nesting_limit(platform: Platform) -> None:
    """Registration refuses such a definition; one stored around it (registered before
    the check, or through the run store) still cannot nest runs without end."""
    platform.services.definitions.limits = RunLimits(max_workflow_depth=3)
    platform.register(
        {
            "name": "again",
            "tasks": [
                {
                    "name": "again",
                    "taskReferenceName": "again",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "again", "version": 1},
                }
            ],
        }
    )
    workflow_id = platform.start("again")
    state = platform.client.wait_for_orchestration_completion(workflow_id, timeout=120)
    assert state is not None
    run = platform.services.run_store.get_run(workflow_id)
    assert run is not None and run.status == RunStatus.FAILED
    assert (
        "starting workflow 'again' would nest runs 4 deep, above the limit of 3 "
        "(STEPWAY_MAX_WORKFLOW_DEPTH)" in (run.reason_for_incompletion or "")
    )
    runs = {
        r.workflow_id: r for r in platform.services.run_store.search_runs(RunQuery(size=50)).results
    }
    # the top-level run and three nested ones, each the child of the one before
    chain = [workflow_id]
    while True:
        children = [r for r in runs.values() if r.parent_workflow_id == chain[-1]]
        if not children:
            break
        chain.append(children[0].workflow_id)
    assert len(chain) == len(runs) == 4
    assert {r.status for r in runs.values()} == {RunStatus.FAILED}


def test_terminating_a_run_reaches_every_descendant(platform: Platform) -> None:
    def nest(name: str, child: str) -> dict[str, object]:
        return {
            "name": name,
            "tasks": [
                {
                    "name": "down",
                    "taskReferenceName": "down",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child, "version": 1},
                }
            ],
        }

    platform.register(nest("top", "middle"))
    platform.register(nest("middle", "bottom"))
    platform.register(
        {
            "name": "bottom",
            "tasks": [{"name": "wait", "taskReferenceName": "wait", "type": "HUMAN"}],
        }
    )
    workflow_id = platform.start("top")
    deadline = time.monotonic() + 60
    runs: dict[str, RunRecord] = {}
    while time.monotonic() < deadline:
        runs = {
            r.workflow_id: r for r in platform.services.run_store.search_runs(RunQuery()).results
        }
        waiting = [r for r in runs.values() if r.name == "bottom"]
        if waiting and platform.tasks(waiting[0].workflow_id).get("wait"):
            break
        time.sleep(0.1)
    assert {r.name for r in runs.values()} == {"top", "middle", "bottom"}
    platform.terminate(workflow_id, "enough")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        statuses = {
            r.name: r.status for r in platform.services.run_store.search_runs(RunQuery()).results
        }
        if all(s.is_terminal for s in statuses.values()):
            break
        time.sleep(0.1)
    assert statuses == {
        "top": RunStatus.TERMINATED,
        "middle": RunStatus.TERMINATED,
        "bottom": RunStatus.TERMINATED,
    }
