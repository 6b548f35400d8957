"""Built-in task types through the interpreter, over the real gRPC backend and real local
HTTP servers on 127.0.0.1: HTTP (success, retries with the task definition's policy and
Retry-After, terminal failures, read timeouts, large bodies offloaded), CALL_TOOL,
LOGIC_APP (synchronous and the asynchronous 202 + Location pattern polled on durable
timers), DOCUMENT_INTELLIGENCE through the real SDK against the fake service, INLINE and
JSON_JQ_TRANSFORM, and a run that mixes them with a WORKER task.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from durabletask import history

from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.builtins import ActivityDeps, OutboundSettings
from engine.runtime.builtins.testing import FakeDocumentIntelligence, LocalServer, Reply, Request

ACTION_SCOPE = "api://stepway-actions/.default"
LOGIC_SCOPE = "https://logic.azure.com/.default"


def fake_token(scope: str) -> str:
    return f"token-for:{scope}"


@dataclass
class Scripted:
    """A local server whose answers per path are scripted: each request to a path takes the
    next reply of its list (the last one repeats). Request times are recorded per path."""

    routes: dict[str, list[Reply]]
    times: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, list[Request]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    server: LocalServer = field(init=False)

    def __post_init__(self) -> None:
        self.server = LocalServer(self._handle)

    def _handle(self, request: Request) -> Reply:
        with self._lock:
            self.times.setdefault(request.path, []).append(time.monotonic())
            self.seen.setdefault(request.path, []).append(request)
            script = self.routes.get(request.path)
            if not script:
                return Reply(404, {"error": f"no route {request.path}"})
            return script.pop(0) if len(script) > 1 else script[0]

    @property
    def url(self) -> str:
        return self.server.url

    def count(self, path: str) -> int:
        return len(self.times.get(path, []))

    def gaps(self, path: str) -> list[float]:
        t = self.times.get(path, [])
        return [b - a for a, b in itertools.pairwise(t)]


@pytest.fixture
def servers() -> Iterator[Callable[[dict[str, list[Reply]]], Scripted]]:
    made: list[Scripted] = []

    def make(routes: dict[str, list[Reply]]) -> Scripted:
        server = Scripted(routes)
        made.append(server)
        return server

    yield make
    for server in made:
        server.server.close()


@pytest.fixture
def action_service() -> Iterator[LocalServer]:
    """A local action service: ``POST /tools/{tool}``."""

    def handle(request: Request) -> Reply:
        tool = request.path.removeprefix("/tools/")
        data = request.json() or {}
        if tool == "classify_invoice":
            total = sum(float(line["amount"]) for line in data.get("lines", []))
            return Reply(200, {"class": "large" if total > 100 else "small", "total": total})
        if tool == "count":
            return Reply(200, [1, 2, 3])  # not an object: wrapped as {"result": ...}
        if tool == "export":
            return Reply(200, {"rows": ["r" * 50] * 100})  # ~5 KB: offloaded
        if tool == "overloaded":
            return Reply(503, {"message": "busy"}, {"Retry-After": "1"})
        return Reply(404, {"error": f"unknown tool {tool}"})

    with LocalServer(handle) as server:
        yield server


@pytest.fixture
def fake_di() -> Iterator[FakeDocumentIntelligence]:
    with FakeDocumentIntelligence(running_polls=2) as service:
        yield service


@pytest.fixture
def builtin_platform(
    platform: Any, action_service: LocalServer, fake_di: FakeDocumentIntelligence
) -> Any:
    """The e2e ``platform`` whose built-in activities get our own ActivityDeps: the local
    action service, a fake token provider, the fake Document Intelligence endpoint, the
    platform's payload store (documentRef inputs), short polls. Outputs are offloaded by
    the engine at the platform's task-output threshold (10 KB), not by the activities.
    INLINE and JSON_JQ_TRANSFORM keep the platform's evaluator processes."""
    platform.services.activity_deps = ActivityDeps(
        evaluators=platform.services.activity_deps.evaluators,
        payload_store=platform.services.payloads,
        action_service_url=action_service.url,
        action_service_scope=ACTION_SCOPE,
        token_provider=fake_token,
        # the Logic Apps trigger is the loopback test server here
        token_hosts={LOGIC_SCOPE: ("127.0.0.1",)},
        outbound=OutboundSettings(connect_timeout_seconds=2, read_timeout_seconds=10),
        document_intelligence_endpoint=fake_di.endpoint,
        logic_app_default_poll_seconds=1,
        document_intelligence_default_poll_seconds=1,
    )
    return platform


