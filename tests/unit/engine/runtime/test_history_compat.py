"""Runs in flight survive an upgrade: histories an earlier interpreter wrote
(tests/data/histories/<version>/, recorded by tests/unit/engine/runtime/histories.py)
are replayed work item by work item by this one, with durabletask's own executor, and
each work item must return the actions it returned then. An action decided differently
anywhere in a history is a run that fails with a non-determinism error after the
upgrade (or, where the replay cannot tell, one that goes another way than it went)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from durabletask import worker

from engine.adapters.run_store_sql import SqlRunStore
from engine.runtime.definition_cache import DefinitionCache
from engine.runtime.encoded_json import EncodedJsonConverter
from engine.runtime.interpreter import make_workflow_interpreter
from engine.runtime.payload_cache import PayloadCache
from protocol.runs import ORCHESTRATOR_NAME
from tests.unit.engine.runtime.histories import CASES, action_summary, event_of

GOLDENS = Path(__file__).parents[3] / "data" / "histories"
LOG = logging.getLogger("tests.history_compat")
INSTANCE = "wf-1"


def _goldens() -> list[Path]:
    return sorted(GOLDENS.glob("*/*.json"))


def replayed(store: SqlRunStore, golden: dict[str, Any]) -> list[list[list[Any]]]:
    """The actions this interpreter returns for each work item of the golden's history."""
    for td in golden["taskDefs"]:
        store.put_task_def(td["name"], td, 1)
    store.put_definition(golden["definition"]["name"], 1, golden["definition"], 1)
    registry = worker._Registry()
    registry.add_named_orchestrator(
        ORCHESTRATOR_NAME,
        make_workflow_interpreter(DefinitionCache(store, PayloadCache(None))),
    )
    history = [event_of(e) for e in golden["history"]]
    answers = []
    for item in golden["items"]:
        executor = worker._OrchestrationExecutor(registry, LOG, EncodedJsonConverter())
        start, new = item["start"], item["new"]
        result = executor.execute(INSTANCE, history[:start], history[start : start + new])
        answers.append([action_summary(a) for a in result.actions])
    return answers


def test_every_case_has_a_golden_of_each_recorded_version() -> None:
    versions = sorted({path.parent.name for path in _goldens()})
    assert versions, f"no goldens under {GOLDENS}"
    for version in versions:
        assert {p.stem for p in (GOLDENS / version).glob("*.json")} == set(CASES), version


@pytest.mark.parametrize(
    "path", _goldens(), ids=lambda p: f"{p.parent.name}/{p.stem}" if isinstance(p, Path) else ""
)
def test_a_history_an_earlier_version_wrote_replays_to_the_same_actions(
    store: SqlRunStore, path: Path
) -> None:
    golden = json.loads(path.read_text())
    expected = [item["actions"] for item in golden["items"]]
    assert replayed(store, golden) == expected


def test_a_replay_that_decides_differently_is_caught(store: SqlRunStore) -> None:
    """The check can fail: a history whose definition changed under it (a task
    renamed, so the run would dispatch another task) does not replay to its actions."""
    [path] = [p for p in _goldens() if p.stem == "worker_sequence"][:1]
    golden = json.loads(path.read_text())
    golden["definition"]["tasks"][1]["taskReferenceName"] = "renamed"
    golden["definition"]["tasks"].append({"name": "c", "taskReferenceName": "c", "type": "SIMPLE"})
    assert replayed(store, golden) != [item["actions"] for item in golden["items"]]
