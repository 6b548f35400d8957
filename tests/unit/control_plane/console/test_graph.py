"""The run graph: every task of a nested definition drawn once, with its run status, in a
layout where no two tasks overlap and every line starts and ends on the picture."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from control_plane.console.graph import NodeState, node_states, render_graph
from engine.language.definitions import TaskStatus, WorkflowDef
from engine.ports.run_store import TaskRecord

REPO = Path(__file__).resolve().parents[4]
SVG = "{http://www.w3.org/2000/svg}"


def _nested() -> WorkflowDef:
    return WorkflowDef.model_validate(
        {
            "name": "nested",
            "tasks": [
                {"name": "a", "taskReferenceName": "first", "type": "WORKER"},
                {
                    "name": "fork",
                    "taskReferenceName": "fork",
                    "type": "FORK_JOIN",
                    "forkTasks": [
                        [{"name": "b", "taskReferenceName": "left", "type": "WORKER"}],
                        [
                            {
                                "name": "loop",
                                "taskReferenceName": "loop",
                                "type": "DO_WHILE",
                                "loopCondition": "$.loop['iteration'] < 2",
                                "loopOver": [
                                    {"name": "c", "taskReferenceName": "step", "type": "WORKER"},
                                    {
                                        "name": "child",
                                        "taskReferenceName": "child",
                                        "type": "SUB_WORKFLOW",
                                        "subWorkflowParam": {"name": "other"},
                                    },
                                ],
                            }
                        ],
                    ],
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN",
                 "joinOn": ["left", "loop"]},
                {
                    "name": "pick",
                    "taskReferenceName": "pick",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "k",
                    "decisionCases": {
                        "x": [{"name": "d", "taskReferenceName": "case_x", "type": "WORKER"}],
                        "<y>": [],
                    },
                    "defaultCase": [
                        {"name": "e", "taskReferenceName": "other_case", "type": "WORKER"}
                    ],
                },
            ],
        }
    )  # fmt: skip


def _row(ref: str, status: TaskStatus, seq: int, kind: str = "WORKER", **kw: Any) -> TaskRecord:
    return TaskRecord(
        task_id=f"id-{ref}",
        workflow_id="w",
        reference_task_name=ref,
        task_type=kind,
        status=status,
        seq=seq,
        **kw,
    )


def _tasks(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    found: dict[str, ET.Element] = {}
    for el in root.iter():
        ref = el.get("data-ref")
        if ref is not None:
            assert ref not in found, f"{ref} drawn twice"
            found[ref] = el
    return found


def test_every_task_is_drawn_once_with_its_status() -> None:
    definition = _nested()
    rows = [
        _row("first", TaskStatus.COMPLETED, 1),
        _row("fork", TaskStatus.COMPLETED, 2, "FORK_JOIN"),
        _row("left", TaskStatus.FAILED, 3, reason_for_incompletion="boom"),
        _row("loop", TaskStatus.IN_PROGRESS, 3, "DO_WHILE"),
        _row("step__1", TaskStatus.COMPLETED, 4),
        _row("child__1", TaskStatus.COMPLETED, 5, "SUB_WORKFLOW",
             output_data={"subWorkflowId": "child-run-1"}),
        _row("step__2", TaskStatus.IN_PROGRESS, 6),
    ]  # fmt: skip
    states = node_states(rows)
    assert states["step"].status == "IN_PROGRESS" and states["step"].runs == 2
    svg = str(render_graph(definition, states, lambda s: f"/runs/w?task={s.task_id}"))
    tasks = _tasks(svg)
    assert set(tasks) == {loc.task.task_reference_name for loc in definition.walk()}
    assert {ref: el.get("data-status") for ref, el in tasks.items()} == {
        "first": "COMPLETED",
        "fork": "COMPLETED",
        "left": "FAILED",
        "loop": "IN_PROGRESS",
        "step": "IN_PROGRESS",  # the latest iteration
        "child": "COMPLETED",
        "join": "NOT_RUN",
        "pick": "NOT_RUN",
        "case_x": "NOT_RUN",
        "other_case": "NOT_RUN",
    }
    # a task that ran links to its details, one that did not is no link
    assert tasks["left"].tag == f"{SVG}a" and tasks["left"].get("href") == "/runs/w?task=id-left"
    assert tasks["join"].tag == f"{SVG}g"
    assert "2 runs" in (tasks["step"].get("aria-label") or "")


def test_a_sub_workflow_links_to_its_child_run() -> None:
    states = {"child": NodeState(status="COMPLETED", task_id="t", child_run="child-run-1")}

    def link(state: NodeState) -> str | None:
        return f"/runs/{state.child_run}" if state.child_run else None

    tasks = _tasks(str(render_graph(_nested(), states, link)))
    assert tasks["child"].get("href") == "/runs/child-run-1"
    assert "child run child-run-1" in (tasks["child"].get("aria-label") or "")


def _boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    boxes = []
    for ref, el in _tasks(svg).items():
        rect = next(r for r in el.iter(f"{SVG}rect"))
        x, y = float(rect.get("x") or 0), float(rect.get("y") or 0)
        boxes.append((ref, x, y, float(rect.get("width") or 0), float(rect.get("height") or 0)))
    return boxes


def test_no_two_tasks_overlap_and_everything_fits_the_picture() -> None:
    examples = [
        WorkflowDef.model_validate(json.loads((REPO / "definitions" / name).read_text()))
        for name in ("invoice_intake.json", "month_end_close.json")
    ]
    for definition in (_nested(), *examples):
        svg = str(render_graph(definition, {}))
        root = ET.fromstring(svg)
        width, height = float(root.get("width") or 0), float(root.get("height") or 0)
        boxes = _boxes(svg)
        for ref, x, y, w, h in boxes:
            assert x >= 0 and x + w <= width and y >= 0 and y + h <= height, ref
        for (a, ax, ay, aw, ah), (b, bx, by, bw, bh) in itertools.combinations(boxes, 2):
            apart = ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay
            assert apart, f"{definition.name}: {a} overlaps {b}"
        for path in root.iter(f"{SVG}path"):
            d = path.get("d") or ""
            numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", d)]
            assert all(-1 <= n <= max(width, height) + 1 for n in numbers), path.get("d")


def test_branches_sit_below_their_switch_and_a_sequence_reads_top_down() -> None:
    boxes = {ref: (x, y) for ref, x, y, _, _ in _boxes(str(render_graph(_nested(), {})))}
    assert boxes["first"][1] < boxes["fork"][1] < boxes["left"][1] < boxes["join"][1]
    assert boxes["loop"][1] < boxes["step"][1] < boxes["child"][1] < boxes["join"][1]
    assert boxes["left"][0] < boxes["loop"][0]  # fork lanes side by side, in order
    assert boxes["pick"][1] < boxes["case_x"][1]
    assert boxes["case_x"][1] == boxes["other_case"][1]
    assert boxes["case_x"][0] < boxes["other_case"][0]  # the default case comes last


def test_names_from_the_definition_are_escaped() -> None:
    definition = WorkflowDef.model_validate(
        {
            "name": "x<script>",
            "tasks": [{"name": "a&b", "taskReferenceName": "r<img src=x>", "type": "WORKER"}],
        }
    )
    svg = str(render_graph(definition, {}))
    assert "<script>" not in svg and "<img" not in svg
    assert _tasks(svg).keys() == {"r<img src=x>"}
