"""The worker loop (docs/architecture.md, "The worker-task protocol") over real HTTP
against the fake Task API."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest
from stepway_worker import (
    InProgress,
    TaskClient,
    TaskContext,
    TerminalError,
    Worker,
    task_log,
    worker_task,
)

from .conftest import fast_settings  # type: ignore[import-not-found]


@pytest.mark.parametrize("next_task_with_result", [True, False])
def test_batch_poll_asks_for_free_slots_only(  # type: ignore[no-untyped-def]
    server, reg, start_worker, next_task_with_result: bool
) -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    @worker_task("slow", registry=reg)
    def slow(i: int) -> dict[str, int]:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.3)
        with lock:
            running -= 1
        return {"i": i}

    ids = [server.enqueue("slow", {"i": i}) for i in range(5)]
    start_worker(threads=3, next_task_with_result=next_task_with_result)
    for task_id in ids:
        assert server.wait_result(task_id)["status"] == "COMPLETED"
    polls = server.polls("slow")
    assert polls[0].count == 3 and polls[0].returned == 3
    assert all(p.count <= 3 for p in polls)
    assert all(p.returned <= p.count for p in polls)
    assert peak == 3
    assert all(p.timeout_ms == 200 and p.worker_id == "test-worker" for p in polls)
    handed_with_results = sum(p.returned for p in server.next_tasks("slow"))
    if next_task_with_result:
        # every thread was busy: the two left came with the results of the first ones
        # (update-v2), in the slots those held, and no poll fetched them
        assert sum(p.returned for p in polls) == 3 and handed_with_results == 2
    else:
        # the two left were fetched by polls sized to the slots freed meanwhile
        assert sum(p.returned for p in polls) == 5 and not server.next_tasks()


def test_idle_worker_backs_off_from_1ms_to_the_poll_interval(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    @worker_task("idle", registry=reg)
    def idle() -> None:
        return None

    start_worker(long_poll_ms=0, poll_interval=0.2)
    time.sleep(1.2)
    polls = server.polls("idle")
    # without the backoff this would be thousands of polls
    # (bounds leave room for a loaded CI machine: the shape of the back-off is checked)
    assert 4 <= len(polls) <= 25, len(polls)
    gaps = [b.started - a.at for a, b in itertools.pairwise(polls)]
    assert gaps[0] < gaps[-1], gaps  # starts short (1 ms) and grows
    assert max(gaps) < 1.0, gaps  # never far beyond the 0.2 s poll interval
    assert gaps[-1] > 0.12, gaps  # settled at the poll interval
    # a task arriving now is picked up, and the wait resets
    task_id = server.enqueue("idle", {})
    server.wait_result(task_id)


class _CountingEvent(threading.Event):
    """The worker's stop signal, counting the pauses taken on it."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses = 0

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            self.pauses += 1
        return super().wait(timeout)


def test_after_an_empty_long_poll_the_worker_polls_again_at_once(server, reg) -> None:  # type: ignore[no-untyped-def]
    """A long poll the server held open and answered empty is followed by the next poll
    with no pause (a task arriving during a pause would wait for it); the backoff of
    the test above is only for polls the server answered at once."""

    @worker_task("quiet", registry=reg)
    def quiet() -> dict[str, bool]:
        return {"done": True}

    worker = Worker(reg, settings=fast_settings(server.url, long_poll_ms=50, poll_interval=30.0))
    stopping = _CountingEvent()
    worker.stopping = stopping
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while len(server.polls("quiet")) < 8:
            assert time.monotonic() < deadline, "the worker stopped polling"
            time.sleep(0.02)
        assert stopping.pauses == 0
        task_id = server.enqueue("quiet", {})
        assert server.wait_result(task_id)["status"] == "COMPLETED"
        assert stopping.pauses == 0
    finally:
        worker.stop(grace=2.0)


