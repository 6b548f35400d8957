"""conductor-oss's Java e2e ``RetryPolicyTests`` and ``ConcurrentExecLimitTests``
(``e2e/src/test/java/io/conductor/e2e/task``) and ``WorkflowPriorityTests``
(``.../e2e/workflow``), over Stepway's Conductor API: a task definition's
``maxRetryDelaySeconds``, ``backoffJitterMs`` and ``totalTimeoutSeconds``, the response
timeout of a polled task, ``concurrentExecLimit``, and the task of a terminated run of
higher priority.

Translations, common to all:

* The Java tests use fixed names (``e2e-exp-cap-task``, ``exec_limit_check``,
  ``workflow-priority-test``...); here every workflow and task type is ``unique()``. Their
  clean-up searches (``terminateExistingRunningWorkflows``) are kept; they find nothing.
  WorkflowPriorityTests' search asks for 5000 results, above Stepway's documented
  ``size`` limit (1000: docs/conductor-compatibility.md, ``GET /workflow/search``); it
  asks for 1000.
* A Java worker in the background (``TaskRunnerConfigurer``, the always-failing worker
  of the totalTimeoutSeconds cases) is the test polling and failing every 100 ms, as that
  worker's polling interval.
* Conductor's retry ``scheduledTime`` is when the retry row was made; the Java tests
  measure a retry's queue delay from it. Stepway documents (docs/conductor-compatibility.md,
  "Timeouts and retries") that a retry's ``scheduledTime`` is when it is due; the row's
  ``updateTime`` is the decision that made it (untouched until it is polled:
  test_retry_policy_spec.py), so the queue delays are measured from that.
* Conductor decides inside the task update; Stepway a moment later. Where a Java test
  reads a run's status right after its last update, the port waits for it
  (``Conductor.wait``) and then asserts it.
* Shortened where the assertion does not depend on the length: the poll-gap case's
  response timeout is 1 s (Java: 3 s; asserted: timed out well before the 30 s poll
  timeout); the two "totalTimeoutSeconds exceeded" budgets are 2 s (Java: 4 s; asserted:
  fewer than 100 attempts); testTerminateForDataInconsistency polls every 0.2 s (Java:
  every 1 s). Retry delays of 2 s are 1 s where the case asserts the same rule at any
  base (FIXED jitter, zero and 1 ms jitter: base 1 s, the queue-delay bounds 1 s lower;
  the cap below and equal to the base: cap 1 s), as test_oss_tasks.test_retry_logic
  scales its delays; the others are the smallest whole seconds their formulas allow. The
  file still waits about 50 s of retry delays the Java tests assert on.
* The Java thread pools' assertions (testConcurrentRetries_capAndJitter...) are reported
  here (a Java ``ExecutorService`` drops a task's AssertionError); the ConcurrentExecLimit
  case's ``ConductorClientException`` (which ends Java's ``untilAsserted`` as if it held)
  makes the probe try again instead.

Overlap with test_retry_policy_spec.py (conductor-oss's test-harness ``RetryPolicySpec``)
and test_task_limits_spec.py (``TaskLimitsWorkflowSpec``): none of the cases here is
identical to one there, so none is left out. The spec cases use other delays, caps and
jitters (2 s base, 60 s / 30 s bases for the jitter cases, a 5 s linear cap) and read the
internal ``callbackAfterMs``; these Java cases fail and answer attempts until the run
completes and measure the real queue delays. The concurrency cases here fork the limited
task in one run; the spec's starts one run per task.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.e2e.conductor.harness import ENDED, Conductor, simple, unique, workflow
from tests.e2e.conductor.oss_e2e import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

OWNER = "test@conductor.io"


# --- RetryPolicyTests helpers -----------------------------------------------------------


def _task_def_base(**fields: Any) -> dict[str, Any]:
    """``taskDefBase`` (its name given by ``_setup``): timeouts 600 s, retryCount 5, and
    ``fields``."""
    return {
        "ownerEmail": OWNER,
        "timeoutSeconds": 600,
        "responseTimeoutSeconds": 600,
        "retryCount": 5,
        **fields,
    }


def _setup(conductor: Conductor, prefix: str, taskdef: dict[str, Any]) -> tuple[str, str]:
    """``registerTaskDef`` (``taskdef`` named after a new task type) and
    ``registerWorkflow``: one SIMPLE task ``<tt>_ref``, 600 s ALERT_ONLY."""
    tt, wf = unique(f"{prefix}-task"), unique(f"{prefix}-wf")
    conductor.taskdefs({**taskdef, "name": tt})
    conductor.register(
        workflow(
            wf,
            [simple(tt, f"{tt}_ref")],
            ownerEmail=OWNER,
            timeoutSeconds=600,
            timeoutPolicy="ALERT_ONLY",
        )
    )
    return tt, wf


def _start(conductor: Conductor, wf: str) -> str:
    return conductor.start(wf, {}, version=1)


def _poll_task(conductor: Conductor, tt: str) -> dict[str, Any]:
    """``pollTask``: batch polls (worker ``e2e-worker``, 1, 500 ms) for up to 20 s."""
    return conductor.poll_one(tt, "e2e-worker", seconds=20)


def _fail_task(conductor: Conductor, workflow_id: str, task_id: str) -> None:
    r = conductor.update(
        {"workflowInstanceId": workflow_id, "taskId": task_id},
        "FAILED",
        reason="e2e retry policy test",
    )
    assert r.status_code == 200, r.text


def _complete_task(conductor: Conductor, workflow_id: str, task_id: str) -> None:
    r = conductor.update({"workflowInstanceId": workflow_id, "taskId": task_id}, "COMPLETED")
    assert r.status_code == 200, r.text


def _await_scheduled_retry(
    conductor: Conductor, workflow_id: str, min_count: int
) -> dict[str, Any]:
    """``awaitScheduledRetry``: the first SCHEDULED task once the run has ``min_count``
    tasks (within 10 s)."""

    def probe() -> dict[str, Any] | None:
        run = conductor.run(workflow_id)
        if len(run["tasks"]) < min_count:
            return None
        scheduled = [t for t in run["tasks"] if t["status"] == "SCHEDULED"]
        return scheduled[0] if scheduled else None

    found: dict[str, Any] = eventually(
        probe, 10, f"no SCHEDULED retry in {workflow_id} with {min_count} tasks"
    )
    return found


def _await_completed(conductor: Conductor, workflow_id: str) -> None:
    run = conductor.wait_status(workflow_id, "COMPLETED", seconds=20)
    assert run["status"] == "COMPLETED", f"workflow {workflow_id} did not complete"


def _queue_delay_ms(conductor: Conductor, tt: str, retry: dict[str, Any]) -> tuple[dict, int]:
    """``scheduledAt = retry.getScheduledTime(); pollTask(tt); now - scheduledAt``: the
    retry polled, and the ms from the decision that made it (its ``updateTime``; see
    the module docstring) to the poll's answer."""
    assert retry["pollCount"] == 0, retry
    scheduled_at = int(retry["updateTime"])
    polled = _poll_task(conductor, tt)
    return polled, int(time.time() * 1000) - scheduled_at