def http_task(ref: str, uri: str, **request: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": uri, "method": "GET", **request}},
    }


def one_task_workflow(platform: Any, name: str, task: dict[str, Any]) -> None:
    platform.register({"name": name, "tasks": [task]})


def history_events(platform: Any, workflow_id: str) -> list[Any]:
    return list(platform.client.get_orchestration_history(workflow_id))


def scheduled_activities(events: list[Any], name: str) -> int:
    return sum(1 for e in events if isinstance(e, history.TaskScheduledEvent) and e.name == name)


def timers_created(events: list[Any]) -> int:
    return sum(1 for e in events if isinstance(e, history.TimerCreatedEvent))


# -- HTTP --------------------------------------------------------------------------------


def test_http_success_body_is_referenced_by_later_tasks(
    builtin_platform: Any, servers: Any
) -> None:
    platform = builtin_platform
    api = servers(
        {
            "/customers/42": [
                Reply(200, {"id": 42, "name": "Ada", "orders": [{"sku": "A-1", "qty": 3}]})
            ],
            "/orders": [Reply(201, {"accepted": True, "orderId": "o-9"})],
        }
    )
    platform.register(
        {
            "name": "http_chain",
            "tasks": [
                http_task(
                    "customer",
                    api.url + "/customers/${workflow.input.id}",
                    headers={"X-Trace": "t-1"},
                    auth={"type": "managed_identity", "scope": LOGIC_SCOPE},
                ),
                http_task(
                    "order",
                    api.url + "/orders",
                    method="POST",
                    body={
                        "customer": "${customer.output.response.body.name}",
                        "sku": "${customer.output.response.body.orders[0].sku}",
                        "qty": "${customer.output.response.body.orders[0].qty}",
                    },
                ),
            ],
            "outputParameters": {
                "status": "${order.output.response.statusCode}",
                "orderId": "${order.output.response.body.orderId}",
                "name": "${customer.output.response.body.name}",
            },
        }
    )
    workflow_id = platform.start("http_chain", {"id": 42})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"status": 201, "orderId": "o-9", "name": "Ada"}

    get = api.seen["/customers/42"][0]
    assert get.method == "GET"
    assert get.header("X-Trace") == "t-1"
    assert get.header("Authorization") == f"Bearer token-for:{LOGIC_SCOPE}"
    post = api.seen["/orders"][0]
    assert post.method == "POST"
    assert post.json() == {"customer": "Ada", "sku": "A-1", "qty": 3}
    assert post.header("Authorization") is None

    rows = platform.tasks(workflow_id)
    assert rows["customer"].status == TaskStatus.COMPLETED
    assert rows["customer"].task_type == "HTTP"
    assert rows["customer"].attempt == 1
    assert rows["customer"].output_data["response"]["body"]["orders"] == [{"sku": "A-1", "qty": 3}]
    assert rows["order"].output_data["response"]["statusCode"] == 201


