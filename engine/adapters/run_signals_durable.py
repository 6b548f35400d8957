"""The :class:`~engine.ports.run_signals.RunSignals` adapter over a durabletask client."""

from __future__ import annotations

from typing import Any

import grpc
from durabletask.client import OrchestrationStatus

from protocol.runs import ORCHESTRATOR_NAME


class DurableRunSignals:
    """:class:`RunSignals` over a durabletask client (``TaskHubGrpcClient`` or the
    Azure-managed one)."""

    def __init__(self, client: Any, *, finish_wait_seconds: float = 10.0) -> None:
        self._client = client
        self._finish_wait_seconds = finish_wait_seconds

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        self._client.raise_orchestration_event(workflow_id, event_name, data=data)

    def start_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        kwargs: dict[str, Any] = {}
        try:  # replace a finished instance of the same id (restart/retry)
            from durabletask.internal import orchestrator_service_pb2 as pb

            kwargs["reuse_id_policy"] = pb.OrchestrationIdReusePolicy(
                replaceableStatus=[
                    pb.ORCHESTRATION_STATUS_COMPLETED,
                    pb.ORCHESTRATION_STATUS_FAILED,
                    pb.ORCHESTRATION_STATUS_TERMINATED,
                ]
            )
        except (ImportError, AttributeError, TypeError, ValueError):
            kwargs = {}
        try:
            self._client.schedule_new_orchestration(
                ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id, **kwargs
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
            # a run's row reads finished a moment before its orchestration has completed
            # at the backend (the last activity writes it): a restart, retry or rerun
            # right then waits for the completion, then replaces the instance
            self._client.wait_for_orchestration_completion(
                workflow_id, fetch_payloads=False, timeout=self._finish_wait_seconds
            )
            self._client.schedule_new_orchestration(
                ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id, **kwargs
            )

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        try:  # no reuse policy: an instance of this id, finished or not, stays
            self._client.schedule_new_orchestration(
                ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        self._client.suspend_orchestration(workflow_id, reason=reason)

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        self._client.resume_orchestration(workflow_id, reason=reason)

    def ended_outside(self, workflow_id: str) -> str | None:
        state = self._client.get_orchestration_state(workflow_id, fetch_payloads=False)
        if state is None:
            return "its orchestration no longer exists in the durable backend"
        status = state.runtime_status
        if status == OrchestrationStatus.FAILED:
            details = state.failure_details
            message = details.message if details is not None else "no details"
            return f"its orchestration failed in the durable backend: {message}"
        if status == OrchestrationStatus.TERMINATED:
            return "its orchestration was terminated in the durable backend"
        return None
