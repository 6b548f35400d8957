"""End-to-end harness: the embedded gRPC backend, one engine process (in this process) and
the SQLite run store, queues and local payload store, with no control plane.

``platform.start(name, input)`` starts a run as the workflow API does (run row, then the
orchestration); ``platform.work(type, handler)`` plays a worker that takes a queued task
the way the Task API hands it out (lease, started event, result event).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from durabletask.client import OrchestrationStatus

from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import make_client, start_worker, stop_worker
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.app.host import (
    LocalSettings,
    build_local_services,
    make_engine_worker,
)
from engine.language.definitions import TaskDef, TaskStatus, WorkflowDef
from engine.ports.payload_store import PayloadKind, PayloadStore, offload_if_large
from engine.ports.queue_provisioning import queue_names, queue_settings_for_taskdef
from engine.ports.run_store import NewRun, RunRecord, TaskRecord, TaskUpdate
from engine.runtime.services import EngineServices
from engine.runtime.settlement import MessageSettlement
from protocol.events import (
    TERMINATE_EVENT,
    TaskResultEvent,
    TaskStartedEvent,
    TerminateEvent,
    result_event,
    started_event,
)
from protocol.payload_keys import INPUT_REF, workflow_input_key
from protocol.runs import ORCHESTRATOR_NAME, RunInput


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Platform:
    services: EngineServices
    client: Any
    provisioner: SqliteQueueProvisioner
    #: the engine's durabletask worker (its orchestration sessions: ``engine.sessions``)
    engine: Any = None

    def register_task_def(self, data: dict[str, Any]) -> TaskDef:
        task_def = TaskDef.model_validate(data)
        for name in queue_names(task_def.name):
            self.provisioner.ensure_queue(name, queue_settings_for_taskdef(task_def))
        self.services.run_store.put_task_def(task_def.name, task_def.to_json_dict(), now_ms())
        self.services.definitions.invalidate()
        return task_def

    def register(self, data: dict[str, Any]) -> WorkflowDef:
        definition = WorkflowDef.model_validate(data)
        self.services.run_store.put_definition(
            definition.name, definition.version, definition.to_json_dict(), now_ms()
        )
        self.services.definitions.invalidate(definition.name)
        return definition

    def start(
        self,
        name: str,
        input: dict[str, Any] | None = None,
        *,
        version: int = 1,
        workflow_id: str | None = None,
        priority: int = 0,
        task_to_domain: dict[str, str] | None = None,
        definition_ref: str | None = None,
    ) -> str:
        workflow_id = workflow_id or f"wf-{time.time_ns()}"
        # an input above the threshold is offloaded and travels by reference, as the
        # workflow API does it
        inline, input_ref = offload_if_large(
            self.services.payloads,
            PayloadKind.WORKFLOW_INPUT,
            workflow_input_key(workflow_id),
            input or {},
        )
        self.services.run_store.create_run(
            NewRun(
                workflow_id=workflow_id,
                name=name,
                version=version,
                input=inline if input_ref is None else None,
                input_ref=input_ref,
                priority=priority,
                task_to_domain=task_to_domain or {},
                create_time=now_ms(),
            )
        )
        run_input = RunInput(
            name=name,
            version=version,
            input={INPUT_REF: input_ref} if input_ref else (input or {}),
            priority=priority,
            task_to_domain=task_to_domain or {},
            definition_ref=definition_ref,
        )
        self.client.schedule_new_orchestration(
            ORCHESTRATOR_NAME,
            input=run_input.model_dump(mode="json", by_alias=True),
            instance_id=workflow_id,
        )
        return workflow_id

    def wait(self, workflow_id: str, timeout: float = 60) -> RunRecord:
        state = self.client.wait_for_orchestration_completion(workflow_id, timeout=timeout)
        assert state is not None, f"run {workflow_id} did not finish"
        assert state.runtime_status == OrchestrationStatus.COMPLETED, (
            state.runtime_status,
            state.failure_details,
        )
        run = self.services.run_store.get_run(workflow_id)
        assert run is not None
        return run

    def tasks(self, workflow_id: str) -> dict[str, TaskRecord]:
        return {t.reference_task_name: t for t in self.services.run_store.list_tasks(workflow_id)}

    def take(self, queue: str, timeout: float = 20, *, signal: bool = True) -> dict[str, Any]:
        """Receive one task message (as the Task API's poll would) and defer it; with
        ``signal``, raise ``<taskId>.started`` on the run too (the run does not need it:
        it reads the hand-out from the run store when a deadline is due)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            messages = self.services.queue.receive(queue, 1, max_wait_seconds=1)
            if messages:
                message = messages[0]
                body: dict[str, Any] = message.json()
                self.services.run_store.start_task(
                    body["taskId"],
                    body["attempt"],
                    "test-worker",
                    lease_expires_at=now_ms() + 60_000,
                    now=now_ms(),
                    sequence_number=message.sequence_number,
                    queue_name=queue,
                )
                self.services.queue.defer(queue, message)
                if not signal:
                    return body
                self.client.raise_orchestration_event(
                    body["workflowId"],
                    started_event(body["taskId"]),
                    data=TaskStartedEvent(
                        attempt=body["attempt"], worker_id="test-worker", start_time=now_ms()
                    ).payload(),
                )
                return body
        raise AssertionError(f"no task arrived on queue {queue!r} within {timeout} s")

    def complete(
        self,
        body: dict[str, Any],
        output: dict[str, Any] | None = None,
        status: str = "COMPLETED",
        reason: str | None = None,
    ) -> None:
        """Post a result as the Task API does: row, settle the deferred message (COMPLETED
        only; a failed attempt's message is the engine's to retry or dead-letter), event."""
        store, now = self.services.run_store, now_ms()
        store.update_task(
            body["taskId"],
            body["attempt"],
            TaskUpdate(
                status=TaskStatus(status),
                output_data=output or {},
                reason_for_incompletion=reason,
                worker_id="test-worker",
                end_time=now,
            ),
            now,
        )
        if status == "COMPLETED":
            MessageSettlement(store, self.services.queue).settle_attempt(
                body["taskId"], body["attempt"]
            )
        store.release_lease(body["taskId"], body["attempt"], "test-worker")
        self.client.raise_orchestration_event(
            body["workflowId"],
            result_event(body["taskId"]),
            data=TaskResultEvent(
                attempt=body["attempt"],
                status=status,
                output=output or {},
                reason=reason,
                worker_id="test-worker",
            ).payload(),
        )

    def work(self, queue: str, handler: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        body = self.take(queue)
        self.complete(body, handler(body.get("input") or {}))

    def complete_ref(
        self, workflow_id: str, ref: str, output: dict[str, Any], timeout: float = 20
    ) -> None:
        """Complete a HUMAN (or external WAIT) task by reference name."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.tasks(workflow_id).get(ref)
            if row is not None and not row.status.is_terminal:
                self.client.raise_orchestration_event(
                    workflow_id,
                    result_event(row.task_id),
                    data=TaskResultEvent(
                        attempt=row.attempt, status="COMPLETED", output=output
                    ).payload(),
                )
                return
            time.sleep(0.05)
        raise AssertionError(f"task {ref!r} of {workflow_id} never became pending")

    def terminate(self, workflow_id: str, reason: str) -> None:
        self.client.raise_orchestration_event(
            workflow_id, TERMINATE_EVENT, data=TerminateEvent(reason=reason).payload()
        )


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    with EmbeddedBackend() as server:
        yield server


@contextmanager
def running_platform(
    backend: EmbeddedBackend, settings: LocalSettings, payloads: PayloadStore | None = None
) -> Iterator[Platform]:
    """The engine with its local services (``settings``) on ``backend``, for a test;
    ``payloads`` replaces the local payload store of the engine's I/O."""
    config = BackendConfig.embedded(backend.address)
    services = build_local_services(settings, config)
    if payloads is not None:
        services = dataclasses.replace(services, payloads=payloads)
    if services.activity_deps.evaluators is not None:
        services.activity_deps.evaluators.start()  # as `stepway dev` and `stepway engine`
    worker = make_engine_worker(config, services)
    start_worker(worker)
    client = make_client(config)
    try:
        queues = SqliteQueueProvisioner(settings.queue_path)
        yield Platform(services, client, queues, worker)
    finally:
        stop_worker(worker)
        services.close()


@pytest.fixture
def platform(backend: EmbeddedBackend, tmp_path: Path) -> Iterator[Platform]:
    with running_platform(backend, LocalSettings(data_dir=tmp_path)) as started:
        yield started