def test_http_retry_policy_from_the_task_definition_and_retry_after(
    builtin_platform: Any, servers: Any
) -> None:
    platform = builtin_platform
    api = servers(
        {
            "/flaky": [Reply(503, {"error": "warming up"}), Reply(200, {"ok": 1})],
            # Retry-After (2 s) is larger than the retry delay (1 s): it wins
            "/throttled": [
                Reply(503, {"error": "slow down"}, {"Retry-After": "2"}),
                Reply(200, {"ok": 2}),
            ],
        }
    )
    platform.register_task_def({"name": "flaky", "retryCount": 2, "retryDelaySeconds": 1})
    platform.register_task_def({"name": "throttled", "retryCount": 2, "retryDelaySeconds": 1})
    one_task_workflow(platform, "flaky_wf", http_task("flaky", api.url + "/flaky"))
    one_task_workflow(platform, "throttled_wf", http_task("throttled", api.url + "/throttled"))

    flaky_id = platform.start("flaky_wf")
    throttled_id = platform.start("throttled_wf")
    flaky = platform.wait(flaky_id)
    throttled = platform.wait(throttled_id)

    assert flaky.status == RunStatus.COMPLETED, flaky.reason_for_incompletion
    assert flaky.output == {"response": flaky.output["response"]}
    assert flaky.output["response"]["body"] == {"ok": 1}
    row = platform.tasks(flaky_id)["flaky"]
    assert (row.status, row.attempt, row.retry_count) == (TaskStatus.COMPLETED, 2, 1)
    assert api.count("/flaky") == 2
    (gap,) = api.gaps("/flaky")
    assert 0.9 <= gap < 2.5, gap  # the 1 s retry delay, on a durable timer

    assert throttled.status == RunStatus.COMPLETED, throttled.reason_for_incompletion
    assert platform.tasks(throttled_id)["throttled"].attempt == 2
    (gap,) = api.gaps("/throttled")
    assert gap >= 1.9, gap  # Retry-After: 2 honoured over the 1 s delay

    for workflow_id in (flaky_id, throttled_id):
        events = history_events(platform, workflow_id)
        # each attempt done in the work item that starts it (the engine hosts the
        # activities too: engine/runtime/interpreter.py, LocalBuiltin), the second after
        # the delay's durable timer
        assert scheduled_activities(events, "stepway.builtin") == 0
        assert timers_created(events) >= 1


def test_http_terminal_failure_is_not_retried(builtin_platform: Any, servers: Any) -> None:
    platform = builtin_platform
    api = servers({"/missing": [Reply(404, {"error": "no such thing"})]})
    platform.register_task_def({"name": "lookup", "retryCount": 2, "retryDelaySeconds": 1})
    platform.register(
        {
            "name": "lookup_wf",
            "tasks": [
                http_task("lookup", api.url + "/missing"),
                {
                    "name": "never",
                    "taskReferenceName": "never",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "javascript", "expression": "1"},
                },
            ],
        }
    )
    started = time.monotonic()
    workflow_id = platform.start("lookup_wf")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.FAILED
    assert "404" in (run.reason_for_incompletion or ""), run.reason_for_incompletion
    assert run.failed_reference_task_names == ["lookup"]
    assert api.count("/missing") == 1
    assert time.monotonic() - started < 5
    rows = platform.tasks(workflow_id)
    row = rows["lookup"]
    assert row.status == TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert row.attempt == 1
    assert "404" in (row.reason_for_incompletion or "")
    # the response is kept in the failed task's output
    assert row.output_data["response"]["statusCode"] == 404
    assert row.output_data["response"]["body"] == {"error": "no such thing"}
    assert "never" not in rows


def test_http_read_timeout_is_retried_then_fails(builtin_platform: Any, servers: Any) -> None:
    platform = builtin_platform
    api = servers(
        {
            # first attempt too slow, second in time
            "/slow-once": [Reply(200, {"late": True}, delay_seconds=2), Reply(200, {"n": 2})],
            "/always-slow": [Reply(200, {"late": True}, delay_seconds=2)],
        }
    )
    for name in ("slow_once", "always_slow"):
        platform.register_task_def({"name": name, "retryCount": 1, "retryDelaySeconds": 0})
    one_task_workflow(
        platform, "slow_once_wf", http_task("slow_once", api.url + "/slow-once", readTimeOut=300)
    )
    one_task_workflow(
        platform,
        "always_slow_wf",
        http_task("always_slow", api.url + "/always-slow", readTimeOut=300),
    )
    once_id = platform.start("slow_once_wf")
    always_id = platform.start("always_slow_wf")
    once = platform.wait(once_id)
    always = platform.wait(always_id)

    assert once.status == RunStatus.COMPLETED, once.reason_for_incompletion
    assert once.output["response"]["body"] == {"n": 2}
    assert platform.tasks(once_id)["slow_once"].attempt == 2

    assert always.status == RunStatus.FAILED
    row = platform.tasks(always_id)["always_slow"]
    assert (row.status, row.attempt) == (TaskStatus.FAILED, 2)
    assert "timeout" in (row.reason_for_incompletion or "").lower(), row.reason_for_incompletion
    assert api.count("/always-slow") == 2


