"""The :class:`~engine.ports.run_signals.RunSignals` adapter over a durabletask client.

A call the backend answers with gRPC ``UNAVAILABLE`` (it cannot be reached: connection
refused or reset, no address answers, the service restarting) or ``DEADLINE_EXCEEDED``
(no answer within the call's deadline) raises
:class:`~engine.ports.run_signals.RunSignalsUnavailable` naming the status code only,
never the details (addresses, the transport's debug string). Every other status
(``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``, which also says a message was larger
than allowed, ``INTERNAL`` ...) raises as the client raised it: trying again would not
change it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import grpc
from durabletask.client import OrchestrationStatus

from engine.ports.run_signals import RunSignalsUnavailable
from protocol.runs import ORCHESTRATOR_NAME

#: what each status code that means "unavailable right now" says of the backend
_OUTAGES = {
    grpc.StatusCode.UNAVAILABLE: "could not be reached",
    grpc.StatusCode.DEADLINE_EXCEEDED: "did not answer in time",
}


@contextlib.contextmanager
def _calling() -> Iterator[None]:
    """Turn the client's outage errors into the port's (module docstring)."""
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code()
        what = _OUTAGES.get(code)
        if what is None:
            raise
        cls = type(exc)
        raise RunSignalsUnavailable(
            f"the durable backend {what} (gRPC {code.name})",
            f"{cls.__module__}.{cls.__qualname__} {code.name}",
            maybe_done=code == grpc.StatusCode.DEADLINE_EXCEEDED,
        ) from exc


class DurableRunSignals:
    """:class:`RunSignals` over a durabletask client (``TaskHubGrpcClient`` or the
    Azure-managed one)."""

    #: every call is a gRPC round trip to the backend
    round_trips = True

    def __init__(self, client: Any, *, finish_wait_seconds: float = 10.0) -> None:
        self._client = client
        self._finish_wait_seconds = finish_wait_seconds

    def raise_event(self, workflow_id: str, event_name: str, data: Any) -> None:
        with _calling():
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
        with _calling():
            try:
                self._client.schedule_new_orchestration(
                    ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id, **kwargs
                )
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                # a run's row reads finished a moment before its orchestration has
                # completed at the backend (the last activity writes it): a restart, retry
                # or rerun right then waits for the completion, then replaces the instance
                try:
                    self._client.wait_for_orchestration_completion(
                        workflow_id, fetch_payloads=False, timeout=self._finish_wait_seconds
                    )
                except TimeoutError as exc:
                    # still running at the backend (slow, or held there): a state that
                    # passes, so the caller is told to try again, not that it failed
                    raise RunSignalsUnavailable(
                        "the run's previous execution did not end at the durable backend "
                        f"within {self._finish_wait_seconds:g} s",
                        "TimeoutError",
                    ) from exc
                self._client.schedule_new_orchestration(
                    ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id, **kwargs
                )

    def start_new_run(self, workflow_id: str, run_input: dict[str, Any]) -> None:
        with _calling():
            try:  # no reuse policy: an instance of this id, finished or not, stays
                self._client.schedule_new_orchestration(
                    ORCHESTRATOR_NAME, input=run_input, instance_id=workflow_id
                )
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise

    def suspend(self, workflow_id: str, reason: str | None = None) -> None:
        with _calling():
            self._client.suspend_orchestration(workflow_id, reason=reason)

    def resume(self, workflow_id: str, reason: str | None = None) -> None:
        with _calling():
            self._client.resume_orchestration(workflow_id, reason=reason)

    def has_orchestration(self, workflow_id: str) -> bool:
        with _calling():
            state = self._client.get_orchestration_state(workflow_id, fetch_payloads=False)
        return state is not None

    def ended_outside(self, workflow_id: str) -> str | None:
        with _calling():
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
