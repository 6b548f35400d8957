"""The worker loop (docs/architecture.md, "The worker-task protocol"), per task type:

poller thread, forever:
    wait for a free slot
    tasks = GET /api/tasks/poll/batch/{type}?count={free slots}&timeout={long poll}
    if none: poll again at once if the server held the poll (long poll), else wait
             (1 ms, doubling up to the poll interval); continue
    hand each task to the type's thread pool
handler thread, for each task it is handed:
    run the handler
    POST /api/tasks/update-v2 (the result) -> the next task of the type, or none (204)
    while there is a next task: run it in this thread and post its result the same way
    (a busy worker makes one request per task; with ``next_task_with_result`` off, or
    while stopping, the result goes to POST /api/tasks and the thread takes no task)
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.trace import TracerProvider

from stepway_worker.auth import TokenProvider, token_provider_from_env
from stepway_worker.client import RejectedError, TaskClient, TransientError
from stepway_worker.context import TaskContext
from stepway_worker.delivery import Outbox, make_result, upload
from stepway_worker.registry import Handler, Outcome, Registry, registry
from stepway_worker.settings import TypeSettings, WorkerSettings
from stepway_worker.tracing import WorkerTracing

log = logging.getLogger("stepway_worker")

MIN_WAIT = 0.001


def build_context(
    task: dict[str, Any], task_type: str, client: TaskClient, worker_id: str
) -> TaskContext:
    """The handler's view of a Task JSON (or of a queue message, see ``functions``)."""
    task_id = str(task["taskId"])
    raw_input = task.get("inputData")
    raw_output = task.get("outputData")

    def sink(tid: str, line: str) -> bool:
        try:
            client.log(tid, line)
            return True
        except Exception as exc:
            log.debug("log line of task %s not posted: %s", tid, exc)
            return False

    def uploader(data: bytes, name: str, content_type: str) -> tuple[str, str]:
        return upload(client, task_type, task_id, data, name, content_type)

    return TaskContext(
        task_id=task_id,
        task_type=task_type,
        workflow_id=task.get("workflowInstanceId") or task.get("workflowId"),
        reference_name=task.get("referenceTaskName") or task.get("taskRef"),
        attempt=int(task.get("attempt") or int(task.get("retryCount") or 0) + 1),
        poll_count=int(task.get("pollCount") or 0),
        input=raw_input if isinstance(raw_input, dict) else {},
        previous_output=raw_output if isinstance(raw_output, dict) else {},
        task=task,
        worker_id=worker_id,
        sink=sink,
        uploader=uploader,
    )