def test_large_http_response_is_offloaded_to_the_payload_store(
    builtin_platform: Any, servers: Any
) -> None:
    platform = builtin_platform
    big = {"rows": [{"i": i, "text": f"row-{i}-" + "x" * 40} for i in range(400)]}
    raw = json.dumps(big).encode()  # ~24 KB, above the 10 KB task output threshold
    api = servers({"/export": [Reply(200, raw, {"Content-Type": "application/json"})]})
    platform.register(
        {
            "name": "export_wf",
            "tasks": [
                http_task("export", api.url + "/export"),
                {
                    "name": "keep",
                    "taskReferenceName": "keep",
                    "type": "SET_VARIABLE",
                    "inputParameters": {
                        "first": "${export.output.response.body.rows[0].text}",
                        "status": "${export.output.response.statusCode}",
                    },
                },
            ],
        }
    )
    workflow_id = platform.start("export_wf")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    # expressions see the body as if it were inline
    assert run.variables == {"first": "row-0-" + "x" * 40, "status": 200}
    # the row, the history and the step's result kept for replays (the step was done in
    # the work item that started it: engine/runtime/interpreter.py, LocalBuiltin) hold
    # only the reference
    row = platform.tasks(workflow_id)["export"]
    assert row.output_data is None and row.output_ref
    assert workflow_id in row.output_ref  # keyed under the run
    stored = json.loads(platform.services.payloads.get(row.output_ref))
    assert stored["response"]["body"] == big
    history = str(platform.client.get_orchestration_history(workflow_id))
    assert "row-399-" not in history
    kept = platform.services.run_store.get_step_result(workflow_id, row.task_id, row.attempt)
    assert kept is not None and kept.result["output"] == {"outputRef": row.output_ref}


# -- CALL_TOOL ---------------------------------------------------------------------------


def test_call_tool_against_the_action_service(
    builtin_platform: Any, action_service: LocalServer
) -> None:
    platform = builtin_platform
    platform.register(
        {
            "name": "tools_wf",
            "tasks": [
                {
                    "name": "classify",
                    "taskReferenceName": "classify",
                    "type": "CALL_TOOL",
                    "inputParameters": {
                        "tool": "classify_invoice",
                        "input": {"lines": "${workflow.input.lines}"},
                    },
                },
                {
                    "name": "count",
                    "taskReferenceName": "count",
                    "type": "CALL_TOOL",
                    "inputParameters": {"tool": "count"},
                },
                {
                    "name": "export",
                    "taskReferenceName": "export",
                    "type": "CALL_TOOL",
                    "inputParameters": {"tool": "export"},
                },
            ],
            "outputParameters": {
                "class": "${classify.output.class}",
                "total": "${classify.output.total}",
                "count": "${count.output.result}",
                "firstRow": "${export.output.rows[0]}",
            },
        }
    )
    workflow_id = platform.start("tools_wf", {"lines": [{"amount": 80}, {"amount": 30.5}]})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {
        "class": "large",
        "total": 110.5,
        "count": [1, 2, 3],
        "firstRow": "r" * 50,
    }
    assert platform.tasks(workflow_id)["export"].output_data == {"rows": ["r" * 50] * 100}
    calls = [r for r in action_service.requests if r.path == "/tools/classify_invoice"]
    assert len(calls) == 1
    assert calls[0].method == "POST"
    assert calls[0].json() == {"lines": [{"amount": 80}, {"amount": 30.5}]}
    assert calls[0].header("Authorization") == f"Bearer token-for:{ACTION_SCOPE}"

    # an unknown tool is a terminal failure naming the status
    one_task_workflow(
        platform,
        "tools_missing",
        {
            "name": "nope",
            "taskReferenceName": "nope",
            "type": "CALL_TOOL",
            "inputParameters": {"tool": "no_such_tool", "input": {}},
        },
    )
    failed = platform.wait(platform.start("tools_missing"))
    assert failed.status == RunStatus.FAILED
    assert "404" in (failed.reason_for_incompletion or "")


