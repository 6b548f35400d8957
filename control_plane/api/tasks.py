"""Task API (workers), Conductor-compatible. Thin: the logic is in
:mod:`control_plane.services.task_handout`, :mod:`~control_plane.services.task_results`
and :mod:`~control_plane.services.tasks`."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable
from typing import Annotated, Any, cast, get_args

import anyio.from_thread
import anyio.to_thread
from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from control_plane.api.errors import ApiError, bad_request, not_found
from control_plane.api.openapi import COMMON, errors
from control_plane.api.routing import StepwayRoute
from control_plane.auth import Principal, principal, require_role, require_worker
from control_plane.services.signals import ReturnStrategy
from control_plane.services.task_handout import TaskHandout
from control_plane.services.task_results import (
    ResultStatus,
    TaskResultIn,
    TaskResults,
    UpdateOutcome,
)
from control_plane.services.task_tracing import result_span
from control_plane.services.tasks import TaskService
from control_plane.services.workflows import WorkflowService
from control_plane.services.write_groups import WriteGroups
from engine.language.validation import queue_name_problem
from engine.ports.queue import QueueError
from engine.runtime.tracing import TASK_TYPE
from protocol.queues import MAX_DOMAIN_LENGTH, is_queue_name_part

router = APIRouter(prefix="/api/tasks", tags=["tasks"], route_class=StepwayRoute, responses=COMMON)
NO_TASK: dict[int | str, dict[str, Any]] = {204: {"description": "No task to hand out"}}

Caller = Annotated[Principal, Depends(principal)]

#: how long update-v2 waits for the next task (Conductor's ExecutionService polls one
#: task with a 100 ms timeout there)
UPDATE_V2_POLL_MS = 100

#: how often a held poll asks whether its client is still there
_GONE_CHECK_SECONDS = 0.05

# The dependencies are coroutines: a sync one costs each request a hop to the thread
# pool and back. The hot routes (poll, batch poll, update, update-v2) read their
# services and the caller's traceparent from the app and the request themselves: each
# dependency costs every request its resolution (bench/profile_handoffs.py).
# control_plane/api/fast_path.py calls these four route functions itself, in front of
# the framework, with the arguments FastAPI would give them; building the app fails
# when one of them takes a parameter it does not resolve (a header, another dependency).


async def _service(request: Request) -> TaskService:
    service: TaskService = request.app.state.task_service
    return service


async def _handout(request: Request) -> TaskHandout:
    handout: TaskHandout = request.app.state.task_handout
    return handout


async def _results(request: Request) -> TaskResults:
    results: TaskResults = request.app.state.task_results
    return results


Service = Annotated[TaskService, Depends(_service)]
Handout = Annotated[TaskHandout, Depends(_handout)]
Results = Annotated[TaskResults, Depends(_results)]


async def _poll(
    request: Request,
    service: TaskHandout,
    caller: Principal,
    task_type: str,
    worker_id: str | None,
    domain: str | None,
    count: int,
    timeout: int,
) -> list[dict[str, Any]]:
    require_worker(caller, task_type)
    settings = service.settings
    if count > settings.max_poll_count:
        raise bad_request(f"count must be at most {settings.max_poll_count}", "count")
    if timeout > settings.max_poll_timeout_ms:
        raise bad_request(f"timeout must be at most {settings.max_poll_timeout_ms} ms", "timeout")
    holder = caller.subject or worker_id or caller.name

    # The first ask takes the request's own (empty) body message off the connection, so
    # that later asks see a disconnect; here on the event loop it costs no hop.
    if await request.is_disconnected():
        return []

    def poll(
        wait_ms: int, receiver_gone: Callable[[], bool]
    ) -> tuple[list[dict[str, Any]], str | None]:
        tasks = service.poll(
            task_type,
            worker_id or caller.name,
            domain or None,
            count,
            wait_ms,
            holder=holder,
            receiver_gone=receiver_gone,
        )
        return tasks, holder

    return await _handed_out(request, service, poll, timeout)


#: a poll: (how long it may wait in ms, receiver_gone) -> the tasks it handed out and
#: their lease holder (None: there is nothing to wait for)
_Poll = Callable[[int, Callable[[], bool]], tuple[list[dict[str, Any]], str | None]]


def _never_gone() -> bool:
    return False


async def _handed_out(
    request: Request, service: TaskHandout, poll: _Poll, timeout_ms: int
) -> list[dict[str, Any]]:
    """Run ``poll``, waiting up to ``timeout_ms`` for tasks; the tasks, or none when the
    client went away meanwhile (they are given back).

    On local adapters (``Deps.local_adapters``) the poll first runs here on the event
    loop without waiting: handing out a task that is there costs no hop to a thread
    and back (half of a hand-off's server CPU under load, bench/profile_handoffs.py),
    and its writes share their transactions with those of the other requests of this
    turn of the loop (control_plane/services/write_groups.py). Only a poll that has to
    wait goes to a poll thread, in one hop, where it asks ``receiver_gone`` while it
    waits."""
    if service.deps.local_adapters:
        groups: WriteGroups = request.app.state.write_groups
        tasks, holder = await groups.run(functools.partial(poll, 0, _never_gone))
        if tasks or holder is None or timeout_ms <= 0:
            # not asked whether the client went away: the poll ran at once, without
            # giving the loop a turn to take note of a disconnect, so only a client
            # gone before the request was read would be missed, whose task then waits
            # out its response timeout as a task whose worker died does (asking costs
            # 5-7 % of a hand-off's server CPU: bench/profile_handoffs.py)
            return tasks
    checked = time.monotonic()
    gone = False

    def receiver_gone() -> bool:  # asked from the poll's thread
        # Asking costs a round trip to the event loop: ask at most every
        # _GONE_CHECK_SECONDS (a client that asked a moment ago is there; one that left
        # meanwhile gets its tasks given back below)
        nonlocal checked, gone
        now = time.monotonic()
        if not gone and now - checked >= _GONE_CHECK_SECONDS:
            checked = now
            gone = anyio.from_thread.run(request.is_disconnected)
        return gone

    tasks, holder = await anyio.to_thread.run_sync(
        poll, timeout_ms, receiver_gone, limiter=request.app.state.poll_limiter
    )
    return await _delivered(request, service, tasks, holder)


async def _delivered(
    request: Request, service: TaskHandout, tasks: list[dict[str, Any]], holder: str | None
) -> list[dict[str, Any]]:
    """``tasks``, unless their client went away: then they go back to their queue now
    rather than waiting out their response timeout leased to a client that is gone."""
    if tasks and holder is not None and await request.is_disconnected():
        await anyio.to_thread.run_sync(service.give_back, tasks, holder)
        return []
    return tasks


@router.get(
    "/poll/batch/{tasktype}",
    summary="Long-poll up to `count` tasks of a type",
    response_model=list[dict[str, Any]],
    responses=errors(404, 502, 503),
)
async def batch_poll(
    request: Request,
    caller: Caller,
    tasktype: str,
    workerid: str | None = None,
    domain: str | None = None,
    count: Annotated[int, Query(ge=1, le=100)] = 1,
    timeout: Annotated[int, Query(ge=0, le=5000, description="milliseconds")] = 100,
) -> Response:
    # the tasks are JSON already: answered as they are, not validated against the model
    handout: TaskHandout = request.app.state.task_handout
    tasks = await _poll(request, handout, caller, tasktype, workerid, domain, count, timeout)
    return JSONResponse(tasks)


@router.get(
    "/poll/{tasktype}",
    summary="Poll one task of a type (204 when none)",
    responses={**NO_TASK, **errors(404, 502, 503)},
)
async def poll(
    request: Request,
    caller: Caller,
    tasktype: str,
    workerid: str | None = None,
    domain: str | None = None,
) -> Response:
    handout: TaskHandout = request.app.state.task_handout
    tasks = await _poll(request, handout, caller, tasktype, workerid, domain, 1, 100)
    if not tasks:
        return Response(status_code=204)
    return JSONResponse(tasks[0])


def _update(
    results: TaskResults, caller: Principal, result: TaskResultIn, trace: str | None
) -> UpdateOutcome:
    """Accept a result, as a span in the run's trace (the SDK's ``traceparent``)."""
    with result_span(results.deps.tracer_provider, result, trace) as current:
        outcome = results.update(result, caller)
        current.set_attribute(TASK_TYPE, outcome.task_type)
        return outcome


async def _accepted(
    request: Request,
    results: TaskResults,
    caller: Principal,
    result: TaskResultIn,
    trace: str | None,
) -> tuple[UpdateOutcome, Callable[[], None] | None]:
    """:func:`_update` from the event loop; the outcome, and what is left of it to do in
    a write group (``TaskResults.after_signal``: the message settled), if anything.

    On local adapters (``Deps.local_adapters``) the result is checked and recorded here,
    in a write group (control_plane/services/write_groups.py), and only its event goes
    to a thread when raising it is a round trip to another process
    (``RunSignals.round_trips``: the durable backend, which answers in milliseconds when
    busy), during which the loop would serve no other request. Else the whole update
    runs in a thread."""
    if not results.deps.local_adapters:
        return await anyio.to_thread.run_sync(_update, results, caller, result, trace), None
    groups: WriteGroups = request.app.state.write_groups
    with result_span(results.deps.tracer_provider, result, trace) as current:
        outcome, signal = await groups.run(functools.partial(results.accept, result, caller))
        current.set_attribute(TASK_TYPE, outcome.task_type)
        if signal is None:
            return outcome, None
        if results.deps.signals.round_trips:
            signalled = await anyio.to_thread.run_sync(results.raise_signal, signal)
        else:
            signalled = results.raise_signal(signal)
    return outcome, functools.partial(results.after_signal, signal, signalled)


@router.post(
    "",
    response_class=PlainTextResponse,
    response_model=str,
    summary="Post a task result",
    responses=errors(404, 409, 413, 501, 503),
)
async def update_task(request: Request, caller: Caller, result: TaskResultIn) -> Response:
    results: TaskResults = request.app.state.task_results
    trace = request.headers.get("traceparent")
    outcome, settle = await _accepted(request, results, caller, result, trace)
    if settle is not None:
        groups: WriteGroups = request.app.state.write_groups
        await groups.run(settle)
    # the task id is text already: answered as it is, not validated against the model
    return PlainTextResponse(outcome.task_id)


@router.post(
    "/update-v2",
    summary="Post a task result; returns the next task of the same type for this worker, or 204",
    responses={**NO_TASK, **errors(404, 409, 413, 501, 502, 503)},
)
async def update_task_v2(request: Request, caller: Caller, result: TaskResultIn) -> Response:
    """As Conductor's ``updateTaskV2``: the result is accepted, then one task of the
    updated task's type and domain is polled for the worker, waiting up to
    ``UPDATE_V2_POLL_MS``. A caller that does not serve the type, or a type without a
    task definition where they are required, gets 204. With network adapters both
    happen in one hop to a poll thread; on local adapters the result and the next
    task's hand-out each join a write group on the event loop (``_accepted``,
    ``_handed_out``), and only a wait for a task goes to a poll thread. A task handed
    out to a client that went away meanwhile is given back, as by a poll."""
    results: TaskResults = request.app.state.task_results
    handout: TaskHandout = request.app.state.task_handout
    trace = request.headers.get("traceparent")

    # the next poll's task type, domain, worker id and lease holder, or None when the
    # caller gets no next task: set by the update, which runs once
    after: tuple[str, str | None, str, str] | None = None
    updated = False
    # what is left of the update (its message settled): done with the first poll
    settle: Callable[[], None] | None = None

    def next_poll(outcome: UpdateOutcome) -> tuple[str, str | None, str, str] | None:
        worker_id = outcome.worker_id or result.worker_id or caller.name
        if caller.serves(outcome.task_type) and not (
            handout.settings.strict_task_definitions
            and handout.taskdefs.get(outcome.task_type) is None
        ):
            return (outcome.task_type, outcome.domain, worker_id, caller.subject or worker_id)
        return None

    if results.deps.local_adapters:  # the update first, its event in a thread
        outcome, settle = await _accepted(request, results, caller, result, trace)
        after = next_poll(outcome)
        updated = True

    def update_then_poll(
        wait_ms: int, receiver_gone: Callable[[], bool]
    ) -> tuple[list[dict[str, Any]], str | None]:
        nonlocal after, updated, settle
        if settle is not None:  # in the first poll's write group
            settle_now, settle = settle, None
            settle_now()
        if not updated:  # in the poll's thread: one hop for both
            after = next_poll(_update(results, caller, result, trace))
            updated = True
        if after is None:
            return [], None
        task_type, domain, worker_id, holder = after
        tasks = handout.poll(
            task_type, worker_id, domain, 1, wait_ms, holder=holder, receiver_gone=receiver_gone
        )
        return tasks, holder

    tasks = await _handed_out(request, handout, update_then_poll, UPDATE_V2_POLL_MS)
    if not tasks:
        return Response(status_code=204)
    return JSONResponse(tasks[0])


@router.get("/queue/polldata", summary="Last poll per worker of a task type")
def poll_data(service: Service, caller: Caller, taskType: str) -> list[dict[str, Any]]:
    require_role(caller, "reader")
    return [_poll_json(p) for p in service.deps.run_store.get_poll_data(taskType)]


@router.get("/queue/polldata/all", summary="Last poll per worker of every task type")
def all_poll_data(service: Service, caller: Caller) -> list[dict[str, Any]]:
    require_role(caller, "reader")
    return [_poll_json(p) for p in service.deps.run_store.get_all_poll_data()]


def _poll_json(p: Any) -> dict[str, Any]:
    return {
        "queueName": p.task_type,
        "domain": p.domain,
        "workerId": p.worker_id,
        "lastPollTime": p.last_poll_time,
    }


@router.get("/queue/sizes", summary="Pending tasks per type (all of a type's queues)")
def queue_sizes(
    handout: Handout,
    caller: Caller,
    taskType: Annotated[
        list[str], Query(default_factory=list, description="task types; none: all registered")
    ],
) -> dict[str, int]:
    require_role(caller, "reader")
    for name in taskType or []:
        problem = queue_name_problem(name)
        if problem is not None:
            raise bad_request(problem, "taskType")
    types = taskType or [r.name for r in handout.deps.run_store.list_task_defs()]
    return handout.queue_sizes(types)


@router.get("/queue/size", summary="Pending tasks of a type (of a domain, when given)")
def queue_size(handout: Handout, caller: Caller, taskType: str, domain: str | None = None) -> int:
    require_role(caller, "reader")
    problem = queue_name_problem(taskType)
    if problem is not None:
        raise bad_request(problem, "taskType")
    if domain and (len(domain) > MAX_DOMAIN_LENGTH or not is_queue_name_part(domain)):
        raise bad_request(
            f"domain {domain[:MAX_DOMAIN_LENGTH]!r} is not a valid queue name prefix", "domain"
        )
    if not domain:
        return handout.queue_sizes([taskType]).get(taskType, 0)
    try:
        depth = handout.deps.queue.depth(f"{domain}-{taskType}")
    except QueueError:
        return 0
    return depth.active + depth.scheduled


@router.get(
    "/external-storage-location",
    summary="Signed URL to read or write a payload",
    responses=errors(501),
)
@router.get("/externalstoragelocation", include_in_schema=False)
def external_storage_location(
    service: Service,
    caller: Caller,
    operation: str,
    payloadType: str,
    path: str | None = None,
    taskType: str | None = None,
) -> dict[str, str]:
    return service.storage_location(path, operation, payloadType, taskType, caller)


def _decided(request: Request, workflow_id: str) -> None:
    """Wait until a run started a moment ago shows its first decision (a task update by
    reference right after the start finds its task, as in Conductor); a run that does
    not exist is left to the update to report."""
    workflows: WorkflowService = request.app.state.workflow_service
    with contextlib.suppress(ApiError):
        workflows.run(workflow_id)


def _signal(
    request: Request,
    results: TaskResults,
    caller: Principal,
    workflow_id: str,
    status: str,
    output: dict[str, Any],
) -> str | None:
    """Complete (or fail) the WAIT task the run (or a running sub-workflow of it) is
    blocked on; its task id, None when nothing waits. ``status`` is a plain string in
    the path (a wrong one is a 400 naming it, not a route that does not match)."""
    if status not in get_args(ResultStatus):
        raise bad_request(
            f"status {status[:40]!r} is not one of {', '.join(get_args(ResultStatus))}",
            "status",
        )
    workflows: WorkflowService = request.app.state.workflow_service
    workflows.run(workflow_id)  # 404, or the run once its first decision is visible
    row = workflows.waits.blocked_wait_task(workflow_id)
    if row is None:
        return None
    results.update(
        TaskResultIn(
            workflow_instance_id=row.workflow_id,
            task_id=row.task_id,
            status=cast(ResultStatus, status),
            output_data=output,
        ),
        caller,
    )
    return row.task_id


# before /{workflowId}/{taskRefName}/{status}, which has as many path segments
@router.post(
    "/{workflowId}/{status}/signal",
    summary="Complete the WAIT task the run is blocked on (body = output), asynchronously",
    responses=errors(404, 409, 413, 501, 503),
)
def signal_async(
    request: Request,
    results: Results,
    caller: Caller,
    workflowId: str,
    status: str,
    output: Annotated[dict[str, Any], Body()],
) -> None:
    _signal(request, results, caller, workflowId, status, output)


@router.post(
    "/{workflowId}/{status}/signal/sync",
    summary="Complete the WAIT task the run is blocked on, then wait until it ends or blocks",
    responses=errors(404, 409, 413, 501, 503),
)
def signal_sync(
    request: Request,
    results: Results,
    caller: Caller,
    workflowId: str,
    status: str,
    output: Annotated[dict[str, Any], Body()],
    returnStrategy: ReturnStrategy = ReturnStrategy.TARGET_WORKFLOW,
    timeoutMillis: Annotated[int, Query(ge=0, le=600_000)] = 5000,
) -> Any:
    if _signal(request, results, caller, workflowId, status, output) is None:
        raise not_found(f"Found no blocked task in workflow {workflowId} to signal")
    workflows: WorkflowService = request.app.state.workflow_service
    return workflows.waits.await_response(
        workflowId, [], returnStrategy, None, timeoutMillis / 1000
    )


@router.post(
    "/{workflowId}/{taskRefName}/{status}",
    response_class=PlainTextResponse,
    summary="Complete or fail a task by reference name (HUMAN tasks; body = output)",
    responses=errors(404, 409, 413, 501, 503),
)
def update_by_ref(
    request: Request,
    results: Results,
    caller: Caller,
    workflowId: str,
    taskRefName: str,
    status: ResultStatus,
    output: Annotated[dict[str, Any], Body()],
    workerid: str | None = None,
) -> str:
    _decided(request, workflowId)
    return results.update_by_ref(workflowId, taskRefName, status, output, workerid, caller)


@router.post(
    "/{workflowId}/{taskRefName}/{status}/sync",
    summary="Complete or fail a task by reference name, then answer with the run",
    responses=errors(404, 409, 413, 501, 503),
)
def update_by_ref_sync(
    request: Request,
    results: Results,
    caller: Caller,
    workflowId: str,
    taskRefName: str,
    status: ResultStatus,
    output: Annotated[dict[str, Any], Body()],
    workerid: str | None = None,
) -> Any:
    _decided(request, workflowId)
    task_id = results.update_by_ref(
        workflowId, taskRefName, status, output, workerid, caller, pending_only=True
    )
    workflows: WorkflowService = request.app.state.workflow_service
    if status != "IN_PROGRESS":
        # answer once the run shows the result (Conductor decides before it answers)
        workflows.settle(
            workflowId,
            lambda run, tasks: (
                run.status.is_terminal
                or any(t.task_id == task_id and t.status.is_terminal for t in tasks)
            ),
        )
    return workflows.get(workflowId, True)


@router.post("/{taskId}/log", summary="Append a log line to a task", responses=errors(404, 413))
async def add_log(request: Request, service: Service, caller: Caller, taskId: str) -> Response:
    raw = await request.body()
    text = raw.decode("utf-8", errors="replace")
    if "json" in request.headers.get("content-type", ""):
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        text = value if isinstance(value, str) else json.dumps(value)
    await anyio.to_thread.run_sync(service.add_log, taskId, text, caller)
    return Response(status_code=200)


@router.get("/{taskId}/log", summary="Log lines of a task", responses=errors(404))
def get_logs(service: Service, caller: Caller, taskId: str) -> list[dict[str, Any]]:
    service.check_worker(taskId, caller) if not caller.can_read() else None
    return [
        {"taskId": entry.task_id, "log": entry.log, "createdTime": entry.created_time}
        for entry in service.logs(taskId)
    ]


@router.get("/{taskId}", summary="A task by id", responses=errors(404))
def get_task(service: Service, caller: Caller, taskId: str) -> dict[str, Any]:
    task = service.get_task(taskId, caller)
    if task is None:
        raise not_found(f"Task not found for taskId: {taskId}")
    return task
