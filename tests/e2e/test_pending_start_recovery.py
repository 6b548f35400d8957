"""A start stored but not scheduled (the control plane stopped in between) is scheduled
by the next control plane over the same store, and its run completes: the real engine,
the embedded backend and the SQLite run store (control_plane/services/run_starts.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from control_plane.api.app import create_app
from control_plane.deps import Deps, Settings
from control_plane.services.workflows import StartWorkflowRequest
from engine.adapters.run_signals_durable import DurableRunSignals
from engine.language.definitions import RunStatus


def test_a_pending_start_left_by_a_stopped_control_plane_runs_to_its_end(
    platform: Any,
) -> None:
    platform.register(
        {
            "name": "left_behind",
            "version": 1,
            "tasks": [
                {
                    "name": "set",
                    "taskReferenceName": "s",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": "${workflow.input.n}"},
                }
            ],
            "outputParameters": {"seen": "${workflow.variables.seen}"},
        }
    )
    deps = Deps(
        run_store=platform.services.run_store,
        queue=platform.services.queue,
        provisioner=platform.provisioner,
        payloads=platform.services.payloads,
        signals=DurableRunSignals(platform.client),
        local_adapters=True,
    )
    settings = Settings(settle_seconds=0)
    # the first control plane prepares the start and stores it with its pending start,
    # then stops before scheduling it (made without local adapters, so that it looks for
    # no pending start itself)
    first = create_app(settings, replace(deps, local_adapters=False)).state.workflow_service
    request = StartWorkflowRequest(name="left_behind", input={"n": 7})
    run, orchestration_input = first._prepare(request, None, None, first.current_stamp(request))
    assert platform.services.run_store.create_run(run, start=orchestration_input).created
    assert platform.services.run_store.has_pending_start(run.workflow_id)

    create_app(settings, deps)  # the next control plane, at start-up

    done = platform.wait(run.workflow_id)
    assert done.status == RunStatus.COMPLETED and done.output == {"seen": 7}
    assert not platform.services.run_store.has_pending_start(run.workflow_id)