# -- LOGIC_APP ---------------------------------------------------------------------------


def test_logic_app_synchronous(builtin_platform: Any, servers: Any) -> None:
    platform = builtin_platform
    app = servers({"/workflows/sync/invoke": [Reply(200, {"approved": True, "by": "flow"})]})
    platform.register(
        {
            "name": "la_sync",
            "tasks": [
                {
                    "name": "flow",
                    "taskReferenceName": "flow",
                    "type": "LOGIC_APP",
                    "inputParameters": {
                        "url": app.url + "/workflows/sync/invoke?api-version=1&sig=secret",
                        "body": {"invoice": "${workflow.input.invoice}"},
                    },
                }
            ],
            "outputParameters": {"approved": "${flow.output.response.body.approved}"},
        }
    )
    workflow_id = platform.start("la_sync", {"invoice": "INV-1"})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"approved": True}
    (trigger,) = app.seen["/workflows/sync/invoke"]
    assert trigger.method == "POST"
    assert trigger.query["sig"] == ["secret"]
    assert trigger.json() == {"invoice": "INV-1"}
    events = history_events(platform, workflow_id)
    assert scheduled_activities(events, "stepway.builtin") == 1
    assert scheduled_activities(events, "stepway.poll") == 0


def test_logic_app_asynchronous_is_polled_on_durable_timers(
    builtin_platform: Any, servers: Any
) -> None:
    platform = builtin_platform
    app = servers(
        {
            "/workflows/async/invoke": [
                Reply(202, None, {"Location": "/runs/r1/status", "Retry-After": "1"})
            ],
            "/runs/r1/status": [
                Reply(202, None, {"Retry-After": "1"}),
                Reply(202, None, {"Retry-After": "1"}),
                Reply(200, {"result": "done", "items": 3}),
            ],
        }
    )
    platform.register(
        {
            "name": "la_async",
            "tasks": [
                {
                    "name": "flow",
                    "taskReferenceName": "flow",
                    "type": "LOGIC_APP",
                    "inputParameters": {
                        "url": app.url + "/workflows/async/invoke?sig=s",
                        "body": {"go": True},
                        "auth": {"type": "managed_identity", "scope": LOGIC_SCOPE},
                    },
                },
                {
                    "name": "after",
                    "taskReferenceName": "after",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "$.r + ':' + $.n",
                        "r": "${flow.output.response.body.result}",
                        "n": "${flow.output.response.body.items}",
                    },
                },
            ],
            "outputParameters": {"summary": "${after.output.result}"},
        }
    )
    workflow_id = platform.start("la_async")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"summary": "done:3"}
    assert app.count("/workflows/async/invoke") == 1
    polls = app.count("/runs/r1/status")
    assert polls == 3
    # Retry-After: 1 between the trigger and each poll
    trigger_at = app.times["/workflows/async/invoke"][0]
    poll_times = app.times["/runs/r1/status"]
    waits = [poll_times[0] - trigger_at, *app.gaps("/runs/r1/status")]
    assert all(w >= 0.9 for w in waits), waits
    # the auth setting follows the location on the trigger's origin
    for request in app.seen["/runs/r1/status"]:
        assert request.method == "GET"
        assert request.header("Authorization") == f"Bearer token-for:{LOGIC_SCOPE}"
    # polling happens in the orchestration: one start activity, one poll activity per
    # poll, each after its own durable timer (the INLINE is done in the work item of the
    # last poll's completion: engine/runtime/interpreter.py, LocalBuiltin)
    events = history_events(platform, workflow_id)
    assert scheduled_activities(events, "stepway.builtin") == 1
    assert scheduled_activities(events, "stepway.poll") == polls
    assert timers_created(events) >= polls
    row = platform.tasks(workflow_id)["flow"]
    assert (row.status, row.attempt) == (TaskStatus.COMPLETED, 1)


