"""The official Conductor Python SDK (PyPI ``conductor-python`` 2.x) against Stepway.

Nothing here is adapted to Stepway: task definitions and the workflows are registered
with the SDK's metadata client and workflow DSL, runs are started and read with its
workflow client, and the workers (``conductor_sdk_workers``) are ``@worker_task``
functions and a ``Worker`` run by the SDK's multiprocessing ``TaskHandler`` (one spawned
process per worker) with a no-auth ``Configuration`` that only names the server URL. The
platform is the embedded one of ``stepway dev``, served by uvicorn on a free port.

Where Stepway differs from Conductor on purpose, the test says so: a result is accepted
only from the workerId that polled the task (or, when the result names no workerId, from
whoever holds the lease); Conductor accepts any.

Importing the SDK's task handler sets the multiprocessing start method to ``spawn`` for
the whole pytest session (nothing else in the suite uses multiprocessing).
"""

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from conductor.client.automator.task_handler import TaskHandler
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.workflow import Workflow
from conductor.client.orkes_clients import OrkesClients
from conductor.client.worker.worker import Worker
from conductor.client.workflow.conductor_workflow import ConductorWorkflow
from conductor.client.workflow.task.simple_task import SimpleTask

from control_plane.cli.dev import DevPlatform
from tests.e2e import conductor_sdk_workers as workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    # the SDK's own models warn about their deprecated fields when serialized
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

REPO = Path(__file__).resolve().parents[2]
TASK_TYPES = ("sdk_greet", "sdk_shout", "sdk_flaky", "sdk_slow", "sdk_progress", "sdk_long")
#: spawned worker processes import the SDK first; on a loaded machine that takes a while
WORKERS_UP_SECONDS = 150

# --- platform ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sdk:
    config: Configuration
    clients: OrkesClients
    http: httpx.Client


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sdk]:
    """The embedded platform on a free port, the task definitions registered through the
    SDK, and the SDK's TaskHandler running every worker against it until the module is
    done (then stopped, and every process it spawned reaped)."""
    port = _free_port()
    platform = DevPlatform(
        data_dir=tmp_path_factory.mktemp("sdk") / "data", port=port, repo_root=REPO
    )
    app = platform.start()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    handler: TaskHandler | None = None
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start"
        config = Configuration(server_api_url=f"http://127.0.0.1:{port}/api", debug=False)
        clients = OrkesClients(configuration=config)
        _register_task_defs(clients)
        handler = TaskHandler(
            workers=[
                Worker(
                    "sdk_shout",
                    execute_function=workers.shout,
                    poll_interval=50,
                    worker_id=workers.SHOUTER,
                )
            ],
            configuration=config,
            scan_for_annotated_workers=True,
            monitor_processes=False,
        )
        handler.start_processes()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            _wait_for_polls(http)
            yield Sdk(config, clients, http)
    finally:
        if handler is not None:
            _stop(handler)
        server.should_exit = True
        thread.join(10)
        platform.stop()


def _wait_for_polls(http: httpx.Client) -> None:
    """Until every SDK worker process has polled (Stepway records each poll)."""
    deadline = time.monotonic() + WORKERS_UP_SECONDS
    polled: set[str] = set()
    while time.monotonic() < deadline:
        polled = {p["queueName"] for p in http.get("/api/tasks/queue/polldata/all").json()}
        if polled >= set(TASK_TYPES):
            return
        time.sleep(0.5)
    pytest.fail(f"SDK workers that never polled: {sorted(set(TASK_TYPES) - polled)}")


def _stop(handler: TaskHandler) -> None:
    """Stop the TaskHandler and make sure none of its processes outlives the module."""
    handler.stop_processes()
    processes = [*handler.task_runner_processes, handler.logger_process]
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join(5)
    alive = [p.pid for p in processes if p.is_alive()]
    assert not alive, f"SDK worker processes still alive: {alive}"