class _TypeRunner:
    """Poller thread plus a pool of handler threads for one task type."""

    def __init__(self, worker: Worker, handler: Handler, settings: TypeSettings) -> None:
        self.worker = worker
        self.handler = handler
        self.settings = settings
        self.in_flight = 0
        self._cond = threading.Condition()
        self._work: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._poller: threading.Thread | None = None
        self.polls = 0
        self.executed = 0
        #: tasks update-v2 handed out with a result (not polled)
        self.handed_with_result = 0
        self._last_poll_warning = 0.0

    def start(self) -> None:
        for i in range(self.settings.threads):
            t = threading.Thread(
                target=self._work_loop,
                name=f"stepway-{self.settings.task_type}-{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)
        self._poller = threading.Thread(
            target=self._poll_loop, name=f"stepway-poll-{self.settings.task_type}", daemon=True
        )
        self._poller.start()

    # --- polling ---------------------------------------------------------------------

    def _free_slots(self) -> int:
        with self._cond:
            while self.in_flight >= self.settings.threads and not self.worker.stopping.is_set():
                self._cond.wait(0.5)
            return self.settings.threads - self.in_flight

    def _poll_loop(self) -> None:
        stopping = self.worker.stopping
        ws = self.worker.settings
        wait = MIN_WAIT
        while not stopping.is_set():
            free = self._free_slots()
            if stopping.is_set() or free <= 0:
                continue
            try:
                self.polls += 1
                asked = time.monotonic()
                tasks = self.worker.client.poll(
                    self.settings.task_type,
                    worker_id=ws.worker_id,
                    count=free,
                    timeout_ms=ws.long_poll_ms,
                    domain=self.settings.domain,
                )
            except TransientError as exc:
                now = time.monotonic()
                if now - self._last_poll_warning > 60:
                    self._last_poll_warning = now
                    log.warning("poll of %s failed, retrying: %s", self.settings.task_type, exc)
                stopping.wait(self.settings.poll_interval)
                continue
            except RejectedError as exc:
                log.error("poll of %s refused: %s", self.settings.task_type, exc)
                stopping.wait(max(self.settings.poll_interval, 1.0))
                continue
            except Exception:
                log.exception("poll of %s: unexpected error", self.settings.task_type)
                stopping.wait(self.settings.poll_interval)
                continue
            if self._last_poll_warning:
                self._last_poll_warning = 0.0
                log.info("poll of %s works again", self.settings.task_type)
            if not tasks:
                if ws.long_poll_ms > 0 and time.monotonic() - asked >= ws.long_poll_ms / 2000:
                    # The server held the poll open: it already waited for us, and any
                    # pause here is a pause in which an arriving task waits.
                    wait = MIN_WAIT
                    continue
                stopping.wait(wait)
                wait = min(wait * 2, self.settings.poll_interval)
                continue
            wait = MIN_WAIT
            with self._cond:
                self.in_flight += len(tasks)
            for task in tasks:
                self._work.put(task)

    # --- executing -------------------------------------------------------------------

    def _work_loop(self) -> None:
        while True:
            task = self._work.get()
            if task is None:
                return
            # A task that update-v2 handed out with the result of the one before runs
            # in this thread, in the slot the one before held: never dropped, even
            # while stopping (as the tasks of a last poll, see join_poller).
            while task is not None:
                next_task = None
                try:
                    next_task = self._execute(task)
                except Exception:
                    log.exception("task %s: unexpected error in the worker", task.get("taskId"))
                finally:
                    with self._cond:
                        self.executed += 1
                        if next_task is None:
                            self.in_flight -= 1
                            self._cond.notify_all()
                task = next_task

    def _execute(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """Run the handler and post the result; the next task when the post (update-v2)
        handed one out to this thread."""
        if "taskId" not in task:
            log.error("%s: a polled task without taskId: %r", self.settings.task_type, task)
            return None
        ws = self.worker.settings
        tracing = self.worker.tracing
        with tracing.execute(task, self.settings.task_type) as span:
            ctx = build_context(task, self.settings.task_type, self.worker.client, ws.worker_id)
            started = time.monotonic()
            outcome: Outcome = self.handler.execute(ctx)
            tracing.finished(span, outcome.status)
            log.info(
                "task %s (%s) %s in %.3f s",
                ctx.task_id,
                self.settings.task_type,
                outcome.status,
                time.monotonic() - started,
            )
            task.setdefault("taskType", self.settings.task_type)
            pending = make_result(
                task,
                outcome,
                worker_id=ws.worker_id,
                payload_threshold=self.settings.payload_threshold,
                logs=ctx.take_pending_logs(),
            )
            pending.traceparent = tracing.carried(span, task)
            pending.attempt = ctx.attempt
            if ws.next_task_with_result and not self.worker.stopping.is_set():
                # this thread is free once the result is posted: one request posts it
                # and takes the next task of the type
                next_task = self.worker.outbox.deliver_and_take_next(pending)
                if next_task is not None:
                    self.handed_with_result += 1
                return next_task
            self.worker.outbox.deliver(pending)
            return None

    def join_poller(self, deadline: float) -> None:
        if self._poller is not None:
            self._poller.join(max(0.0, deadline - time.monotonic()))
            if self._poller.is_alive():
                log.warning("%s: a poll is still open at shutdown", self.settings.task_type)
        # tasks a last poll returned are queued before these, so they still run
        for _ in self._threads:
            self._work.put(None)

    def join(self, deadline: float) -> bool:
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)


class Worker:
    """Runs the handlers of a registry (default: every ``@worker_task``)."""

    def __init__(
        self,
        handlers: Registry | Iterable[Handler] | None = None,
        *,
        settings: WorkerSettings | None = None,
        tokens: TokenProvider | None = None,
        client: TaskClient | None = None,
        task_types: Iterable[str] | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        """``tracer_provider`` receives the worker's spans (default: OpenTelemetry's
        global provider, a no-op until the process configures one)."""
        self.settings = settings or WorkerSettings.from_env()
        source = registry if handlers is None else handlers
        chosen = source.handlers() if isinstance(source, Registry) else list(source)
        if task_types is not None:
            wanted = set(task_types)
            chosen = [h for h in chosen if h.task_type in wanted]
        if not chosen:
            raise ValueError("no task handlers to run: register some with @worker_task")
        self.handlers = chosen
        self.client = client or TaskClient(
            self.settings.server_url,
            tokens=tokens or token_provider_from_env(self.settings.env or None),
            timeout=self.settings.http_timeout,
        )
        self.tracing = WorkerTracing(tracer_provider)
        self.outbox = Outbox(
            self.client,
            initial=self.settings.retry_initial,
            maximum=self.settings.retry_max,
            tracing=self.tracing,
        )
        self.stopping = threading.Event()
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self.runners = [
            _TypeRunner(
                self,
                h,
                self.settings.for_type(
                    h.task_type,
                    threads=h.threads,
                    poll_interval=h.poll_interval,
                    domain=h.domain,
                    payload_threshold=h.payload_threshold,
                ),
            )
            for h in self.handlers
        ]
        self._started = False

    def start(self) -> Worker:
        if not self._started:
            self._started = True
            self.outbox.start()
            for runner in self.runners:
                runner.start()
            log.info(
                "worker %s polling %s at %s",
                self.settings.worker_id,
                ", ".join(
                    f"{r.settings.task_type}"
                    + (f"@{r.settings.domain}" if r.settings.domain else "")
                    + f" x{r.settings.threads}"
                    for r in self.runners
                ),
                self.settings.server_url,
            )
        return self

    def request_stop(self) -> None:
        """Ask ``run`` to stop (safe from a signal handler)."""
        self._stop_requested.set()

    def stop(self, grace: float | None = None) -> bool:
        """Stop polling, let in-flight handlers finish and post their results, within
        ``grace`` seconds (default ``settings.shutdown_grace``). True when everything
        finished and every result was settled."""
        grace = self.settings.shutdown_grace if grace is None else grace
        deadline = time.monotonic() + grace
        self.stopping.set()
        for runner in self.runners:
            runner.join_poller(deadline)
        finished = all(runner.join(deadline) for runner in self.runners)
        if not finished:
            log.warning("shutdown: handlers still running after %.1f s, abandoned", grace)
        drained = self.outbox.drain(max(0.0, deadline - time.monotonic()))
        if not drained:
            log.error("shutdown: %d results could not be posted", len(self.outbox))
        self.outbox.stop()
        self.client.close()
        self._stopped.set()
        return finished and drained

    def run(self, *, install_signals: bool = True) -> bool:
        """Poll until SIGTERM/SIGINT (or ``request_stop``), then stop gracefully."""
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda signum, frame: self.request_stop())
        self.start()
        while not self._stop_requested.wait(0.2):
            pass
        log.info("worker %s stopping", self.settings.worker_id)
        return self.stop()

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stopped.is_set():
            self.stop()


def run(
    *,
    threads: int | None = None,
    poll_interval: float | None = None,
    domain: str | None = None,
    worker_id: str | None = None,
    server_url: str | None = None,
    payload_threshold: int | None = None,
    task_types: Iterable[str] | None = None,
    handlers: Registry | Iterable[Handler] | None = None,
    tracer_provider: TracerProvider | None = None,
) -> bool:
    """Run every registered handler until SIGTERM. Arguments override the
    ``STEPWAY_*`` environment; ``STEPWAY_TASK_<TYPE>_*`` overrides both per type."""
    settings = WorkerSettings.from_env(
        threads=threads,
        poll_interval=poll_interval,
        domain=domain,
        worker_id=worker_id,
        server_url=server_url,
        payload_threshold=payload_threshold,
    )
    return Worker(
        handlers, settings=settings, task_types=task_types, tracer_provider=tracer_provider
    ).run()