def test_logic_app_that_never_finishes_times_out(builtin_platform: Any, servers: Any) -> None:
    """The orchestration owns the deadline of the polling: the task definition's
    timeoutSeconds ends a Logic App run that answers 202 forever."""
    platform = builtin_platform
    app = servers(
        {
            "/workflows/stuck/invoke": [
                Reply(202, None, {"Location": "/runs/stuck", "Retry-After": "1"})
            ],
            "/runs/stuck": [Reply(202, None, {"Retry-After": "1"})],
        }
    )
    platform.register_task_def(
        {"name": "stuck", "retryCount": 0, "timeoutSeconds": 2, "responseTimeoutSeconds": 1}
    )
    one_task_workflow(
        platform,
        "la_stuck",
        {
            "name": "stuck",
            "taskReferenceName": "stuck",
            "type": "LOGIC_APP",
            "inputParameters": {"url": app.url + "/workflows/stuck/invoke"},
        },
    )
    started = time.monotonic()
    workflow_id = platform.start("la_stuck")
    run = platform.wait(workflow_id, timeout=20)
    assert run.status == RunStatus.TIMED_OUT, run.status  # timeoutPolicy TIME_OUT_WF
    assert run.failed_reference_task_names == ["stuck"]
    assert time.monotonic() - started < 6
    row = platform.tasks(workflow_id)["stuck"]
    assert row.status == TaskStatus.TIMED_OUT, (row.status, row.reason_for_incompletion)
    assert "Task timed out" in (row.reason_for_incompletion or "")
    polls = app.count("/runs/stuck")
    assert 1 <= polls <= 2, polls
    time.sleep(1.5)
    assert app.count("/runs/stuck") == polls  # no poll after the run ended


# -- DOCUMENT_INTELLIGENCE ---------------------------------------------------------------


def test_document_intelligence_long_running_operation(
    builtin_platform: Any, fake_di: FakeDocumentIntelligence
) -> None:
    platform = builtin_platform
    platform.register(
        {
            "name": "di_wf",
            "tasks": [
                {
                    "name": "analyze",
                    "taskReferenceName": "analyze",
                    "type": "DOCUMENT_INTELLIGENCE",
                    "inputParameters": {
                        "modelId": "prebuilt-layout",
                        "url": "${workflow.input.document}",
                        "pages": "1",
                    },
                }
            ],
            "outputParameters": {
                "content": "${analyze.output.content}",
                "model": "${analyze.output.modelId}",
                "pages": "${analyze.output.pages}",
            },
        }
    )
    started = time.monotonic()
    workflow_id = platform.start("di_wf", {"document": "https://example.com/doc.pdf"})
    run = platform.wait(workflow_id)
    elapsed = time.monotonic() - started
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output["content"] == "Hello from the fake service"
    assert run.output["model"] == "prebuilt-layout"

    (analyze,) = [r for r in fake_di.requests if r.method == "POST"]
    assert analyze.path.endswith("prebuilt-layout:analyze")
    assert analyze.json() == {"urlSource": "https://example.com/doc.pdf"}
    assert analyze.query["pages"] == ["1"]
    assert analyze.header("Authorization") == (
        "Bearer token-for:https://cognitiveservices.azure.com/.default"
    )
    polls = [r for r in fake_di.requests if r.method == "GET"]
    assert len(polls) == 3  # running, running, succeeded
    events = history_events(platform, workflow_id)
    assert scheduled_activities(events, "stepway.builtin") == 1
    assert scheduled_activities(events, "stepway.poll") == 3
    assert timers_created(events) >= 3
    # the service said Retry-After: 0, so polling is immediate
    assert elapsed < 5, elapsed


