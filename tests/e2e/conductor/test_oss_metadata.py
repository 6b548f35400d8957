"""conductor-oss's Java end-to-end ``MetadataClientTests`` (``e2e/src/test/java/io/
conductor/e2e/metadata``), ported to Stepway's Conductor API: task and workflow
definitions registered, updated and read back with the metadata API, the calls the
Java ``MetadataClient`` makes:

* ``unregisterTaskDef(name)``: ``DELETE /metadata/taskdefs/{name}``;
* ``registerTaskDefs(list)``: ``POST /metadata/taskdefs``;
* ``updateTaskDef(def)``: ``PUT /metadata/taskdefs``;
* ``getTaskDef(name)``: ``GET /metadata/taskdefs/{name}``;
* ``unregisterWorkflowDef(name, version)``: ``DELETE /metadata/workflow/{name}/{version}``;
* ``updateWorkflowDefs(list)``: ``PUT /metadata/workflow``;
* ``getWorkflowDef(name, version)``: ``GET /metadata/workflow/{name}?version=``.

The Java client throws on any answer that is not 2xx (the tests catch it only around the
first ``unregister``, made to clean up after an earlier run); here each other call's
status is asserted.

Translations:

* ``Commons.TASK_NAME`` is a fixed name (``test-sdk-java-task``) shared by both tests;
  here each test's task type is ``unique()`` (the workflow name is unique in Java too).
  The first ``unregister`` therefore finds nothing; its answer is ignored, as in Java.
* The definitions are sent as the Java client serializes ``Commons.getTaskDef()`` and
  ``WorkflowUtil.getWorkflowDef()``: the fields set plus the model's defaults (TaskDef:
  retryCount 3, FIXED 60 s, responseTimeoutSeconds 3600, TIME_OUT_WF; WorkflowDef:
  schemaVersion 2, restartable; WorkflowTask: type SIMPLE).

Close coverage elsewhere, not the same calls in the same order: ``tests/unit/control_plane/
api/test_metadata_workflow_api.py`` (``test_taskdefs_create_queues_idempotently``: POST,
POST again, PUT changed, GET; ``test_workflow_definitions``: POST, then PUT of two
versions, GET by version), over the ASGI app rather than ``stepway dev``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, unique

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

#: ``Commons.OWNER_EMAIL``
OWNER_EMAIL = "test@conductor.io"
#: ``Commons.WORKFLOW_VERSION``
WORKFLOW_VERSION = 1


def get_task_def(name: str) -> dict[str, Any]:
    """``Commons.getTaskDef()``: a TaskDef with its name and owner, the rest defaults."""
    return {
        "name": name,
        "ownerEmail": OWNER_EMAIL,
        "retryCount": 3,
        "timeoutSeconds": 0,
        "inputKeys": [],
        "outputKeys": [],
        "timeoutPolicy": "TIME_OUT_WF",
        "retryLogic": "FIXED",
        "retryDelaySeconds": 60,
        "responseTimeoutSeconds": 3600,
        "inputTemplate": {},
        "backoffScaleFactor": 1,
    }


def get_workflow_def(name: str, task_name: str) -> dict[str, Any]:
    """``WorkflowUtil.getWorkflowDef()``: one SIMPLE task named and referenced
    ``task_name``, timeoutSeconds 600, TIME_OUT_WF."""
    return {
        "name": name,
        "version": WORKFLOW_VERSION,
        "ownerEmail": OWNER_EMAIL,
        "timeoutSeconds": 600,
        "timeoutPolicy": "TIME_OUT_WF",
        "schemaVersion": 2,
        "restartable": True,
        "inputParameters": [],
        "outputParameters": {},
        "tasks": [
            {
                "name": task_name,
                "taskReferenceName": task_name,
                "type": "SIMPLE",
                "inputParameters": {},
                "startDelay": 0,
                "optional": False,
                "asyncComplete": False,
            }
        ],
    }


def test_task_definition(conductor: Conductor) -> None:
    # MetadataClientTests.testTaskDefinition
    # unregister (error ignored), register, update the same definition, read it back:
    # the name read is the name registered.
    task_name = unique("test-sdk-java-task")
    conductor.http.delete(f"/api/metadata/taskdefs/{task_name}")  # Java ignores the error
    task_def = get_task_def(task_name)

    r = conductor.http.post("/api/metadata/taskdefs", json=[task_def])
    assert r.status_code < 300, r.text
    r = conductor.http.put("/api/metadata/taskdefs", json=task_def)
    assert r.status_code < 300, r.text
    r = conductor.http.get(f"/api/metadata/taskdefs/{task_name}")
    assert r.status_code == 200, r.text
    received = r.json()
    assert received["name"] == task_def["name"]


def test_workflow(conductor: Conductor) -> None:
    # MetadataClientTests.testWorkflow
    # unregister version 1 (error ignored), register the task definition, PUT the same
    # workflow definition list twice (create, then update), read version 1 back: its
    # name and version are the ones registered.
    workflow_name = unique("test_wf")
    task_name = unique("test-sdk-java-task")
    conductor.http.delete(f"/api/metadata/workflow/{workflow_name}/{WORKFLOW_VERSION}")
    r = conductor.http.post("/api/metadata/taskdefs", json=[get_task_def(task_name)])
    assert r.status_code < 300, r.text
    workflow_def = get_workflow_def(workflow_name, task_name)

    r = conductor.http.put("/api/metadata/workflow", json=[workflow_def])
    assert r.status_code < 300, r.text
    r = conductor.http.put("/api/metadata/workflow", json=[workflow_def])
    assert r.status_code < 300, r.text
    r = conductor.http.get(
        f"/api/metadata/workflow/{workflow_name}", params={"version": WORKFLOW_VERSION}
    )
    assert r.status_code == 200, r.text
    received = r.json()
    assert received["name"] == workflow_name
    assert received["version"] == WORKFLOW_VERSION