def _register_task_defs(clients: OrkesClients) -> None:
    metadata = clients.get_metadata_client()
    for name in ("sdk_greet", "sdk_shout", "sdk_progress", "sdk_slow"):
        task_def = TaskDef(name=name, retry_count=0, response_timeout_seconds=30)
        task_def.owner_email = "platform@example.com"
        metadata.register_task_def(task_def)  # POST /metadata/taskdefs, a list
    metadata.register_task_def(
        TaskDef(
            name="sdk_long",
            retry_count=0,
            response_timeout_seconds=workers.LONG_RESPONSE_TIMEOUT,
            timeout_seconds=120,
        )
    )
    flaky = TaskDef(name="sdk_flaky", retry_count=0, response_timeout_seconds=30)
    metadata.register_task_def(flaky)
    flaky.retry_count = 2
    flaky.retry_logic = "FIXED"
    flaky.retry_delay_seconds = 1
    metadata.update_task_def(flaky)  # PUT /metadata/taskdefs, one
    stored = metadata.get_task_def("sdk_flaky")
    assert (stored.retry_count, stored.retry_logic, stored.retry_delay_seconds) == (2, "FIXED", 1)
    assert {"sdk_greet", "sdk_flaky"} <= {t.name for t in metadata.get_all_task_defs()}


def _register(sdk: Sdk, name: str, *tasks: SimpleTask, output: dict[str, Any]) -> None:
    """A workflow built with the SDK's DSL, registered as the SDK does it."""
    workflow = ConductorWorkflow(executor=sdk.clients.get_workflow_executor(), name=name, version=1)
    workflow.owner_email("platform@example.com").timeout_seconds(120)
    for task in tasks:
        workflow >> task
    workflow.output_parameters(output)
    workflow.register(overwrite=True)


def _start(sdk: Sdk, name: str, workflow_input: dict[str, Any]) -> str:
    request = StartWorkflowRequest(name=name, version=1, input=workflow_input)
    workflow_id = sdk.clients.get_workflow_client().start_workflow(request)
    assert isinstance(workflow_id, str) and workflow_id
    return workflow_id


def _wait(sdk: Sdk, workflow_id: str, seconds: float = 90) -> Workflow:
    client = sdk.clients.get_workflow_client()
    deadline = time.monotonic() + seconds
    while True:
        run = client.get_workflow(workflow_id, include_tasks=True)
        if run.status != "RUNNING" or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def _task(run: Workflow, ref: str) -> Any:
    (task,) = [t for t in run.tasks if t.reference_task_name == ref]
    return task


# --- tests ---------------------------------------------------------------------------


def test_sdk_workers_complete_a_two_task_workflow(sdk: Sdk) -> None:
    greet = SimpleTask("sdk_greet", "greet")
    greet.input_parameters.update({"name": "${workflow.input.name}"})
    shout = SimpleTask("sdk_shout", "shout")
    shout.input_parameters.update({"text": "${greet.output.greeting}"})
    _register(
        sdk,
        "sdk_two_steps",
        greet,
        shout,
        output={"loud": "${shout.output.loud}", "greeting": "${greet.output.greeting}"},
    )
    # registering again with overwrite=True (what a registration script does on every run)
    _register(
        sdk,
        "sdk_two_steps",
        greet,
        shout,
        output={"loud": "${shout.output.loud}", "greeting": "${greet.output.greeting}"},
    )
    registered = sdk.clients.get_metadata_client().get_workflow_def("sdk_two_steps", version=1)
    assert [t.task_reference_name for t in registered.tasks] == ["greet", "shout"]

    workflow_id = _start(sdk, "sdk_two_steps", {"name": "Ada"})
    run = _wait(sdk, workflow_id)

    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {"greeting": "Hello, Ada", "loud": "HELLO, ADA!"}
    assert [(t.reference_task_name, t.status) for t in run.tasks] == [
        ("greet", "COMPLETED"),
        ("shout", "COMPLETED"),
    ]
    shouted = _task(run, "shout")
    assert shouted.input_data == {"text": "Hello, Ada"}
    assert shouted.worker_id == workers.SHOUTER
    task_client = sdk.clients.get_task_client()
    assert task_client.get_task(shouted.task_id).output_data == {"loud": "HELLO, ADA!"}
    task_client.add_task_log(shouted.task_id, "a line from outside")
    logs = [entry.log for entry in task_client.get_task_logs(shouted.task_id)]
    assert logs == ["shouted", "a line from outside"]
    poll_data = task_client.get_task_poll_data("sdk_shout")
    assert [p.worker_id for p in poll_data] == [workers.SHOUTER]
    assert task_client.get_queue_size_for_task("sdk_shout") == 0
    assert sdk.clients.get_workflow_client().get_workflow_status(workflow_id).status == (
        "COMPLETED"
    )