def test_document_intelligence_failed_operation_fails_the_run(
    builtin_platform: Any, fake_di: FakeDocumentIntelligence
) -> None:
    platform = builtin_platform
    fake_di.running_polls = 0
    fake_di.fail_with = {"code": "InvalidContent", "message": "the file is corrupted"}
    one_task_workflow(
        platform,
        "di_fail",
        {
            "name": "analyze",
            "taskReferenceName": "analyze",
            "type": "DOCUMENT_INTELLIGENCE",
            "inputParameters": {"modelId": "prebuilt-read", "url": "https://example.com/x.pdf"},
        },
    )
    run = platform.wait(platform.start("di_fail"))
    assert run.status == RunStatus.FAILED
    assert "InvalidContent" in (run.reason_for_incompletion or "")


# -- INLINE / JSON_JQ_TRANSFORM and a mixed run ------------------------------------------


def test_output_no_store_can_keep_fails_the_task_naming_where(
    builtin_platform: Any, servers: Any
) -> None:
    """An HTTP response or a script's result can hold the NUL character, which
    PostgreSQL's JSONB cannot store: the task fails (not retried: the same call gives
    it again) naming where, on SQLite as on PostgreSQL, instead of an engine error on
    one store only."""
    platform = builtin_platform
    api = servers({"/nul": [Reply(200, {"a": ["ok", "x\u0000y"]})]})
    platform.register_task_def({"name": "fetch", "retryCount": 2, "retryDelaySeconds": 1})
    platform.register({"name": "nul_http", "tasks": [http_task("fetch", api.url + "/nul")]})
    run = platform.wait(platform.start("nul_http"))
    assert run.status == RunStatus.FAILED
    row = platform.tasks(run.workflow_id)["fetch"]
    assert row.status == TaskStatus.FAILED_WITH_TERMINAL_ERROR and row.attempt == 1
    reason = row.reason_for_incompletion or ""
    assert "NUL character" in reason and "$.response.body.a[1]" in reason, reason
    assert api.count("/nul") == 1
    platform.register(
        {
            "name": "nul_js",
            "tasks": [
                {
                    "name": "js",
                    "taskReferenceName": "js",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "'a' + String.fromCharCode(0)",
                    },
                }
            ],
        }
    )
    run = platform.wait(platform.start("nul_js"))
    assert run.status == RunStatus.FAILED
    reason = platform.tasks(run.workflow_id)["js"].reason_for_incompletion or ""
    assert "NUL character" in reason and "$.result" in reason, reason


def test_inline_and_jq_transform(builtin_platform: Any) -> None:
    platform = builtin_platform
    platform.register(
        {
            "name": "pure",
            "tasks": [
                {
                    "name": "js",
                    "taskReferenceName": "js",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": (
                            "(function(){ var t = 0; for (var i = 0; i < $.xs.length; i++)"
                            " { t += $.xs[i]; } return {sum: t, n: $.xs.length}; })()"
                        ),
                        "xs": "${workflow.input.xs}",
                    },
                },
                {
                    "name": "jq",
                    "taskReferenceName": "jq",
                    "type": "JSON_JQ_TRANSFORM",
                    "inputParameters": {
                        "queryExpression": "{ids: [.items[] | select(.ok) | .id], sum: .sum}",
                        "items": "${workflow.input.items}",
                        "sum": "${js.output.result.sum}",
                    },
                },
                {
                    "name": "bad_jq",
                    "taskReferenceName": "bad_jq",
                    "type": "JSON_JQ_TRANSFORM",
                    "optional": True,
                    "inputParameters": {"queryExpression": ".[ nope"},
                },
            ],
            "outputParameters": {
                "js": "${js.output.result}",
                "jq": "${jq.output.result}",
                "list": "${jq.output.resultList}",
            },
        }
    )
    items = [{"id": "a", "ok": True}, {"id": "b", "ok": False}, {"id": "c", "ok": True}]
    workflow_id = platform.start("pure", {"xs": [1, 2, 3.5], "items": items})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output["js"] == {"sum": 6.5, "n": 3}
    assert run.output["jq"] == {"ids": ["a", "c"], "sum": 6.5}
    assert run.output["list"] == [{"ids": ["a", "c"], "sum": 6.5}]
    rows = platform.tasks(workflow_id)
    assert rows["bad_jq"].status == TaskStatus.COMPLETED_WITH_ERRORS
    assert "jq" in (rows["bad_jq"].reason_for_incompletion or "")
    # each was evaluated once, in the work item that reached it (the engine hosts the
    # activities too: engine/runtime/interpreter.py, LocalBuiltin), which kept its result
    # for replays (they read it and never evaluate again: tests/e2e/test_local_builtins.py)
    events = history_events(platform, workflow_id)
    assert scheduled_activities(events, "stepway.builtin") == 0


