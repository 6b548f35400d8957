"""The contracts between the parts: queue routing both ways, the task message body, the
event payloads the interpreter reads."""

from __future__ import annotations

from protocol.events import TaskResultEvent, TaskStartedEvent, result_event, started_event
from protocol.messages import TaskMessage, callback_message_id, message_id
from protocol.queues import poll_queues, queue_for, queue_names


def test_an_attempt_goes_to_its_domain_then_priority_then_plain_queue() -> None:
    assert queue_for("parse", 0, {}) == ("parse", None)
    assert queue_for("parse", 5, {}) == ("parse-high", None)
    assert queue_for("parse", 5, {"parse": "eu"}) == ("eu-parse", "eu")
    assert queue_for("parse", 0, {"*": "us"}) == ("us-parse", "us")
    assert queue_for("parse", 0, {"other": "eu"}) == ("parse", None)


def test_every_queue_an_attempt_can_go_to_is_one_a_poll_reads() -> None:
    for priority, domains in [(0, {}), (3, {}), (0, {"parse": "eu"})]:
        queue, domain = queue_for("parse", priority, domains)
        assert queue in poll_queues("parse", domain)
        assert queue in queue_names("parse", [domain] if domain else [])
    assert poll_queues("parse", None) == ["parse-high", "parse"]


def test_a_message_carries_its_input_or_a_reference_never_both() -> None:
    inline = TaskMessage(
        task_id="t", workflow_id="w", task_ref="p", task_type="parse", attempt=2, input={"a": 1}
    )
    assert inline.body() == {
        "taskId": "t",
        "workflowId": "w",
        "workflowType": None,
        "correlationId": None,
        "taskRef": "p",
        "taskType": "parse",
        "attempt": 2,
        "priority": 0,
        "domain": None,
        "responseTimeoutSeconds": None,
        "input": {"a": 1},
    }
    offloaded = inline.model_copy(update={"input": None, "input_ref": "payloads/w/t-2-input.json"})
    body = offloaded.body()
    assert body["inputRef"] == "payloads/w/t-2-input.json" and "input" not in body
    assert TaskMessage.model_validate(body) == offloaded
    assert message_id("t", 2) == "t:2"
    assert callback_message_id("t", 2).startswith("t:2#cb")
    assert callback_message_id("t", 2) != callback_message_id("t", 2)


def test_event_names_and_payloads() -> None:
    assert result_event("t") == "t" and started_event("t") == "t.started"
    assert TaskStartedEvent(attempt=1, worker_id="w", start_time=5).payload() == {
        "attempt": 1,
        "workerId": "w",
        "startTime": 5,
    }
    offloaded = TaskResultEvent(
        attempt=1, status="COMPLETED", output={"outputRef": "r"}, output_ref="r"
    ).payload()
    assert offloaded["outputRef"] == "r" and offloaded["output"] == {"outputRef": "r"}
    assert "outputRef" not in TaskResultEvent(status="FAILED", reason="x").payload()


def test_a_child_running_a_given_definition_is_marked_dynamic() -> None:
    """conductor-oss's SubWorkflow.start adds ``_systemMetadata.dynamic`` to the input of a
    child whose definition the parent gives, keeping what ``_systemMetadata`` held; a
    registered child's input is the task's as it is."""
    from protocol.runs import child_run_input

    task_input = {
        "subWorkflowName": "c",
        "workflowInput": {"a": 1, "_systemMetadata": {"origin": "p"}},
    }
    assert child_run_input(task_input) == {"a": 1, "_systemMetadata": {"origin": "p"}}
    assert child_run_input(task_input, dynamic=True) == {
        "a": 1,
        "_systemMetadata": {"origin": "p", "dynamic": True},
    }
    assert child_run_input({"a": 1}, dynamic=True) == {"a": 1, "_systemMetadata": {"dynamic": True}}
    assert child_run_input({"a": 1}) == {"a": 1}
