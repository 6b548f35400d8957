from __future__ import annotations

from typing import Any

from engine.decider import Decider, TaskOutcome
from engine.language.definitions import TaskStatus, WorkflowDef
from engine.runtime.payload_refs import dereference, has_pointers, is_pointer, pointer

STORE = {"ref-1": {"rows": [{"id": "a"}, {"id": "b"}], "n": 2}}


def test_dereference_follows_paths_and_leaves_other_values() -> None:
    value = {
        "all": pointer("ref-1", "$"),
        "first": pointer("ref-1", "$.rows[0].id"),
        "ids": pointer("ref-1", "$.rows[*].id"),
        "nested": [pointer("ref-1", "$.n"), 3],
        "plain": {"$payloadRef": "x"},  # not a pointer: no path
    }
    assert has_pointers(value) and is_pointer(value["all"])
    assert dereference(value, STORE.__getitem__) == {
        "all": STORE["ref-1"],
        "first": "a",
        "ids": ["a", "b"],
        "nested": [2, 3],
        "plain": {"$payloadRef": "x"},
    }


def _decider(loader: Any) -> Decider:
    definition = WorkflowDef.model_validate(
        {
            "name": "p",
            "tasks": [
                {"name": "a", "taskReferenceName": "a", "type": "WORKER"},
                {
                    "name": "b",
                    "taskReferenceName": "b",
                    "type": "WORKER",
                    "inputParameters": {"rows": "${a.output.rows}", "text": "n=${a.output.n}"},
                },
            ],
        }
    )
    return Decider(definition, payloads=loader)


def _second_input(decider: Decider, output: dict[str, Any]) -> dict[str, Any]:
    state = decider.start(workflow_id="w", input={}, now_ms=0)
    first = decider.decide(state, 0).actions[0]
    decider.on_outcome(
        state,
        TaskOutcome(task_id=first.task_id, attempt=1, status=TaskStatus.COMPLETED, output=output),
        1,
    )
    return decider.decide(state, 1).actions[0].input


def test_a_whole_reference_to_an_offloaded_output_stays_a_pointer() -> None:
    loads: list[str] = []

    def loader(ref: str) -> Any:
        loads.append(ref)
        return STORE[ref]

    got = _second_input(_decider(loader), {"outputRef": "ref-1"})
    # interpolation needs the value (it is loaded); a whole reference does not
    assert got == {"rows": pointer("ref-1", "$.rows"), "text": "n=2"}
    assert set(loads) == {"ref-1"}


def test_inline_outputs_are_resolved_as_usual() -> None:
    got = _second_input(_decider(STORE.__getitem__), {"rows": [1], "n": 1})
    assert got == {"rows": [1], "text": "n=1"}
