"""Retry policies of a task definition, as conductor-oss's test-harness
``RetryPolicySpec`` asserts them: ``maxRetryDelaySeconds`` caps the computed backoff,
``backoffJitterMs`` adds 0 to that many milliseconds, ``totalTimeoutSeconds`` bounds all
attempts together.

The spec's workflow is one SIMPLE task (``retry_task_ref``) with a task definition each
case registers; a worker fails the task and the spec reads the retry Conductor's
``DeciderService.retry`` scheduled: a SCHEDULED task whose ``callbackAfterSeconds`` is the
capped delay in whole seconds.

Two things the spec reads are not in Conductor's API and are translated:

* ``callbackAfterMs`` (the delay with its jitter) is a field of Conductor's internal
  ``TaskModel`` (read with ``ExecutionDAOFacade``), not of the Task JSON. Stepway shows a
  retry's delay in its ``scheduledTime``: the time of the decision that scheduled it (the
  new row's ``updateTime``, written with that decision) plus the delay
  (engine/decider/core.py, ``_dispatch_retry``). ``_delay_ms`` reads it so.
* the ``totalTimeoutSeconds`` cases backdate the task's ``firstScheduledTime`` in the
  store; over the API the budget (a short one) elapses for real.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conductor.harness import Conductor, simple, unique, workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _setup(conductor: Conductor, **taskdef: Any) -> tuple[str, str]:
    """The spec's ``setup()`` and ``given``: the task definition and the one-task
    workflow (timeoutSeconds 3600, ALERT_ONLY)."""
    task_type, name = unique("retry_policy_task"), unique("retry_policy_wf")
    conductor.taskdefs({"name": task_type, "ownerEmail": "test@example.com", **taskdef})
    conductor.register(
        workflow(
            name,
            [simple(task_type, "retry_task_ref")],
            timeoutSeconds=3600,
            timeoutPolicy="ALERT_ONLY",
        )
    )
    return task_type, name


def _fail(conductor: Conductor, task_type: str) -> dict[str, Any]:
    """``updateTask(failedResult(pollUntilAvailable()))``: poll until the task is handed
    out (after its retry delay, if any), then fail it."""
    return conductor.poll_and_fail(task_type, "failed by the test", "test-worker")


def _rescheduled(conductor: Conductor, workflow_id: str, count: int) -> dict[str, Any]:
    """The run once its ``count``-th task is there: the retry of the attempt just failed
    (``tasks.findAll { it.status == SCHEDULED }.last()``)."""
    run = conductor.wait(
        workflow_id,
        lambda r: len(r["tasks"]) >= count and r["tasks"][-1]["status"] == "SCHEDULED",
    )
    scheduled = [t for t in run["tasks"] if t["status"] == "SCHEDULED"]
    assert scheduled, [(t["taskType"], t["status"]) for t in run["tasks"]]
    return run


def _delay_ms(run: dict[str, Any]) -> int:
    """The last SCHEDULED task's delay in ms (Conductor's ``callbackAfterMs``): its
    ``scheduledTime`` after the decision that scheduled it (its ``updateTime``, untouched
    while nobody polled it)."""
    retry = [t for t in run["tasks"] if t["status"] == "SCHEDULED"][-1]
    assert retry["pollCount"] == 0 and retry["retriedTaskId"], retry
    return int(retry["scheduledTime"]) - int(retry["updateTime"])


def _callback_after(run: dict[str, Any]) -> int:
    return int([t for t in run["tasks"] if t["status"] == "SCHEDULED"][-1]["callbackAfterSeconds"])


def _cleanup(conductor: Conductor, workflow_id: str) -> None:
    """Runs left waiting for a long retry delay are terminated."""
    if conductor.run(workflow_id)["status"] == "RUNNING":
        conductor.http.delete(f"/api/workflow/{workflow_id}", params={"reason": "test done"})


def _retries(
    conductor: Conductor, correlation_id: str, failures: int, **taskdef: Any
) -> tuple[str, list[dict[str, Any]]]:
    """The spec's ``given`` and ``when`` for a task definition with ``taskdef`` and 3600 s
    timeouts: a run started and its task failed ``failures`` times, each time once it is
    handed out (after its retry delay). The run's id and the run as each failure's retry
    was scheduled."""
    task_type, name = _setup(conductor, timeoutSeconds=3600, responseTimeoutSeconds=3600, **taskdef)
    workflow_id = conductor.start(name, correlation_id=correlation_id)
    runs = []
    for failed in range(1, failures + 1):
        _fail(conductor, task_type)
        runs.append(_rescheduled(conductor, workflow_id, failed + 1))
    return workflow_id, runs


# --- maxRetryDelaySeconds -------------------------------------------------------------


@pytest.mark.parametrize(
    ("correlation_id", "taskdef", "delays_ms", "callbacks"),
    [
        # "Exponential backoff delay is capped by maxRetryDelaySeconds"
        # retry 0: 2 * 2^0 = 2 s (below the cap); retry 1: 2 * 2^1 = 4 s, capped to 3 s
        (
            "retry-cap-exp",
            {"retryLogic": "EXPONENTIAL_BACKOFF", "maxRetryDelaySeconds": 3},
            (2000, 3000),
            (2, 3),
        ),
        # "Linear backoff delay is capped by maxRetryDelaySeconds"
        # retry 0: 2 * 2 * 1 = 4 s (below the 5 s cap); retry 1: 2 * 2 * 2 = 8 s, capped
        # to 5 s
        (
            "retry-cap-lin",
            {"retryLogic": "LINEAR_BACKOFF", "backoffScaleFactor": 2, "maxRetryDelaySeconds": 5},
            (4000, 5000),
            (4, 5),
        ),
    ],
    ids=["exponential", "linear"],
)
def test_backoff_delay_is_capped_by_max_retry_delay_seconds(
    conductor: Conductor,
    correlation_id: str,
    taskdef: dict[str, Any],
    delays_ms: tuple[int, int],
    callbacks: tuple[int, int],
) -> None:
    # "Exponential backoff delay is capped by maxRetryDelaySeconds" and
    # "Linear backoff delay is capped by maxRetryDelaySeconds"
    workflow_id, (first, second) = _retries(
        conductor, correlation_id, 2, retryCount=5, retryDelaySeconds=2, **taskdef
    )
    # Stepway's delays (scheduledTime): the first below the cap, the second capped
    assert (_delay_ms(first), _delay_ms(second)) == delays_ms
    # the spec's assertions: callbackAfterSeconds
    assert (_callback_after(first), _callback_after(second)) == callbacks
    _cleanup(conductor, workflow_id)


# --- backoffJitterMs ------------------------------------------------------------------


def test_backoff_jitter_adds_an_offset_up_to_the_max_jitter(conductor: Conductor) -> None:
    # "backoffJitterMs adds a random offset in [0, maxJitterMs] to the retry delay"
    # Stepway documents (docs/conductor-compatibility.md, "Timeouts and retries") that the
    # jitter is derived from the attempt instead of drawn at random: still in the range.
    workflow_id, (run,) = _retries(
        conductor,
        "jitter-test",
        1,
        retryCount=3,
        retryDelaySeconds=60,
        retryLogic="FIXED",
        backoffJitterMs=5000,
    )
    # callbackAfterMs in [60_000, 65_000]: base + up to maxJitterMs
    assert 60_000 <= _delay_ms(run) <= 65_000
    # callbackAfterSeconds stays at the base delay (60)
    assert _callback_after(run) == 60
    _cleanup(conductor, workflow_id)


def test_zero_backoff_jitter_adds_no_jitter(conductor: Conductor) -> None:
    # "backoffJitterMs of zero produces no jitter — callbackAfterMs equals base delay exactly"
    workflow_id, (run,) = _retries(
        conductor,
        "no-jitter-test",
        1,
        retryCount=3,
        retryDelaySeconds=30,
        retryLogic="FIXED",
        backoffJitterMs=0,
    )
    # callbackAfterMs is exactly 30_000
    assert _delay_ms(run) == 30_000
    _cleanup(conductor, workflow_id)


# --- cap + jitter ---------------------------------------------------------------------


def test_the_cap_is_applied_before_the_jitter(conductor: Conductor) -> None:
    # "Cap is applied before jitter — callbackAfterMs is in [cap_ms, cap_ms + maxJitterMs]"
    # retry 0: raw 2 s, below the cap; retry 1: raw 4 s, capped to 3 s: [3000, 5000] ms
    workflow_id, (_, run) = _retries(
        conductor,
        "cap-jitter-test",
        2,
        retryCount=5,
        retryDelaySeconds=2,
        retryLogic="EXPONENTIAL_BACKOFF",
        maxRetryDelaySeconds=3,
        backoffJitterMs=2000,
    )
    assert 3_000 <= _delay_ms(run) <= 5_000
    # callbackAfterSeconds = 3 (the cap)
    assert _callback_after(run) == 3
    _cleanup(conductor, workflow_id)


# --- totalTimeoutSeconds --------------------------------------------------------------


def test_a_total_timeout_of_zero_is_disabled(conductor: Conductor) -> None:
    # "totalTimeoutSeconds=0 is disabled — retries continue as normal"
    workflow_id, (run,) = _retries(
        conductor,
        "total-timeout-disabled",
        1,
        retryCount=5,
        retryDelaySeconds=0,
        retryLogic="FIXED",
        totalTimeoutSeconds=0,
    )
    assert len(run["tasks"]) >= 2
    assert run["tasks"][-1]["status"] == "SCHEDULED"
    _cleanup(conductor, workflow_id)


def _total_budget_spent(conductor: Conductor, **taskdef: Any) -> tuple[str, dict[str, Any]]:
    """A task with a 2 s total budget, polled, and the budget spent: the spec backdates
    ``firstScheduledTime`` 60 s in the store, which the API cannot; here the 2 s pass.
    The response timeout is 10 s (the spec's 1 s would time the attempt out while the
    budget elapses; in the spec no time passes)."""
    task_type, name = _setup(
        conductor,
        retryCount=10,
        retryDelaySeconds=0,
        retryLogic="FIXED",
        totalTimeoutSeconds=2,
        timeoutSeconds=0,  # disabled, so that timeoutSeconds <= totalTimeoutSeconds
        responseTimeoutSeconds=10,
        **taskdef,
    )
    workflow_id = conductor.start(name)
    run = conductor.wait_tasks(workflow_id, 1)
    assert run["tasks"][0]["status"] == "SCHEDULED"
    polled = conductor.poll_one(task_type, "test-worker")
    time.sleep(max(0.0, run["tasks"][0]["scheduledTime"] / 1000 + 2.2 - time.time()))
    return workflow_id, polled


def test_a_retry_past_the_total_timeout_ends_the_run(conductor: Conductor) -> None:
    # "totalTimeoutSeconds exceeded on retry — workflow fails with no further retries"
    workflow_id, polled = _total_budget_spent(conductor, timeoutPolicy="TIME_OUT_WF")
    # the worker fails the task once the budget is spent (Stepway's total-timeout
    # deadline, Conductor's checkTotalTimeout, may have ended the attempt first: then the
    # result is refused as late, and the run ended all the same)
    conductor.update(polled, "FAILED", reason="failed by the test")
    run = conductor.wait(workflow_id, lambda r: r["status"] in ("TIMED_OUT", "FAILED"))
    assert run["status"] in ("TIMED_OUT", "FAILED")


def test_a_total_timeout_times_out_the_task_in_progress(conductor: Conductor) -> None:
    # "totalTimeoutSeconds exceeded in checkTotalTimeout — IN_PROGRESS task is timed out"
    workflow_id, polled = _total_budget_spent(conductor, timeoutPolicy="RETRY")
    run = conductor.wait(
        workflow_id,
        lambda r: any(
            t["taskId"] == polled["taskId"] and t["status"] == "TIMED_OUT" for t in r["tasks"]
        ),
    )
    timed_out = next(t for t in run["tasks"] if t["taskId"] == polled["taskId"])
    assert timed_out["status"] == "TIMED_OUT"
