"""``${workflow.secrets.NAME}`` in an HTTP task, through the engine on the embedded
backend: the request carries the value to the host the secret is bound to; the run's task
row, its history and the recorded output never hold it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from engine.language.definitions import RunStatus
from engine.runtime.builtins.secrets import MASK, Secrets
from engine.runtime.builtins.testing import LocalServer, Reply, Request

TOKEN = "e2e-s3cr3t-7f3a"


def _echo(request: Request) -> Reply:
    return Reply(200, {"sawAuthorization": request.header("Authorization")})


def test_a_secret_reaches_its_host_and_nothing_the_run_keeps(platform: Any) -> None:
    deps = platform.services.activity_deps
    platform.services.activity_deps = dataclasses.replace(
        deps, secrets=Secrets({"API_TOKEN": TOKEN}, {"API_TOKEN": ("127.0.0.1",)})
    )
    with LocalServer(_echo) as server:
        platform.register(
            {
                "name": "with_secret",
                "version": 1,
                "tasks": [
                    {
                        "name": "call",
                        "taskReferenceName": "call",
                        "type": "HTTP",
                        "inputParameters": {
                            "http_request": {
                                "uri": f"{server.url}/items",
                                "method": "POST",
                                "headers": {
                                    "Authorization": "Bearer ${workflow.secrets.API_TOKEN}"
                                },
                                "body": {"id": "${workflow.input.id}"},
                            }
                        },
                    }
                ],
                "outputParameters": {"saw": "${call.output.response.body.sawAuthorization}"},
            }
        )
        workflow_id = platform.start("with_secret", {"id": 7})
        run = platform.wait(workflow_id)
        row = platform.tasks(workflow_id)["call"]
        assert run.status == RunStatus.COMPLETED, (run.reason_for_incompletion, row)
        assert [r.header("Authorization") for r in server.requests] == [f"Bearer {TOKEN}"], row
    assert run.output == {"saw": f"Bearer {MASK}"}
    assert row.input_data["http_request"]["headers"] == {
        "Authorization": "Bearer ${workflow.secrets.API_TOKEN}"
    }
    kept = json.dumps(
        [str(event) for event in platform.client.get_orchestration_history(workflow_id)]
    ) + json.dumps(row.model_dump(mode="json"))
    assert TOKEN not in kept
