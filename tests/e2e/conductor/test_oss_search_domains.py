"""conductor-oss's Java e2e ``WorkflowSearchTests`` (``e2e/src/test/java/io/conductor/e2e/
workflow``), ``DoWhileWithDomainTests`` and ``SubWorkflowScheduledRaceTests``
(``.../e2e/control``) over Stepway's Conductor API: ``GET /workflow/search`` queries by
workflow type and correlation id, an inline SUB_WORKFLOW after a worker task, and 50
parents whose child run (one INLINE task) completes at once.

Translations:

* The Java tests name workflows and tasks with random or fixed strings (``dt1``,
  ``dt2``, ``sw_race_parent_<suffix>``); here every name is ``unique()``.
* ``WorkflowClient.search(query)`` is ``GET /workflow/search?query=...`` with Conductor's
  defaults (start 0, size 100). Conductor's search reads an index that is filled
  asynchronously (hence the Java tests' ``await``); Stepway searches the run store. The
  waits are kept.
* The Java tests' clean-up (terminate, ``unregisterWorkflowDef``) is kept and asserted as
  the Java client throws on an error answer.
* SubWorkflowScheduledRaceTests starts its 50 parents from 16 threads; so does the port.
  Its assertions are one test (Conductor's child run id, see the xfail) and the same
  runs' invariants the Java test names in its comment (every parent completed, its
  SUB_WORKFLOW task names a child run of that parent, as many child runs as parents)
  another, which do not depend on how the id is made. Both read the same 50 runs
  (started once, ``race_parents``).

Not ported (docs/conductor-compatibility.md, ``GET /workflow/search`` row: "`query`
supports `workflowType`, `status` and `correlationId` clauses ..."; "`sort` is
`startTime`, `startTime:ASC` or `startTime:DESC` ...; another field or direction is a 400
naming `sort`"):

* ``testSearchByWorkflowIdWithDoubleQuotes`` and ``testSearchByWorkflowIdWithSingleQuotes``:
  their queries (``workflowId="..."``, ``workflowId='...'``) filter on ``workflowId``;
* ``testSearchWithPaginationAndSort``: its query is supported, its ``sort``
  (``workflowId:ASC``) is not.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow
from tests.e2e.conductor.oss_e2e import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

OWNER = "test@conductor.io"


def _search(conductor: Conductor, query: str) -> dict[str, Any]:
    """``WorkflowClient.search(query)``: the SearchResult of WorkflowSummary."""
    r = conductor.http.get("/api/workflow/search", params={"query": query})
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def _await_search(conductor: Conductor, query: str, count: int) -> dict[str, Any]:
    """``await().atMost(30 s).untilAsserted(assertEquals(count, results.size()))``."""

    def probe() -> dict[str, Any]:
        found = _search(conductor, query)
        assert len(found["results"]) == count, [s["workflowId"] for s in found["results"]]
        return found

    result: dict[str, Any] = eventually(probe, 30)
    return result


def _terminate(conductor: Conductor, workflow_id: str, reason: str) -> None:
    r = conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": reason})
    assert r.status_code == 200, r.text


def _unregister(conductor: Conductor, name: str, version: int = 1) -> None:
    """``MetadataClient.unregisterWorkflowDef``."""
    r = conductor.http.delete(f"/api/metadata/workflow/{name}/{version}")
    assert r.status_code < 300, r.text


# --- WorkflowSearchTests ----------------------------------------------------------------


def _register_workflow_def(conductor: Conductor, workflow_name: str, task_name: str) -> None:
    """WorkflowSearchTests.registerWorkflowDef: one SIMPLE task with its TaskDef; the
    definition's other fields as the Java client sends them (version 1, ALERT_ONLY, no
    timeout)."""
    task_def = {"name": task_name, "ownerEmail": OWNER}
    task = simple(task_name, task_name, value="${workflow.input.value}", order="123")
    conductor.register(
        workflow(
            workflow_name,
            [{**task, "taskDefinition": task_def}],
            ownerEmail=OWNER,
            inputParameters=["value", "inlineValue"],
            description="Workflow to monitor order state",
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        )
    )
    conductor.taskdefs(task_def)


def test_basic_workflow_search(conductor: Conductor) -> None:
    # WorkflowSearchTests.testBasicWorkflowSearch
    task_name1, workflow_name1 = unique("T1"), unique("W1")
    # no run of a workflow not registered yet
    assert len(_search(conductor, f"workflowType IN ({workflow_name1})")["results"]) == 0

    _register_workflow_def(conductor, workflow_name1, task_name1)
    conductor.start(workflow_name1, version=1)
    conductor.start(workflow_name1, version=1)
    _await_search(conductor, f"workflowType IN ({workflow_name1})", 2)

    task_name2, workflow_name2 = unique("T2"), unique("W2")
    _register_workflow_def(conductor, workflow_name2, task_name2)
    conductor.start(workflow_name2, version=1)
    conductor.start(workflow_name2, version=1)
    # this workflow alone: 2 results
    _await_search(conductor, f"workflowType IN ({workflow_name2})", 2)
    # both: 4 results
    found = _await_search(conductor, f"workflowType IN ({workflow_name1},{workflow_name2})", 4)

    for summary in found["results"]:
        _terminate(conductor, summary["workflowId"], "test")
    _unregister(conductor, workflow_name1)
    _unregister(conductor, workflow_name2)


def test_search_by_workflow_type_with_single_quotes(conductor: Conductor) -> None:
    # WorkflowSearchTests.testSearchByWorkflowTypeWithSingleQuotes
    task_name, workflow_name = unique("T"), unique("W")
    _register_workflow_def(conductor, workflow_name, task_name)
    conductor.start(workflow_name, version=1)
    conductor.start(workflow_name, version=1)

    _await_search(conductor, f"workflowType='{workflow_name}'", 2)

    for summary in _search(conductor, f"workflowType='{workflow_name}'")["results"]:
        _terminate(conductor, summary["workflowId"], "test cleanup")
    _unregister(conductor, workflow_name)


def test_search_with_multiple_conditions_and_single_quotes(conductor: Conductor) -> None:
    # WorkflowSearchTests.testSearchWithMultipleConditionsAndSingleQuotes
    task_name, workflow_name = unique("T"), unique("W")
    correlation_id = unique("corr")
    _register_workflow_def(conductor, workflow_name, task_name)
    workflow_id = conductor.start(workflow_name, version=1, correlation_id=correlation_id)
    # another run without the correlationId, to see that the filter works
    other_workflow_id = conductor.start(workflow_name, version=1)

    found = _await_search(
        conductor, f"correlationId='{correlation_id}' AND workflowType='{workflow_name}'", 1
    )
    assert found["results"][0]["workflowId"] == workflow_id

    _terminate(conductor, workflow_id, "test cleanup")
    _terminate(conductor, other_workflow_id, "test cleanup")
    _unregister(conductor, workflow_name)


# --- DoWhileWithDomainTests -------------------------------------------------------------


def test_sub_workflow_0_version(conductor: Conductor) -> None:
    # DoWhileWithDomainTests.testSubWorkflow0version
    dt1, dt2, parent = unique("dt1"), unique("dt2"), unique("P")
    # registerInlineWorkflowDef: dt2 (SIMPLE), then dynamicFork, a SUB_WORKFLOW (with dt1's
    # TaskDef) of an inline definition whose one task is dt1 (SIMPLE)
    task_def, task_def2 = {"name": dt1, "ownerEmail": OWNER}, {"name": dt2, "ownerEmail": OWNER}
    inline_def = {
        "name": "inline_test_sub_workflow",
        "version": 1,
        "schemaVersion": 2,
        "tasks": [{**simple(dt1, "dt1"), "taskDefinition": task_def}],
        "timeoutPolicy": "TIME_OUT_WF",
        "timeoutSeconds": 600,
    }
    sub = {
        "name": "dynamicFork",
        "taskReferenceName": "dynamicFork",
        "type": "SUB_WORKFLOW",
        "inputParameters": {},
        "taskDefinition": task_def,
        "subWorkflowParam": {
            "name": "inline_test_sub_workflow",
            "version": 1,
            "workflowDefinition": inline_def,
        },
    }
    conductor.register(
        workflow(
            parent,
            [{**simple(dt2, "dt2"), "taskDefinition": task_def2}, sub],
            ownerEmail=OWNER,
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
            inputParameters=["value", "inlineValue"],
            description="Workflow to test inline sub_workflow definition",
        )
    )
    conductor.taskdefs(task_def, task_def2)

    workflow_id = conductor.start(parent, version=1)
    run = conductor.wait_tasks(workflow_id, 1, seconds=33)
    assert run["tasks"], "the run has no task"
    # the first task, completed by reference (updateTaskSync)
    task_ref_name = conductor.run(workflow_id)["tasks"][0]["referenceTaskName"]
    r = conductor.http.post(f"/api/tasks/{workflow_id}/{task_ref_name}/COMPLETED/sync", json={})
    assert r.status_code == 200, r.text

    def sub_workflow_started() -> str:
        latest = conductor.run(workflow_id)
        assert latest["status"] == "RUNNING"
        assert len(latest["tasks"]) > 1
        assert latest["tasks"][0]["status"] == "COMPLETED"
        assert latest["tasks"][1]["status"] == "IN_PROGRESS"
        child: str | None = latest["tasks"][1].get("subWorkflowId")
        assert child, latest["tasks"][1]
        return child

    sub_workflow_id: str = eventually(sub_workflow_started, 33)

    # the child's first task (awaitFirstTaskId), completed by id in the child run
    def first_task_id() -> str:
        tasks = conductor.run(sub_workflow_id)["tasks"]
        assert tasks, f"{sub_workflow_id} has no task"
        task_id: str = tasks[0]["taskId"]
        assert task_id
        return task_id

    task_id = eventually(first_task_id, 33)
    r = conductor.update(
        {"workflowInstanceId": sub_workflow_id, "taskId": task_id}, "COMPLETED", {}
    )
    assert r.status_code == 200, r.text

    def both_completed() -> bool:
        tasks = conductor.run(workflow_id)["tasks"]
        assert tasks[0]["status"] == "COMPLETED"
        assert tasks[1]["status"] == "COMPLETED"
        return True

    eventually(both_completed, 33)
    _unregister(conductor, parent)


# --- SubWorkflowScheduledRaceTests ------------------------------------------------------

PARALLELISM = 50
AWAIT_SECONDS = 90


def _deterministic_sub_workflow_id(parent_id: str, parent_task_id: str, retry_count: int) -> str:
    """Conductor's ``IDGenerator.generateSubWorkflowId``: a name-based (v3) UUID of
    ``subworkflow:<parentId>:<parentTaskId>:<retryCount>``, as Java's
    ``UUID.nameUUIDFromBytes`` (MD5 of the bytes alone, no namespace)."""
    source = f"subworkflow:{parent_id}:{parent_task_id}:{retry_count}".encode()
    digest = bytearray(hashlib.md5(source).digest())
    digest[6] = (digest[6] & 0x0F) | 0x30
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


def _register_race(conductor: Conductor, parent_name: str, child_name: str) -> None:
    """registerChildWithInlineOnly and registerParentWithSubWorkflow."""
    td = {"name": child_name, "retryCount": 0, "ownerEmail": OWNER}
    conductor.taskdefs(td)
    inline = {
        "name": "inline_done",
        "taskReferenceName": "inline_done",
        "type": "INLINE",
        "taskDefinition": td,
        "inputParameters": {"evaluatorType": "graaljs", "expression": "true;"},
    }
    conductor.register(
        workflow(
            child_name,
            [inline],
            ownerEmail=OWNER,
            timeoutSeconds=120,
            timeoutPolicy="TIME_OUT_WF",
        )
    )
    sub_td = {"name": f"sub_{parent_name}", "retryCount": 0, "ownerEmail": OWNER}
    conductor.taskdefs(sub_td)
    sw = {
        "name": f"sub_{parent_name}",
        "taskReferenceName": "child_call",
        "type": "SUB_WORKFLOW",
        "inputParameters": {},
        "taskDefinition": sub_td,
        "subWorkflowParam": {"name": child_name, "version": 1},
    }
    conductor.register(
        workflow(
            parent_name, [sw], ownerEmail=OWNER, timeoutSeconds=120, timeoutPolicy="TIME_OUT_WF"
        )
    )


@pytest.fixture(scope="module")
def race_parents(dev_url: str) -> Iterator[tuple[str, list[str]]]:
    """The Java test's set-up and starts: the child (one INLINE task) and its parent
    registered, 50 parents started from 16 threads; the child's name and the parents'
    ids."""
    with httpx.Client(base_url=dev_url, timeout=30) as http:
        conductor = Conductor(http)
        suffix = uuid.uuid4().hex[:6]
        parent_name, child_name = f"sw_race_parent_{suffix}", f"sw_race_child_{suffix}"
        _register_race(conductor, parent_name, child_name)
        with ThreadPoolExecutor(16) as pool:
            starts = [
                pool.submit(conductor.start, parent_name, version=1) for _ in range(PARALLELISM)
            ]
            parent_ids = [start.result() for start in starts]
        yield child_name, parent_ids


def _await_all_completed(conductor: Conductor, parent_ids: list[str]) -> None:
    def probe() -> bool:
        for pid in parent_ids:
            status = conductor.run(pid)["status"]
            assert status == "COMPLETED", f"parent {pid} did not complete: {status}"
        return True

    eventually(probe, AWAIT_SECONDS)


def _sub_workflow_task(conductor: Conductor, pid: str) -> dict[str, Any]:
    found = [t for t in conductor.run(pid)["tasks"] if t["taskType"] == "SUB_WORKFLOW"]
    assert found, f"parent {pid} has no SUB_WORKFLOW task"
    return found[0]


@pytest.mark.xfail(
    strict=True,
    reason="the parent's SUB_WORKFLOW task's subWorkflowId is Stepway's child run id "
    "'<taskId>-<attempt>' (protocol/runs.py: child_run_id), not Conductor's "
    "IDGenerator.generateSubWorkflowId (UUID.nameUUIDFromBytes of "
    "'subworkflow:<parentId>:<parentTaskId>:0')",
)
def test_parent_sub_workflow_task_must_not_point_at_phantom_child(
    conductor: Conductor, race_parents: tuple[str, list[str]]
) -> None:
    # SubWorkflowScheduledRaceTests.parentSubWorkflowTaskMustNotPointAtPhantomChild
    _, parent_ids = race_parents
    _await_all_completed(conductor, parent_ids)

    # per parent: the SUB_WORKFLOW task's subWorkflowId is the deterministic id derived
    # from the real parent context
    for pid in parent_ids:
        sub_task = _sub_workflow_task(conductor, pid)
        expected_child_id = _deterministic_sub_workflow_id(pid, sub_task["taskId"], 0)
        actual_child_id = sub_task.get("subWorkflowId")
        assert actual_child_id is not None, f"parent {pid} has no subWorkflowId attached"
        assert actual_child_id == expected_child_id, (
            f"parent {pid} subWorkflowId does not match the deterministic id derived from "
            "the parent context"
        )
        child = conductor.run(actual_child_id)
        assert child["parentWorkflowId"] == pid, (
            f"child {actual_child_id} has wrong parentWorkflowId"
        )

    # phantom probe: the id the buggy derivation would make, for every parent
    phantoms = []
    for pid in parent_ids:
        parent_task_id = _sub_workflow_task(conductor, pid)["taskId"]
        legitimate_child_id = _deterministic_sub_workflow_id(pid, parent_task_id, 0)
        phantom_id = _deterministic_sub_workflow_id(legitimate_child_id, parent_task_id, 0)
        if conductor.http.get(f"/api/workflow/{phantom_id}").status_code == 200:
            phantoms.append(phantom_id)
    assert phantoms == [], f"found phantom workflows produced by the race: {phantoms}"


def test_parent_sub_workflow_task_must_not_point_at_phantom_child_invariants(
    conductor: Conductor, race_parents: tuple[str, list[str]]
) -> None:
    # SubWorkflowScheduledRaceTests.parentSubWorkflowTaskMustNotPointAtPhantomChild
    # The invariants its comment names, on the same runs, whatever the id's form: each
    # parent completed; its SUB_WORKFLOW task names a child run of that parent and that
    # task; the child definition has exactly as many runs as there are parents (any
    # extra is a phantom).
    child_name, parent_ids = race_parents
    _await_all_completed(conductor, parent_ids)

    child_ids = []
    for pid in parent_ids:
        sub_task = _sub_workflow_task(conductor, pid)
        child_id = sub_task.get("subWorkflowId")
        assert child_id, f"parent {pid} has no subWorkflowId attached"
        child = conductor.run(child_id)
        assert child["parentWorkflowId"] == pid, f"child {child_id} has wrong parentWorkflowId"
        assert child["parentWorkflowTaskId"] == sub_task["taskId"]
        assert child["workflowName"] == child_name
        child_ids.append(child_id)
    assert len(set(child_ids)) == PARALLELISM

    r = conductor.http.get(
        "/api/workflow/search", params={"query": f"workflowType='{child_name}'", "size": 1000}
    )
    assert r.status_code == 200, r.text
    assert r.json()["totalHits"] == PARALLELISM
    assert sorted(s["workflowId"] for s in r.json()["results"]) == sorted(child_ids)