def test_in_progress_callbacks_resume_from_the_cursor(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    seen: list[dict[str, Any]] = []

    @worker_task("chunked", registry=reg)
    def chunked(ctx: TaskContext, total: int) -> Any:
        seen.append(dict(ctx.previous_output))
        cursor = int(ctx.previous_output.get("cursor", 0)) + 10
        if cursor < total:
            return InProgress(callback_after_seconds=1, output={"cursor": cursor})
        return {"done": total}

    start_worker()
    task_id = server.enqueue("chunked", {"total": 30})
    t0 = time.monotonic()
    final = server.wait_result(task_id, status="COMPLETED")
    assert final["outputData"] == {"done": 30}
    statuses = [(r["status"], r.get("callbackAfterSeconds")) for r in server.results_for(task_id)]
    assert statuses == [("IN_PROGRESS", 1), ("IN_PROGRESS", 1), ("COMPLETED", None)]
    assert seen == [{}, {"cursor": 10}, {"cursor": 20}]
    assert time.monotonic() - t0 >= 2.0  # the callback delays were honoured


def test_log_lines_reach_the_task_log(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    @worker_task("chatty", registry=reg)
    def chatty(ctx: TaskContext) -> dict[str, bool]:
        task_log("step 1")
        ctx.logger.info("step %d", 2)
        ctx.log("step 3")
        return {"ok": True}

    @worker_task("crash", registry=reg)
    def crash() -> None:
        raise RuntimeError("disk full")

    start_worker()
    a = server.enqueue("chatty", {})
    b = server.enqueue("crash", {})
    server.wait_result(a)
    assert server.logs(a) == ["step 1", "INFO step 2", "step 3"]
    failed = server.wait_result(b)
    assert failed["status"] == "FAILED"
    assert failed["reasonForIncompletion"] == "RuntimeError: disk full"
    (trace,) = server.logs(b)
    assert trace.startswith("Traceback") and "disk full" in trace


def test_terminal_error_is_posted_as_such(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    @worker_task("lodge", registry=reg)
    def lodge(reference: str) -> None:
        raise TerminalError(f"return {reference} was already lodged")

    start_worker()
    task_id = server.enqueue("lodge", {"reference": "R1"})
    result = server.wait_result(task_id)
    assert result["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert result["reasonForIncompletion"] == "return R1 was already lodged"


def test_large_output_is_uploaded_and_only_its_path_posted(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    @worker_task("export", registry=reg)
    def export(n: int) -> dict[str, Any]:
        return {"rows": ["x" * 100] * n}

    start_worker(payload_threshold=2048)
    small = server.enqueue("export", {"n": 2})
    big = server.enqueue("export", {"n": 100})
    assert server.wait_result(small)["outputData"] == {"rows": ["x" * 100] * 2}
    result = server.wait_result(big)
    path = result["externalOutputPayloadStoragePath"]
    assert result["outputData"] == {}
    assert path.startswith("uploads/export/")
    assert json.loads(server.upload(path)) == {"rows": ["x" * 100] * 100}


def test_transient_failures_are_retried_and_a_refusal_is_posted_as_failed(
    server, reg, start_worker
) -> None:  # type: ignore[no-untyped-def]
    @worker_task("t", registry=reg)
    def t() -> dict[str, int]:
        return {"v": 1}

    server.fail_next_results(503, 500, 429)
    w = start_worker()
    first = server.enqueue("t", {})
    assert server.wait_result(first)["outputData"] == {"v": 1}
    assert server.state.result_failures == []

    # a 4xx refusal is not dropped: a FAILED result naming it follows at once
    server.fail_next_results(400)
    second = server.enqueue("t", {})
    refused = server.wait_result(second)
    assert refused["status"] == "FAILED" and refused["outputData"] == {}
    reason = refused["reasonForIncompletion"]
    assert "400 injected failure" in reason and "outputData of 7 bytes" in reason, reason

    # the FAILED replacement refused too: dropped, and a later task is not stuck behind it
    server.fail_next_results(400, 400)
    third = server.enqueue("t", {})
    deadline = time.monotonic() + 5
    while w.outbox.dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.outbox.dropped == 1 and server.results_for(third) == []
    fourth = server.enqueue("t", {})
    assert server.wait_result(fourth)["status"] == "COMPLETED"


def test_a_stale_attempt_409_is_dropped(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()

    @worker_task("s", registry=reg)
    def s() -> dict[str, int]:
        gate.wait(5)
        return {"v": 1}

    w = start_worker()
    task_id = server.enqueue("s", {})
    deadline = time.monotonic() + 5
    while not any(p.returned for p in server.polls("s")) and time.monotonic() < deadline:
        time.sleep(0.01)
    with server.cond:  # the lease moves to another worker meanwhile
        server.state.leases[task_id] = "someone-else"
    gate.set()
    deadline = time.monotonic() + 5
    while w.outbox.dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.outbox.dropped == 1
    assert server.results_for(task_id) == []
    assert len(w.outbox) == 0


def test_result_survives_a_task_api_restart(server, reg, start_worker) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    running = threading.Event()

    @worker_task("r", registry=reg)
    def r() -> dict[str, str]:
        running.set()
        gate.wait(10)
        return {"state": "done"}

    w = start_worker()
    task_id = server.enqueue("r", {})
    # the handler has the task (the fake records a poll's tasks before it has sent them)
    assert running.wait(5)
    server.stop()  # the Task API goes away with the task in flight
    gate.set()  # the handler completes while it is down
    deadline = time.monotonic() + 5
    while len(w.outbox) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(w.outbox) == 1  # queued in memory
    time.sleep(1.0)  # several failed retries
    assert server.results_for(task_id) == []
    server.start()  # back on the same port, same state
    result = server.wait_result(task_id, timeout=5)
    assert result["outputData"] == {"state": "done"}
    deadline = time.monotonic() + 2
    while len(w.outbox) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(w.outbox) == 0


def test_a_task_handed_out_with_a_result_while_stopping_still_runs(server, reg) -> None:  # type: ignore[no-untyped-def]
    """A stop that comes while update-v2 is in flight: the task it hands out is
    executed and its result posted (by the plain post, as the worker is stopping)
    before the worker stops; it is not dropped."""
    done: list[int] = []

    @worker_task("handover", registry=reg)
    def handover(n: int) -> dict[str, int]:
        done.append(n)
        return {"n": n}

    stopper: list[threading.Thread] = []

    class StopDuringPost(TaskClient):
        def update_v2(self, result, *, headers=None):  # type: ignore[no-untyped-def]
            if not stopper:  # the first post: the worker is asked to stop meanwhile
                stopper.append(threading.Thread(target=worker.stop, kwargs={"grace": 5.0}))
                stopper[0].start()
                assert worker.stopping.wait(5)
            return super().update_v2(result, headers=headers)

    first = server.enqueue("handover", {"n": 1})
    second = server.enqueue("handover", {"n": 2})
    settings = fast_settings(server.url)
    worker = Worker(reg, settings=settings, client=StopDuringPost(server.url, timeout=5.0))
    worker.start()
    server.wait_result(first)
    assert server.wait_result(second)["outputData"] == {"n": 2}
    stopper[0].join(10)
    assert done == [1, 2]
    (handout,) = server.next_tasks("handover")
    assert handout.returned == 1  # the second came with the first's result
    # the second's result went by the plain post: a stopping worker takes no task
    assert len(server.next_tasks()) == 1
