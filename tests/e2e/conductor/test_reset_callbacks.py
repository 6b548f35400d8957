"""``POST /workflow/{id}/resetcallbacks`` through the official Python SDK's
``WorkflowResourceApi.reset_workflow``: a worker task given back with
``callbackAfterSeconds`` is handed out again at once, its ``callbackAfterSeconds`` 0
(conductor-oss's resetCallbacksForWorkflow); a run that ended is refused with
conductor-oss's message; the delayed message the reset overtook is dropped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.api.workflow_resource_api import WorkflowResourceApi
from conductor.client.http.api_client import ApiClient
from conductor.client.http.rest import ApiException

from tests.e2e.conductor.harness import Conductor, unique

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def workflows(dev_url: str) -> Iterator[WorkflowResourceApi]:
    config = Configuration(server_api_url=f"{dev_url}/api", debug=False)
    yield WorkflowResourceApi(ApiClient(config))


def test_a_task_waiting_out_its_callback_is_handed_out_at_once_after_a_reset(
    conductor: Conductor, workflows: WorkflowResourceApi
) -> None:
    task_type, name = conductor.one_task_workflow("cb", responseTimeoutSeconds=7200)
    workflow_id = conductor.start(name, version=1)
    polled = conductor.poll_one(task_type)
    r = conductor.update(polled, "IN_PROGRESS", {"done": 1}, callbackAfterSeconds=4)
    assert r.status_code == 200, r.text
    assert conductor.poll(task_type, seconds=0.5) is None  # it waits out its callback

    workflows.reset_workflow(workflow_id)

    again = conductor.poll_one(task_type, seconds=2)
    assert (again["taskId"], again["callbackAfterSeconds"]) == (polled["taskId"], 0)
    workflows.reset_workflow(workflow_id)  # nothing waits now: no message more
    # the delayed message comes due meanwhile and is dropped: the worker holds the task
    assert conductor.poll(task_type, seconds=5) is None
    conductor.complete(again, {"done": 2})
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["tasks"][0]["outputData"] == {"done": 2}

    with pytest.raises(ApiException) as refused:
        workflows.reset_workflow(workflow_id)
    assert refused.value.status == 409
    assert "Workflow is in terminal state. Status = COMPLETED" in str(refused.value.body)
    with pytest.raises(ApiException) as unknown:
        workflows.reset_workflow(unique("no_such_run"))
    assert unknown.value.status == 404