def _fail_and_await_retry(conductor: Conductor, tt: str, workflow_id: str, count: int) -> int:
    """``failTask(wfId, pollTask(tt).getTaskId())`` then
    ``awaitScheduledRetry(wfId, count).getCallbackAfterSeconds()``."""
    _fail_task(conductor, workflow_id, _poll_task(conductor, tt)["taskId"])
    return int(_await_scheduled_retry(conductor, workflow_id, count)["callbackAfterSeconds"])


def _always_failing_worker(conductor: Conductor, tt: str, workflow_id: str) -> None:
    """``startAlwaysFailingWorker`` until the run ended (at most 30 s): every task of
    ``tt`` polled is failed, a poll every 100 ms (the Java worker's polling interval).
    The worker does not look at its update's answer (an attempt the total timeout ended
    meanwhile is refused)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if conductor.run(workflow_id)["status"] in ENDED:
            return
        polled = conductor.poll(tt, "e2e-always-failing", seconds=0)
        if polled is not None:
            conductor.update(polled, "FAILED", reason="e2e totalTimeout stress test")
        time.sleep(0.1)


# --- maxRetryDelaySeconds ---------------------------------------------------------------


def test_max_retry_delay_seconds_exponential(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_exponential
    # base=1s, cap=3s: retry1=1s, retry2=2s, retry3=4s->3s
    tt, wf = _setup(
        conductor,
        "e2e-exp-cap",
        _task_def_base(
            retryDelaySeconds=1, retryLogic="EXPONENTIAL_BACKOFF", maxRetryDelaySeconds=3
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1, "retry1: 1x2^0=1s (below cap 3s)"
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 2, "retry2: 1x2^1=2s (below cap 3s)"
    assert _fail_and_await_retry(conductor, tt, wf_id, 4) == 3, "retry3: 1x2^2=4s -> capped to 3s"
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_max_retry_delay_seconds_linear(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_linear
    # base=1s, scale=2, cap=3s: retry1=2s, retry2=4s->3s
    tt, wf = _setup(
        conductor,
        "e2e-lin-cap",
        _task_def_base(
            retryDelaySeconds=1,
            retryLogic="LINEAR_BACKOFF",
            backoffScaleFactor=2,
            maxRetryDelaySeconds=3,
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 2, "retry1: 1x2x1=2s (below cap 3s)"
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 3, "retry2: 1x2x2=4s -> capped to 3s"
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_max_retry_delay_seconds_zero_means_no_cap_applied(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_zeroMeansNoCapApplied
    # base=1s, no cap: retry1=1s, retry2=2s, retry3=4s (all uncapped)
    tt, wf = _setup(
        conductor,
        "e2e-no-cap",
        _task_def_base(
            retryDelaySeconds=1, retryLogic="EXPONENTIAL_BACKOFF", maxRetryDelaySeconds=0
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 2
    assert _fail_and_await_retry(conductor, tt, wf_id, 4) == 4, (
        "cap=0 must be treated as disabled: delay should be uncapped 4s"
    )
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_max_retry_delay_seconds_cap_less_than_base_delay(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_capLessThanBaseDelay
    # base=5s, cap=1s (Java: 2s, shortened: the retries wait the cap): every retry is
    # capped to 1s even FIXED
    tt, wf = _setup(
        conductor,
        "e2e-cap-lt-base",
        _task_def_base(retryDelaySeconds=5, retryLogic="FIXED", maxRetryDelaySeconds=1),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1, "FIXED base=5s capped to 1s"
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 1, "All retries capped at 1s"
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_max_retry_delay_seconds_cap_equals_base(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_capEqualsBase
    # base=1s, scale=2, LINEAR, cap=1s (Java: base = cap = 2s, shortened): retry1=2s->1s,
    # retry2=4s->1s
    tt, wf = _setup(
        conductor,
        "e2e-cap-eq-base",
        _task_def_base(
            retryDelaySeconds=1,
            retryLogic="LINEAR_BACKOFF",
            backoffScaleFactor=2,
            maxRetryDelaySeconds=1,
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 1
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


# --- backoffJitterMs --------------------------------------------------------------------


def test_backoff_jitter_ms_fixed(conductor: Conductor) -> None:
    # RetryPolicyTests.testBackoffJitterMs_fixed
    # base 1s (Java: 2s, shortened; the bounds move with it), jitter 1000ms
    tt, wf = _setup(
        conductor,
        "e2e-jitter-fixed",
        _task_def_base(retryDelaySeconds=1, retryLogic="FIXED", backoffJitterMs=1000),
    )
    wf_id = _start(conductor, wf)
    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])

    retry = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry["callbackAfterSeconds"] == 1, (
        "callbackAfterSeconds must equal the base delay; jitter lives in callbackAfterMs"
    )
    retried, queue_delay = _queue_delay_ms(conductor, tt, retry)
    assert queue_delay >= 1000, f"Must wait at least base 1s; was {queue_delay}ms"
    assert queue_delay < 4000, f"Must not exceed base+jitter+overhead; was {queue_delay}ms"

    _complete_task(conductor, wf_id, retried["taskId"])
    _await_completed(conductor, wf_id)


def test_backoff_jitter_ms_exponential(conductor: Conductor) -> None:
    # RetryPolicyTests.testBackoffJitterMs_exponential
    # base=1s, jitter=500ms, exponential: retry1=1s+-500ms, retry2=2s+-500ms
    tt, wf = _setup(
        conductor,
        "e2e-jitter-exp",
        _task_def_base(retryDelaySeconds=1, retryLogic="EXPONENTIAL_BACKOFF", backoffJitterMs=500),
    )
    wf_id = _start(conductor, wf)

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry1 = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry1["callbackAfterSeconds"] == 1
    task1, delay1 = _queue_delay_ms(conductor, tt, retry1)
    assert delay1 >= 1000, f"retry1 queue delay must be >= 1s; was {delay1}ms"
    assert delay1 < 3000, f"retry1 delay must be < 3s; was {delay1}ms"

    _fail_task(conductor, wf_id, task1["taskId"])
    retry2 = _await_scheduled_retry(conductor, wf_id, 3)
    assert retry2["callbackAfterSeconds"] == 2
    task2, delay2 = _queue_delay_ms(conductor, tt, retry2)
    assert delay2 >= 2000, f"retry2 queue delay must be >= 2s; was {delay2}ms"
    assert delay2 < 4000, f"retry2 delay must be < 4s; was {delay2}ms"

    _complete_task(conductor, wf_id, task2["taskId"])
    _await_completed(conductor, wf_id)


def test_backoff_jitter_ms_linear(conductor: Conductor) -> None:
    # RetryPolicyTests.testBackoffJitterMs_linear
    # base=1s, scale=2, jitter=500ms: retry1=2s+-500ms
    tt, wf = _setup(
        conductor,
        "e2e-jitter-lin",
        _task_def_base(
            retryDelaySeconds=1,
            retryLogic="LINEAR_BACKOFF",
            backoffScaleFactor=2,
            backoffJitterMs=500,
        ),
    )
    wf_id = _start(conductor, wf)

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry1 = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry1["callbackAfterSeconds"] == 2
    t1, d1 = _queue_delay_ms(conductor, tt, retry1)
    assert 2000 <= d1 < 4000, f"retry1 queue delay should be in [2s, 4s]; was {d1}ms"

    _complete_task(conductor, wf_id, t1["taskId"])
    _await_completed(conductor, wf_id)


def test_backoff_jitter_ms_zero(conductor: Conductor) -> None:
    # RetryPolicyTests.testBackoffJitterMs_zero
    # base 1s (Java: 2s, shortened; the bounds move with it)
    tt, wf = _setup(
        conductor,
        "e2e-no-jitter",
        _task_def_base(retryDelaySeconds=1, retryLogic="FIXED", backoffJitterMs=0),
    )
    wf_id = _start(conductor, wf)
    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])

    retry = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry["callbackAfterSeconds"] == 1
    t, d = _queue_delay_ms(conductor, tt, retry)
    assert d >= 1000, f"Must wait at least 1s base; was {d}ms"
    assert d < 3000, f"With zero jitter should be close to 1s; was {d}ms"

    _complete_task(conductor, wf_id, t["taskId"])
    _await_completed(conductor, wf_id)


def test_backoff_jitter_ms_minimum_onems(conductor: Conductor) -> None:
    # RetryPolicyTests.testBackoffJitterMs_minimumOnems
    # base 1s (Java: 2s, shortened; the bounds move with it)
    tt, wf = _setup(
        conductor,
        "e2e-jitter-1ms",
        _task_def_base(retryDelaySeconds=1, retryLogic="FIXED", backoffJitterMs=1),
    )
    wf_id = _start(conductor, wf)
    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])

    retry = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry["callbackAfterSeconds"] == 1
    # queue delay: base 1s +- 1ms -> effectively 1s
    t, d = _queue_delay_ms(conductor, tt, retry)
    assert 1000 <= d < 3000, f"1ms jitter should not significantly change timing; was {d}ms"

    _complete_task(conductor, wf_id, t["taskId"])
    _await_completed(conductor, wf_id)


def test_max_retry_delay_seconds_with_jitter(conductor: Conductor) -> None:
    # RetryPolicyTests.testMaxRetryDelaySeconds_withJitter
    # base=1s, cap=3s, jitter=500ms; at retry3: 4s->3s, queue delay in [3s, 3.5s]
    tt, wf = _setup(
        conductor,
        "e2e-cap-jitter",
        _task_def_base(
            retryDelaySeconds=1,
            retryLogic="EXPONENTIAL_BACKOFF",
            maxRetryDelaySeconds=3,
            backoffJitterMs=500,
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 2

    # retry 2 -> retry 3: raw=4s -> capped=3s
    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry3 = _await_scheduled_retry(conductor, wf_id, 4)
    assert retry3["callbackAfterSeconds"] == 3, (
        "callbackAfterSeconds reflects cap (3s), not raw (4s)"
    )
    t, d = _queue_delay_ms(conductor, tt, retry3)
    assert d >= 3000, f"Queue delay must be >= cap 3s; was {d}ms"
    assert d < 5000, f"Queue delay must be < cap+jitter+overhead; was {d}ms"

    _complete_task(conductor, wf_id, t["taskId"])
    _await_completed(conductor, wf_id)


# --- concurrency: jitter spreads retries --------------------------------------------------


def test_concurrent_retries_jitter_spreads_retry_times(conductor: Conductor) -> None:
    # RetryPolicyTests.testConcurrentRetries_jitterSpreadsRetryTimes
    n = 5
    # base=1s, jitter=3000ms: large jitter relative to base to make spread observable
    tt, wf = _setup(
        conductor,
        "e2e-concurrent-jitter",
        _task_def_base(retryDelaySeconds=1, retryLogic="FIXED", backoffJitterMs=3000),
    )
    for _ in range(n):
        _start(conductor, wf)

    # poll and fail all initial tasks concurrently, each by its own workflowInstanceId
    def poll_and_fail() -> None:
        t = _poll_task(conductor, tt)
        _fail_task(conductor, t["workflowInstanceId"], t["taskId"])

    with ThreadPoolExecutor(n) as pool:
        for future in [pool.submit(poll_and_fail) for _ in range(n)]:
            future.result(timeout=30)  # "All tasks failed within timeout"

    # the second-buckets in which each retry was first polled
    tasks_polled = 0
    poll_timestamps_seconds: set[int] = set()
    start = time.monotonic()
    while tasks_polled < n and time.monotonic() - start < 31:
        r = conductor.http.get(
            f"/api/tasks/poll/batch/{tt}",
            params={"workerid": "e2e-concurrency-worker", "count": n, "timeout": 500},
        )
        assert r.status_code == 200, r.text
        batch = r.json()
        now_sec = int(time.time())
        for t in batch:
            poll_timestamps_seconds.add(now_sec)
            tasks_polled += 1
            _complete_task(conductor, t["workflowInstanceId"], t["taskId"])
        if not batch:
            time.sleep(0.2)

    assert tasks_polled == n, f"All {n} retry tasks must eventually be polled"
    assert len(poll_timestamps_seconds) >= 2, (
        f"With {n} tasks and 3s jitter, retries must spread across >=2 second-buckets. "
        f"All {n} tasks appeared in the same second; jitter may not be applied."
    )


def test_concurrent_retries_cap_and_jitter_all_workflows_complete(conductor: Conductor) -> None:
    # RetryPolicyTests.testConcurrentRetries_capAndJitter_allWorkflowsComplete
    n = 4
    # base=1s, cap=2s, jitter=500ms
    tt, wf = _setup(
        conductor,
        "e2e-concurrent-cap-jitter",
        _task_def_base(
            retryDelaySeconds=1,
            retryLogic="EXPONENTIAL_BACKOFF",
            maxRetryDelaySeconds=2,
            backoffJitterMs=500,
        ),
    )
    wf_ids = [_start(conductor, wf) for _ in range(n)]

    def cycle() -> None:
        initial = _poll_task(conductor, tt)
        wf_id = initial["workflowInstanceId"]
        _fail_task(conductor, wf_id, initial["taskId"])
        # await and complete the retry
        retry = _await_scheduled_retry(conductor, wf_id, 2)
        assert retry is not None, f"retry task must be scheduled for wf {wf_id}"
        assert retry["callbackAfterSeconds"] <= 2, (
            f"callbackAfterSeconds must be <= cap (2s); was {retry['callbackAfterSeconds']}"
        )
        retry_task = _poll_task(conductor, tt)
        _complete_task(conductor, retry_task["workflowInstanceId"], retry_task["taskId"])

    with ThreadPoolExecutor(n) as pool:
        for future in [pool.submit(cycle) for _ in range(n)]:
            future.result(timeout=60)  # "All N retry cycles completed"

    for wf_id in wf_ids:
        if conductor.run(wf_id)["status"] not in ENDED:
            r = conductor.http.put(f"/api/workflow/decide/{wf_id}")  # runDecider
            assert r.status_code < 300, r.text
        run = conductor.wait_status(wf_id, "COMPLETED")
        assert run["status"] == "COMPLETED", f"Workflow {wf_id} must be COMPLETED"


# --- poll gap: response timeout < poll timeout ------------------------------------------


def test_poll_gap_fix_response_timeout_detected_before_poll_timeout(conductor: Conductor) -> None:
    # RetryPolicyTests.testPollGapFix_responseTimeoutDetectedBeforePollTimeout
    # pollTimeout=30s, responseTimeout 1s (Java: 3s): timed out long before the poll timeout
    tt, wf = _setup(
        conductor,
        "e2e-poll-gap",
        _task_def_base(
            retryCount=0,
            retryLogic="FIXED",
            pollTimeoutSeconds=30,
            responseTimeoutSeconds=1,
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
        ),
    )
    wf_id = _start(conductor, wf)

    # polled (SCHEDULED -> IN_PROGRESS), never answered
    task = _poll_task(conductor, tt)
    assert task is not None, "Task must be pollable"
    polled_at = time.monotonic()

    def timed_out() -> bool:
        found = [t for t in conductor.run(wf_id)["tasks"] if t["taskId"] == task["taskId"]]
        assert found, f"task {task['taskId']} not in the run"
        assert found[0]["status"] == "TIMED_OUT", (
            "Task must be TIMED_OUT within response timeout window"
        )
        return True

    eventually(timed_out, 10)
    elapsed_ms = (time.monotonic() - polled_at) * 1000
    assert elapsed_ms < 20_000, (
        f"Task timed out {elapsed_ms:.0f}ms after polling; the sweep must come at the "
        "response timeout, not the poll timeout (30s)"
    )


# --- totalTimeoutSeconds ----------------------------------------------------------------


def _total_def(**fields: Any) -> dict[str, Any]:
    """The totalTimeoutSeconds cases' task definitions (not taskDefBase): FIXED, no
    per-attempt timeout, responseTimeoutSeconds 1, and ``fields``."""
    return {
        "ownerEmail": OWNER,
        "retryLogic": "FIXED",
        "timeoutSeconds": 0,
        "responseTimeoutSeconds": 1,
        **fields,
    }


def test_total_timeout_seconds_zero_disabled(conductor: Conductor) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_zero_disabled
    tt, wf = _setup(
        conductor,
        "e2e-total-timeout-disabled",
        _total_def(retryCount=5, retryDelaySeconds=0, totalTimeoutSeconds=0),
    )
    wf_id = _start(conductor, wf)

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry1 = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry1 is not None, "Retry must be scheduled when totalTimeoutSeconds=0 (disabled)"

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry2 = _await_scheduled_retry(conductor, wf_id, 3)
    assert retry2 is not None, "Second retry must be scheduled"

    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_total_timeout_seconds_not_exceeded_workflow_completes(conductor: Conductor) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_notExceeded_workflowCompletes
    tt, wf = _setup(
        conductor,
        "e2e-total-timeout-ok",
        _total_def(retryCount=5, retryDelaySeconds=0, totalTimeoutSeconds=60),
    )
    wf_id = _start(conductor, wf)

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_scheduled_retry(conductor, wf_id, 2)
    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_scheduled_retry(conductor, wf_id, 3)
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])

    _await_completed(conductor, wf_id)
    assert conductor.run(wf_id)["status"] == "COMPLETED", (
        "Workflow must complete when total budget is not exhausted"
    )


def test_total_timeout_seconds_exceeded_workflow_terminates(conductor: Conductor) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_exceeded_workflowTerminates
    # a 2 s budget (Java: 4 s), 100 retries allowed
    tt, wf = _setup(
        conductor,
        "e2e-total-timeout-exceeded",
        _total_def(
            retryCount=100, retryDelaySeconds=0, totalTimeoutSeconds=2, timeoutPolicy="TIME_OUT_WF"
        ),
    )
    wf_id = _start(conductor, wf)
    _always_failing_worker(conductor, tt, wf_id)

    run = conductor.wait(wf_id, lambda r: r["status"] in ("FAILED", "TIMED_OUT"), seconds=30)
    assert run["status"] in ("FAILED", "TIMED_OUT"), (
        f"Workflow must terminate once total timeout is exceeded; status={run['status']}"
    )
    task_count = len(conductor.run(wf_id)["tasks"])
    assert task_count < 100, (
        "Workflow must terminate before exhausting all 100 retries; total timeout should "
        f"fire first. taskCount={task_count}"
    )


def test_total_timeout_seconds_with_max_retry_delay_cap(conductor: Conductor) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_withMaxRetryDelayCap
    # base=1s, cap=2s, totalBudget=60s
    tt, wf = _setup(
        conductor,
        "e2e-total-cap-combo",
        _total_def(
            retryCount=5,
            retryDelaySeconds=1,
            retryLogic="EXPONENTIAL_BACKOFF",
            maxRetryDelaySeconds=2,
            totalTimeoutSeconds=60,
        ),
    )
    wf_id = _start(conductor, wf)
    assert _fail_and_await_retry(conductor, tt, wf_id, 2) == 1, (
        "retry1: 1x2^0=1s (below cap 2s, well within totalTimeout 60s)"
    )
    assert _fail_and_await_retry(conductor, tt, wf_id, 3) == 2, (
        "retry2: 1x2^1=2s = cap, still within totalTimeout 60s"
    )
    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_total_timeout_seconds_with_jitter(conductor: Conductor) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_withJitter
    # base=1s, jitter=500ms, totalBudget=60s
    tt, wf = _setup(
        conductor,
        "e2e-total-jitter-combo",
        _total_def(retryCount=5, retryDelaySeconds=1, backoffJitterMs=500, totalTimeoutSeconds=60),
    )
    wf_id = _start(conductor, wf)

    _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    retry1 = _await_scheduled_retry(conductor, wf_id, 2)
    assert retry1["callbackAfterSeconds"] == 1, (
        "callbackAfterSeconds must equal base delay regardless of jitter"
    )
    retried, queue_delay = _queue_delay_ms(conductor, tt, retry1)
    assert queue_delay >= 1000, f"Must wait at least base 1s; was {queue_delay}ms"
    assert queue_delay < 3000, f"Must be < base+jitter+overhead; was {queue_delay}ms"

    _complete_task(conductor, wf_id, retried["taskId"])
    _await_completed(conductor, wf_id)


def test_total_timeout_seconds_first_scheduled_time_preserved_across_retries(
    conductor: Conductor,
) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_firstScheduledTimePreservedAcrossRetries
    tt, wf = _setup(
        conductor,
        "e2e-total-preserve",
        _total_def(retryCount=10, retryDelaySeconds=0, totalTimeoutSeconds=60),
    )
    wf_id = _start(conductor, wf)
    test_start = time.monotonic()

    for i in range(3):
        _fail_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
        _await_scheduled_retry(conductor, wf_id, i + 2)

    run = conductor.run(wf_id)
    elapsed_ms = (time.monotonic() - test_start) * 1000
    assert len(run["tasks"]) == 4, (
        f"Should have 4 tasks (original + 3 retries) after 3 failures; elapsed={elapsed_ms:.0f}ms"
    )
    assert elapsed_ms < 10_000, f"Test must complete in << 60s totalTimeout; elapsed={elapsed_ms}"

    _complete_task(conductor, wf_id, _poll_task(conductor, tt)["taskId"])
    _await_completed(conductor, wf_id)


def test_total_timeout_seconds_alert_only_policy_terminates_on_worker_failure(
    conductor: Conductor,
) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_alertOnlyPolicy_terminatesOnWorkerFailure
    # a 2 s budget (Java: 4 s), ALERT_ONLY, always-failing worker
    tt, wf = _setup(
        conductor,
        "e2e-total-alert-only",
        _total_def(
            retryCount=100, retryDelaySeconds=0, totalTimeoutSeconds=2, timeoutPolicy="ALERT_ONLY"
        ),
    )
    wf_id = _start(conductor, wf)
    _always_failing_worker(conductor, tt, wf_id)

    run = conductor.wait(wf_id, lambda r: r["status"] in ("FAILED", "TIMED_OUT"), seconds=30)
    assert run["status"] in ("FAILED", "TIMED_OUT"), (
        "ALERT_ONLY with totalTimeout must still terminate after budget exhausted; "
        f"status={run['status']}"
    )
    assert len(conductor.run(wf_id)["tasks"]) < 100, (
        "Must have terminated before retryCount=100 is exhausted"
    )


def test_total_timeout_seconds_concurrent_workflows_each_instance_independent(
    conductor: Conductor,
) -> None:
    # RetryPolicyTests.testTotalTimeoutSeconds_concurrentWorkflows_eachInstanceIndependent
    n = 2
    tt, wf = _setup(
        conductor,
        "e2e-total-timeout-concurrent",
        _total_def(retryCount=5, retryDelaySeconds=0, totalTimeoutSeconds=30),
    )
    wf_ids = [_start(conductor, wf) for _ in range(n)]

    # polling is by task type: the workflow id is the polled task's
    failed: set[str] = set()
    while len(failed) < n:
        task = _poll_task(conductor, tt)
        task_wf = task["workflowInstanceId"]
        if task_wf in wf_ids and task_wf not in failed:
            failed.add(task_wf)
            _fail_task(conductor, task_wf, task["taskId"])

    for wf_id in wf_ids:
        _await_scheduled_retry(conductor, wf_id, 2)

    completed: set[str] = set()
    while len(completed) < n:
        task = _poll_task(conductor, tt)
        task_wf = task["workflowInstanceId"]
        if task_wf in wf_ids and task_wf not in completed:
            completed.add(task_wf)
            _complete_task(conductor, task_wf, task["taskId"])

    for wf_id in wf_ids:
        run = conductor.wait_status(wf_id, "COMPLETED")
        assert run["status"] == "COMPLETED", (
            "Every workflow instance must complete when total budget is not exhausted"
        )


# --- ConcurrentExecLimitTests -----------------------------------------------------------


def _terminate_existing_running_workflows(
    conductor: Conductor, workflow_name: str, **params: Any
) -> None:
    """``terminateExistingRunningWorkflows``: search the name's RUNNING runs, terminate
    each (a refused terminate is ignored, as there)."""
    r = conductor.http.get(
        "/api/workflow/search",
        params={"query": f"workflowType IN ({workflow_name}) AND status IN (RUNNING)", **params},
    )
    assert r.status_code == 200, r.text
    for summary in r.json()["results"]:
        conductor.http.delete(
            f"/api/workflow/{summary['workflowId']}", params={"reason": "terminate - e2e test"}
        )


def _batch_poll(conductor: Conductor, task_type: str, count: int, timeout_ms: int) -> Any:
    """``taskClient.batchPollTasksByTaskType(taskType, "worker", count, timeout)``."""
    return conductor.http.get(
        f"/api/tasks/poll/batch/{task_type}",
        params={"workerid": "worker", "count": count, "timeout": timeout_ms},
    )


def _update_task_sync(conductor: Conductor, workflow_id: str, ref: str) -> Any:
    """``taskClient.updateTaskSync(workflowId, ref, COMPLETED, {updatedBy: e2e})``."""
    return conductor.http.post(
        f"/api/tasks/{workflow_id}/{ref}/COMPLETED/sync", json={"updatedBy": "e2e"}
    )


def _java_task(**fields: Any) -> dict[str, Any]:
    """A task of exec_limit_workflow.json, with its exported default fields."""
    return {
        "inputParameters": {},
        "decisionCases": {},
        "defaultCase": [],
        "forkTasks": [],
        "startDelay": 0,
        "joinOn": [],
        "optional": False,
        "defaultExclusiveJoinTask": [],
        "asyncComplete": False,
        "loopOver": [],
        "onStateChange": {},
        **fields,
    }


def _exec_limit_workflow(name: str, task_name: str) -> dict[str, Any]:
    """e2e/src/test/resources/exec_limit_workflow.json with ``name`` and ``task_name``:
    a FORK_JOIN of six ``exec_limit`` SIMPLE tasks (``exec_limit_5`` ... ``exec_limit_1``,
    ``exec_limit``) and a JOIN on them."""
    refs = ["exec_limit_5", "exec_limit_4", "exec_limit_3", "exec_limit_2", "exec_limit_1"]
    refs.append("exec_limit")
    return {
        "name": name,
        "description": "Exec limit check",
        "version": 1,
        "tasks": [
            _java_task(
                name="fork_task",
                taskReferenceName="fork_task_ref",
                type="FORK_JOIN",
                forkTasks=[
                    [_java_task(name=task_name, taskReferenceName=ref, type="SIMPLE")]
                    for ref in refs
                ],
            ),
            _java_task(
                name="join_task",
                taskReferenceName="join_task_ref",
                type="JOIN",
                joinOn=sorted(refs),
            ),
        ],
        "inputParameters": [],
        "outputParameters": {},
        "failureWorkflow": "",
        "schemaVersion": 2,
        "restartable": True,
        "workflowStatusListenerEnabled": False,
        "ownerEmail": OWNER,
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
        "variables": {},
        "inputTemplate": {},
        "onStateChange": {},
    }


def test_terminate_for_data_inconsistency(conductor: Conductor) -> None:
    # ConcurrentExecLimitTests.testTerminateForDataInconsistency
    workflow_name, task_name = unique("exec_limit_check"), unique("exec_limit")
    _terminate_existing_running_workflows(conductor, workflow_name)
    conductor.register(_exec_limit_workflow(workflow_name, task_name))
    conductor.taskdefs({"name": task_name, "ownerEmail": OWNER, "concurrentExecLimit": 2})

    workflow_id = conductor.start(workflow_name, version=1)
    conductor.run(workflow_id)

    # every 0.2 s (Java: 1 s), for up to 180 s: poll up to 10, never more than 2 handed
    # out, complete them; until the run is COMPLETED
    def probe() -> bool:
        r = _batch_poll(conductor, task_name, 10, 1000)
        if r.status_code == 200:
            tasks = r.json()
            assert len(tasks) <= 2, [t["referenceTaskName"] for t in tasks]
            for t in tasks:
                _update_task_sync(conductor, workflow_id, t["referenceTaskName"])
        assert conductor.run(workflow_id)["status"] == "COMPLETED"
        return True

    deadline = time.monotonic() + 180
    while True:
        try:
            probe()
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_postponed_task_released_on_slot_free(conductor: Conductor) -> None:
    # ConcurrentExecLimitTests.testPostponedTaskReleasedOnSlotFree
    workflow_name, task_name = unique("concurrency_wakeup_check"), unique("concurrency_wakeup")
    _terminate_existing_running_workflows(conductor, workflow_name)
    conductor.taskdefs(
        {"name": task_name, "ownerEmail": OWNER, "retryCount": 0, "concurrentExecLimit": 1}
    )
    branch_a = simple(task_name, f"{task_name}_a")
    branch_b = simple(task_name, f"{task_name}_b")
    fork = {
        "name": "fork",
        "taskReferenceName": "fork_ref",
        "type": "FORK_JOIN",
        "forkTasks": [[branch_a], [branch_b]],
    }
    join = {
        "name": "join",
        "taskReferenceName": "join_ref",
        "type": "JOIN",
        "joinOn": [f"{task_name}_a", f"{task_name}_b"],
    }
    conductor.register(
        workflow(
            workflow_name,
            [fork, join],
            ownerEmail=OWNER,
            timeoutPolicy="ALERT_ONLY",
            timeoutSeconds=0,
        )
    )
    workflow_id = conductor.start(workflow_name, version=1)

    # step 1: one task (concurrentExecLimit=1), polled one at a time for up to 10 s
    first: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not first:
        r = _batch_poll(conductor, task_name, 1, 500)
        assert r.status_code == 200, r.text
        first = r.json()
    assert len(first) == 1, "Expected exactly one task on first poll due to concurrentExecLimit=1"
    task_a = first[0]

    # step 2: for 3 s, polls of up to 10 hand out nothing while A is in progress
    drain_deadline = time.monotonic() + 3
    while time.monotonic() < drain_deadline:
        r = _batch_poll(conductor, task_name, 10, 500)
        assert r.status_code == 200, r.text
        assert r.json() == [], f"Did not expect a second task while A is in progress: {r.text}"

    # step 3: A completes, the slot is free
    completed_at = time.monotonic()
    r = _update_task_sync(conductor, workflow_id, task_a["referenceTaskName"])
    assert r.status_code == 200, r.text

    # step 4: B is handed out within 5 s
    task_b = None
    while time.monotonic() < completed_at + 5:
        r = _batch_poll(conductor, task_name, 1, 500)
        assert r.status_code == 200, r.text
        if r.json():
            task_b = r.json()[0]
            break
    waited_ms = (time.monotonic() - completed_at) * 1000
    assert task_b is not None, (
        "Task B should be pollable within 5s of A completing, but no task was returned "
        f"(waited {waited_ms:.0f} ms)"
    )

    r = _update_task_sync(conductor, workflow_id, task_b["referenceTaskName"])
    assert r.status_code == 200, r.text
    run = conductor.wait_status(workflow_id, "COMPLETED")
    assert run["status"] == "COMPLETED"


# --- WorkflowPriorityTests --------------------------------------------------------------


def test_workflow_priority_workflow_terminated(conductor: Conductor) -> None:
    # WorkflowPriorityTests.testWorkflowPriorityWorkflowTerminated
    workflow_name, task_name = unique("workflow-priority-test"), unique("priority-task")
    # registerWorkflowDef: two SIMPLE tasks, both with the TaskDef of the first
    task_def = {"name": task_name, "ownerEmail": OWNER, "retryCount": 0}
    inputs = {"value": "${workflow.input.value}", "order": "123"}
    tasks = [
        {**simple(name, name, **inputs), "taskDefinition": task_def}
        for name in (task_name, f"{task_name}_2")
    ]
    conductor.register(
        workflow(
            workflow_name,
            tasks,
            ownerEmail=OWNER,
            inputParameters=["value", "inlineValue"],
            description="Workflow to monitor order state",
            timeoutSeconds=600,
            timeoutPolicy="TIME_OUT_WF",
        )
    )
    conductor.taskdefs(task_def)
    # search(0, 5000, "", "*", ...): size 1000, Stepway's limit (module docstring)
    _terminate_existing_running_workflows(
        conductor, workflow_name, start=0, size=1000, sort="", freeText="*"
    )

    def start(priority: int) -> str:
        r = conductor.http.post("/api/workflow", json={"name": workflow_name, "priority": priority})
        assert r.status_code == 200, r.text
        return r.text

    lower_priority_workflow_id = start(2)
    higher_priority_workflow_id = start(1)

    # terminate the higher priority workflow (terminateWorkflows: the bulk API)
    r = conductor.http.post(
        "/api/workflow/bulk/terminate",
        params={"reason": "Terminated by e2e"},
        json=[higher_priority_workflow_id],
    )
    assert r.status_code == 200, r.text

    # the task polled comes from the lower priority workflow (every 1 s, within 5 s)
    def probe() -> bool:
        r = conductor.http.get(f"/api/tasks/poll/{task_name}", params={"workerid": "e2e"})
        assert r.status_code in (200, 204), r.text
        task = r.json() if r.status_code == 200 and r.content else None
        assert task is not None
        assert task["workflowInstanceId"] == lower_priority_workflow_id
        return True

    deadline = time.monotonic() + 5
    while True:
        try:
            probe()
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    _terminate_existing_running_workflows(
        conductor, workflow_name, start=0, size=1000, sort="", freeText="*"
    )
