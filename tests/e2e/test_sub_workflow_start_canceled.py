"""A SUB_WORKFLOW attempt that ends while its resolve activity runs (the activity that
writes the child's run row, engine/runtime/activities.py ``resolve_child``; the child's
orchestration is started only after it returns) leaves no child run RUNNING: the child's
row ends TERMINATED, whichever of the two comes first, the attempt's end or the row.

The platform is the embedded one (durable backend, engine, control plane over HTTP),
with one difference: the engine's resolve activity is the real one behind a gate that
holds the next call, before or after it writes the child's row, until the test has seen
the parent act on the attempt's end. Everything is read through the public API.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import uvicorn

from control_plane.api.app import create_app
from control_plane.deps import Deps, Settings
from engine.adapters.backend.config import BackendConfig
from engine.adapters.backend.connect import (
    make_client,
    make_worker,
    register,
    start_worker,
    stop_worker,
)
from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.queue_provisioning_sqlite import SqliteQueueProvisioner
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.app.host import LocalSettings, build_local_services
from engine.runtime.activity_io import ACTIVITY_RESOLVE_CHILD
from engine.runtime.encoded_json import EncodedJsonConverter
from engine.runtime.registry import activities, orchestrators
from protocol.events import TERMINATE_EVENT
from tests.e2e.conductor.harness import (
    SETTLE_SECONDS,
    Conductor,
    simple,
    task,
    unique,
    workflow,
)

Where = Literal["before", "after"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ResolveGate:
    """The resolve activity, holding its next call (once armed) until released: before
    the real activity runs (the child's row is written after the release) or after it
    returned (the row exists; the parent hears of it after the release)."""

    def __init__(self, activity: Callable[[Any, Any], Any]) -> None:
        self._activity = activity
        self._lock = threading.Lock()
        self._armed: Where | None = None
        self.entered = threading.Event()
        self._released = threading.Event()

    def hold(self, where: Where) -> None:
        with self._lock:
            self._armed = where

    def release(self) -> None:
        self._released.set()

    def __call__(self, ctx: Any, raw: Any) -> Any:
        with self._lock:
            where, self._armed = self._armed, None
        if where is None:
            return self._activity(ctx, raw)
        if where == "before":
            self.entered.set()
            self._released.wait(SETTLE_SECONDS * 2)
            return self._activity(ctx, raw)
        result = self._activity(ctx, raw)
        self.entered.set()
        self._released.wait(SETTLE_SECONDS * 2)
        return result


@dataclass
class Platform:
    api: Conductor
    gate: ResolveGate
    #: the durable backend's client: a witness of what the parent's orchestration did
    client: Any

    def handled_event(self, workflow_id: str, name: str | None = None) -> None:
        """Wait until the run's orchestration has handled an event raised on it (one named
        ``name``): the event is in its history once the step that handled it committed."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            for event in self.client.get_orchestration_history(workflow_id):
                if type(event).__name__ == "EventRaisedEvent" and name in (None, event.name):
                    return
            time.sleep(0.02)
        raise AssertionError(f"run {workflow_id} did not handle an event {name or ''}")

    def assert_child_terminated(self, child_name: str, parent_id: str, task_id: str) -> None:
        """The run of ``child_name`` ended TERMINATED by its parent's end, in the search
        and in its own JSON, linked to the parent's task and with no task of its own."""
        found = self.child_of(child_name)
        ended = self.api.run(found["workflowId"])
        assert (found["status"], ended["status"], ended["reasonForIncompletion"]) == (
            "TERMINATED",
            "TERMINATED",
            f"parent {parent_id} ended",
        )
        assert (ended["parentWorkflowId"], ended["parentWorkflowTaskId"], ended["tasks"]) == (
            parent_id,
            task_id,
            [],
        )

    def child_of(self, child_name: str) -> dict[str, Any]:
        """The one run of ``child_name`` as the search shows it, once it ended (or as it
        is after the wait; the test's assertions say what differs). The search reads the
        run store as it is; a read of the run itself would repair a run without an
        orchestration on its own."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            r = self.api.http.get("/api/workflow/search", params={"workflowType": child_name})
            assert r.status_code == 200, r.text
            found: list[dict[str, Any]] = r.json()["results"]
            assert len(found) <= 1, found
            ended = bool(found) and found[0]["status"] != "RUNNING"
            if ended or time.monotonic() > deadline:
                assert found, f"no run of {child_name}"
                return found[0]
            time.sleep(0.05)


@pytest.fixture
def platform(backend: EmbeddedBackend, tmp_path: Path) -> Iterator[Platform]:
    """The platform on the e2e backend (tests/e2e/conftest.py), the gate in its engine."""
    config = BackendConfig.embedded(backend.address)
    services = build_local_services(LocalSettings(data_dir=tmp_path), config)
    bound = activities(services)
    gate = ResolveGate(bound[ACTIVITY_RESOLVE_CHILD])
    # the engine as make_engine_worker builds it, with the gate in the resolve activity's place
    engine = make_worker(config, data_converter=EncodedJsonConverter())
    register(engine, "all", orchestrators(services), {**bound, ACTIVITY_RESOLVE_CHILD: gate})
    start_worker(engine)
    client = make_client(config)
    deps = Deps(
        run_store=services.run_store,
        queue=services.queue,
        provisioner=SqliteQueueProvisioner(tmp_path / "queues.db"),
        payloads=services.payloads,
        signals=DurableRunSignals(client),
    )
    # a terminate answers at once: the parent's end may wait for the resolve held here
    app = create_app(Settings(settle_seconds=0), deps)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "uvicorn did not start"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield Platform(Conductor(http), gate, client)
    finally:
        gate.release()
        server.should_exit = True
        thread.join(10)
        stop_worker(engine)
        services.close()


def _waiting_child() -> dict[str, Any]:
    """A child run that waits for a completion through the API (that never comes)."""
    return workflow(
        unique("held_child"), [{"name": "hold", "taskReferenceName": "hold", "type": "WAIT"}]
    )


def _sub(child: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": "sub",
        "taskReferenceName": "sub",
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": child, "version": 1},
        **fields,
    }


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_parent_terminated_while_its_child_is_resolved_leaves_no_child_running(
    platform: Platform, where: Where
) -> None:
    api, child = platform.api, _waiting_child()
    parent = unique("terminated_parent")
    api.register(child, workflow(parent, [_sub(child["name"])]))
    platform.gate.hold(where)
    parent_id = api.start(parent)
    assert platform.gate.entered.wait(SETTLE_SECONDS), "the child was never resolved"

    r = api.http.delete(f"/api/workflow/{parent_id}", params={"reason": "stop it"})
    assert r.status_code < 300, r.text
    platform.handled_event(parent_id, TERMINATE_EVENT)
    platform.gate.release()

    run = api.wait_status(parent_id, "TERMINATED")
    assert (run["status"], run["reasonForIncompletion"]) == ("TERMINATED", "stop it")
    [sub] = run["tasks"]
    assert (sub["referenceTaskName"], sub["status"]) == ("sub", "CANCELED")
    platform.assert_child_terminated(child["name"], parent_id, sub["taskId"])
    # the canceled task still names its child, as the resolve activity wrote it
    assert sub["subWorkflowId"] == platform.child_of(child["name"])["workflowId"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_fork_branch_canceled_while_its_child_is_resolved_leaves_no_child_running(
    platform: Platform, where: Where
) -> None:
    api, child = platform.api, _waiting_child()
    parent, failing = unique("failing_fork"), unique("fails")
    fork = {
        "name": "fork",
        "taskReferenceName": "fork",
        "type": "FORK_JOIN",
        "forkTasks": [[_sub(child["name"])], [simple(failing, "w")]],
    }
    join = {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["sub", "w"]}
    api.register(child, workflow(parent, [fork, join]))
    platform.gate.hold(where)
    parent_id = api.start(parent)
    assert platform.gate.entered.wait(SETTLE_SECONDS), "the child was never resolved"

    # the sibling branch fails for good: the run fails, canceling the SUB_WORKFLOW branch
    api.fail(api.poll_one(failing), "broken", terminal=True)
    platform.handled_event(parent_id)
    platform.gate.release()

    run = api.wait_status(parent_id, "FAILED")
    assert (run["status"], task(run, "sub")["status"]) == ("FAILED", "CANCELED")
    platform.assert_child_terminated(child["name"], parent_id, task(run, "sub")["taskId"])
