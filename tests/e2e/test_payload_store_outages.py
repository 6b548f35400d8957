"""A payload store that is unavailable for a moment while the engine works: the Blob
adapter on Azurite, reached through a real HTTP peer that answers one write with 503
(the service busy). The built-in task's activity that met it runs again on a durable
timer, a WORKER dispatch is retried, and the run completes instead of ending FAILED."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.credentials import AzureNamedKeyCredential

from engine.adapters.backend.embedded import EmbeddedBackend
from engine.adapters.payload_blob import BlobPayloadStore
from engine.app.host import LocalSettings
from engine.language.definitions import RunStatus, TaskStatus
from engine.runtime.snapshots import publish_snapshot_of
from tests.contract.test_payload_store_contract import AZURITE_ACCOUNT, AZURITE_KEY, AZURITE_URL
from tests.e2e.conftest import Platform, running_platform
from tests.http_peers import BlobPeer, Failure, blob_peer

pytestmark = [
    pytest.mark.azurite,
    pytest.mark.skipif(
        not AZURITE_URL, reason="needs STEPWAY_TEST_AZURITE_BLOB_URL with azurite-blob running"
    ),
]

#: a script whose result (20 000 characters) is above the output threshold: offloaded
BIG = '(function () { var s = ""; for (var i = 0; i < 2000; i++) s += "xxxxxxxxxx"; return s; })()'


@pytest.fixture
def blob_platform(backend: EmbeddedBackend, tmp_path: Path) -> Iterator[tuple[Platform, BlobPeer]]:
    """The e2e platform whose engine keeps payloads in Blob (Azurite) behind a peer."""
    assert AZURITE_URL
    with blob_peer(upstream=AZURITE_URL.rsplit("/", 1)[0]) as peer:
        store = BlobPayloadStore(
            f"{peer.url}/{AZURITE_ACCOUNT}",
            f"t-{uuid.uuid4().hex[:20]}",
            AzureNamedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY),
            create_container=True,
            retry_total=0,  # the SDK gives up at once: the engine's retry is under test
        )
        try:
            with running_platform(backend, LocalSettings(data_dir=tmp_path), store) as started:
                yield started, peer
        finally:
            store._container.delete_container()
            store.close()


def test_a_builtin_task_whose_output_meets_a_busy_payload_store_runs_again_and_completes(
    blob_platform: tuple[Platform, BlobPeer],
) -> None:
    platform, peer = blob_platform
    platform.register(
        {
            "name": "big_output",
            "tasks": [
                {
                    "name": "big",
                    "taskReferenceName": "big",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "javascript", "expression": BIG},
                },
                {
                    "name": "size",
                    "taskReferenceName": "size",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "javascript",
                        "expression": "$.s.length",
                        "s": "${big.output.result}",
                    },
                },
            ],
            "outputParameters": {"size": "${size.output.result}"},
        }
    )
    peer.fail(Failure(503, "ServerBusy"), lambda method, path: "-output.json" in path)
    workflow_id = platform.start("big_output")
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"size": 20_000}
    tasks = platform.tasks(workflow_id)
    assert tasks["big"].status == TaskStatus.COMPLETED
    assert tasks["big"].attempt == 1  # the same attempt ran again, not a retry of a failure
    assert tasks["big"].output_ref is not None
    [(method, path, status)] = peer.failed
    assert (method, status) == ("PUT", 503)
    assert path.split("?")[0].endswith(tasks["big"].output_ref)


def test_a_worker_task_whose_large_input_meets_a_busy_payload_store_is_queued_once(
    blob_platform: tuple[Platform, BlobPeer],
) -> None:
    platform, peer = blob_platform
    platform.register_task_def({"name": "ship", "retryCount": 0})
    platform.register(
        {
            "name": "big_input",
            "tasks": [
                {
                    "name": "ship",
                    "taskReferenceName": "ship",
                    "type": "WORKER",
                    "inputParameters": {"text": "${workflow.input.text}", "n": 1},
                }
            ],
            "outputParameters": {"shipped": "${ship.output.shipped}"},
        }
    )
    # the task's input, written by the dispatch (the run's input was written at its start)
    peer.fail(Failure(503, "ServerBusy"), lambda method, path: "-1-input.json" in path)
    workflow_id = platform.start("big_input", {"text": "y" * 20_000})
    body = platform.take("ship")
    assert body["attempt"] == 1 and body.get("inputRef")
    assert platform.services.payloads is not None
    assert b"y" * 20_000 in platform.services.payloads.get(body["inputRef"])
    platform.complete(body, {"shipped": True})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"shipped": True}
    assert [status for *_, status in peer.failed] == [503]


def test_a_decision_that_needs_a_payload_of_a_busy_store_is_made_again_later(
    blob_platform: tuple[Platform, BlobPeer],
) -> None:
    """The interpreter reads the run's offloaded input to decide its SWITCH: an outage
    of the store then is not the run's failure. The work item goes back to the backend
    undecided and is decided again (from the same history) once the store answers."""
    platform, peer = blob_platform
    platform.register(
        {
            "name": "route_big",
            "tasks": [
                {
                    "name": "route",
                    "taskReferenceName": "route",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "kind",
                    "inputParameters": {"kind": "${workflow.input.kind}"},
                    "decisionCases": {
                        "a": [
                            {
                                "name": "mark",
                                "taskReferenceName": "mark",
                                "type": "SET_VARIABLE",
                                "inputParameters": {"route": "a"},
                            }
                        ]
                    },
                    "defaultCase": [],
                }
            ],
            "outputParameters": {
                "kind": "${workflow.input.kind}",
                "route": "${workflow.variables.route}",
            },
        }
    )
    for _ in range(2):  # the first decision, and the one after it was given back
        peer.fail(
            Failure(503, "ServerBusy"),
            lambda method, path: method == "GET" and path.endswith("/input.json"),
        )
    workflow_id = platform.start("route_big", {"kind": "a", "pad": "y" * 20_000})
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"kind": "a", "route": "a"}
    assert [status for *_, status in peer.failed] == [503, 503]


def test_a_run_whose_definition_snapshot_cannot_be_read_now_is_decided_later(
    blob_platform: tuple[Platform, BlobPeer],
) -> None:
    """An engine process (new, or one that never ran this definition) reads the run's
    definition snapshot from the store before its first decision: a store outage then
    delays the run instead of failing it."""
    platform, peer = blob_platform
    definition = platform.register(
        {
            "name": "snapshotted",
            "tasks": [
                {
                    "name": "mark",
                    "taskReferenceName": "mark",
                    "type": "SET_VARIABLE",
                    "inputParameters": {"seen": "${workflow.input.n}"},
                }
            ],
            "outputParameters": {"seen": "${workflow.variables.seen}"},
        }
    )
    store = platform.services.payloads
    ref = publish_snapshot_of(platform.services.run_store, store, definition.to_json_dict())
    assert ref is not None
    peer.fail(
        Failure(503, "ServerBusy"),
        lambda method, path: method == "GET" and path.endswith(ref),
    )
    workflow_id = platform.start("snapshotted", {"n": 7}, definition_ref=ref)
    run = platform.wait(workflow_id)
    assert run.status == RunStatus.COMPLETED, run.reason_for_incompletion
    assert run.output == {"seen": 7}
    assert [(method, status) for method, _, status in peer.failed] == [("GET", 503)]