def test_mixed_builtin_and_worker_tasks(
    builtin_platform: Any, servers: Any, action_service: LocalServer
) -> None:
    platform = builtin_platform
    api = servers({"/invoices/7": [Reply(200, {"lines": [{"amount": 20}, {"amount": 5}]})]})
    app = servers(
        {
            "/approve": [Reply(202, None, {"Location": "/approve/status", "Retry-After": "0"})],
            "/approve/status": [Reply(200, {"approved": True})],
        }
    )
    platform.register_task_def({"name": "enrich", "retryCount": 0, "responseTimeoutSeconds": 30})
    platform.register(
        {
            "name": "mixed",
            "tasks": [
                http_task("fetch", api.url + "/invoices/${workflow.input.id}"),
                {
                    "name": "enrich",
                    "taskReferenceName": "enrich",
                    "type": "WORKER",
                    "inputParameters": {"lines": "${fetch.output.response.body.lines}"},
                },
                {
                    "name": "amounts",
                    "taskReferenceName": "amounts",
                    "type": "JSON_JQ_TRANSFORM",
                    "inputParameters": {
                        "queryExpression": "[.lines[] | {amount: (.amount * .rate)}]",
                        "lines": "${enrich.output.lines}",
                    },
                },
                {
                    "name": "classify",
                    "taskReferenceName": "classify",
                    "type": "CALL_TOOL",
                    "inputParameters": {
                        "tool": "classify_invoice",
                        "input": {"lines": "${amounts.output.result}"},
                    },
                },
                {
                    "name": "route",
                    "taskReferenceName": "route",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "c",
                    "inputParameters": {"c": "${classify.output.class}"},
                    "decisionCases": {
                        "large": [
                            {
                                "name": "approve",
                                "taskReferenceName": "approve",
                                "type": "LOGIC_APP",
                                "inputParameters": {
                                    "url": app.url + "/approve",
                                    "body": {"total": "${classify.output.total}"},
                                },
                            }
                        ]
                    },
                },
                {
                    "name": "summary",
                    "taskReferenceName": "summary",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "$.c + '/' + $.t + '/' + $.a",
                        "c": "${classify.output.class}",
                        "t": "${classify.output.total}",
                        "a": "${approve.output.response.body.approved}",
                    },
                },
            ],
            "outputParameters": {"summary": "${summary.output.result}"},
        }
    )
    workflow_id = platform.start("mixed", {"id": 7})
    body = platform.take("enrich")
    assert body["input"] == {"lines": [{"amount": 20}, {"amount": 5}]}
    platform.complete(body, {"lines": [{"amount": 20, "rate": 4}, {"amount": 5, "rate": 10}]})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"summary": "large/130/true"}
    classify_calls = [r for r in action_service.requests if r.path == "/tools/classify_invoice"]
    assert classify_calls[0].json() == {"lines": [{"amount": 80}, {"amount": 50}]}
    assert app.seen["/approve"][0].json() == {"total": 130}
    rows = platform.tasks(workflow_id)
    for ref in ("fetch", "enrich", "amounts", "classify", "route", "approve", "summary"):
        assert rows[ref].status == TaskStatus.COMPLETED, (ref, rows[ref].reason_for_incompletion)
    assert (rows["enrich"].task_type, rows["enrich"].task_def_name) == ("WORKER", "enrich")