def test_workflow_tasks_are_in_the_order_they_were_scheduled(sdk: Sdk) -> None:
    greet = SimpleTask("sdk_greet", "greet")
    greet.input_parameters.update({"name": "one"})
    again = SimpleTask("sdk_greet", "again")
    again.input_parameters.update({"name": "two"})
    _register(sdk, "sdk_ordered", greet, again, output={})
    run = _wait(sdk, _start(sdk, "sdk_ordered", {}))
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert [t.reference_task_name for t in run.tasks] == ["greet", "again"]
    assert run.tasks[0].seq < run.tasks[1].seq


def test_a_failed_result_from_an_sdk_worker_is_retried_per_the_task_def(sdk: Sdk) -> None:
    _register(sdk, "sdk_retrying", SimpleTask("sdk_flaky", "flaky"), output={})
    run = _wait(sdk, _start(sdk, "sdk_retrying", {}))

    assert run.status == "COMPLETED", run.reason_for_incompletion
    # as in Conductor, the retry is a task of its own (retriedTaskId names the first)
    failed, retried = run.tasks
    assert (failed.status, failed.retry_count) == ("FAILED", 0)
    assert (retried.status, retried.retry_count) == ("COMPLETED", 1)
    assert retried.output_data == {"retryCount": 1}


def test_in_progress_with_callback_after_seconds_from_an_sdk_worker(sdk: Sdk) -> None:
    _register(sdk, "sdk_slow_flow", SimpleTask("sdk_slow", "slow"), output={})
    started = time.monotonic()
    run = _wait(sdk, _start(sdk, "sdk_slow_flow", {}))

    assert run.status == "COMPLETED", run.reason_for_incompletion
    (task,) = run.tasks
    assert task.status == "COMPLETED"
    assert task.output_data["rounds"] == 3
    assert task.output_data["pollCount"] >= 3
    # two callbacks of 1 s each: the task was not handed back before its delay
    assert time.monotonic() - started >= 2


def test_task_in_progress_returned_by_an_sdk_function_worker(sdk: Sdk) -> None:
    step = SimpleTask("sdk_progress", "progress")
    step.input_parameters.update({"step": 7})
    _register(sdk, "sdk_progress_flow", step, output={"result": "${progress.output}"})
    run = _wait(sdk, _start(sdk, "sdk_progress_flow", {}))

    assert run.status == "COMPLETED", run.reason_for_incompletion
    result = run.output["result"]
    assert (result["done"], result["step"]) == (True, 7)
    assert result["polls"] >= 2


def test_lease_extension_keeps_a_long_task_past_its_response_timeout(sdk: Sdk) -> None:
    step = SimpleTask("sdk_long", "long")
    seconds = workers.LONG_RESPONSE_TIMEOUT * 1.5
    step.input_parameters.update({"seconds": seconds})
    _register(sdk, "sdk_long_flow", step, output={"slept": "${long.output.slept}"})
    run = _wait(sdk, _start(sdk, "sdk_long_flow", {}))

    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {"slept": seconds}
    (task,) = run.tasks
    assert (task.status, task.retry_count) == ("COMPLETED", 0)
