"""A definition drawn as SVG by the server, each task coloured by its status in a run.

Definitions are nested sequences, so the layout is recursive and needs no general graph
library: a sequence stacks its blocks top to bottom; a SWITCH or FORK_JOIN puts its
branches side by side under its own node and merges them below; a DO_WHILE frames its
body with an arrow back to the loop node. Each block is measured first (width, height),
then drawn at a position; edges run from the bottom centre of one block to the top centre
of the next.

Every task node carries ``data-ref`` and ``data-status`` (``NOT_RUN`` for a task the run
has not reached), an ``aria-label`` saying the same in words, and links to the task's
details (a SUB_WORKFLOW links to its child run).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from control_plane.console.html import TASK_STATUS_CLASS, html, join
from engine.language.definitions import TaskType, WorkflowDef, WorkflowTask
from engine.ports.run_store import TaskRecord

NODE_W = 200.0
NODE_H = 48.0
GAP_Y = 30.0
GAP_X = 28.0
LABEL_H = 20.0
MERGE_H = 14.0
FRAME_PAD = 14.0
LOOP_ARROW = 26.0
MARGIN = 12.0
MAX_LABEL = 26

_ITERATION = re.compile(r"(__\d+)+$")


@dataclass
class NodeState:
    """What the run did with one task of the definition."""

    status: str | None = None
    task_id: str | None = None
    #: how many rows the run has for this task (DO_WHILE iterations)
    runs: int = 0
    child_run: str | None = None
    selected_case: str | None = None


def base_ref(ref: str) -> str:
    """``x__2__1`` -> ``x`` (the definition's reference of an iteration's row)."""
    return _ITERATION.sub("", ref)


def _rank(ref: str) -> tuple[int, ...]:
    return tuple(int(p) for p in ref.split("__")[1:] if p.isdigit())


def node_states(rows: list[TaskRecord]) -> dict[str, NodeState]:
    """The state of each definition reference: its latest row (the latest iteration)."""
    latest: dict[str, TaskRecord] = {}
    counts: dict[str, int] = {}
    for row in rows:
        ref = base_ref(row.reference_task_name)
        counts[ref] = counts.get(ref, 0) + 1
        seen = latest.get(ref)
        if seen is None or (_rank(row.reference_task_name), row.seq) >= (
            _rank(seen.reference_task_name),
            seen.seq,
        ):
            latest[ref] = row
    states: dict[str, NodeState] = {}
    for ref, row in latest.items():
        output: Any = row.output_data if isinstance(row.output_data, dict) else {}
        child = output.get("subWorkflowId") if row.task_type == TaskType.SUB_WORKFLOW else None
        case = output.get("selectedCase") if row.task_type == TaskType.SWITCH else None
        states[ref] = NodeState(
            status=row.status.value,
            task_id=row.task_id,
            runs=counts[ref],
            child_run=str(child) if child else None,
            selected_case=str(case) if case is not None else None,
        )
    return states


@dataclass
class _Ctx:
    states: dict[str, NodeState]
    link: Callable[[NodeState], str | None]


class _Block:
    width: float
    height: float

    def draw(self, x: float, y: float, out: list[Markup]) -> None:
        raise NotImplementedError


def _edge(
    x1: float, y1: float, x2: float, y2: float, arrow: bool = True, turn: float | None = None
) -> Markup:
    """A line down from (x1, y1) to (x2, y2); sideways at height ``turn`` (default
    half-way) when the two are not above each other."""
    if abs(x1 - x2) < 0.5:
        d = f"M{x1:.1f},{y1:.1f} V{y2:.1f}"
    else:
        mid = y1 + (y2 - y1) / 2 if turn is None else turn
        d = f"M{x1:.1f},{y1:.1f} V{mid:.1f} H{x2:.1f} V{y2:.1f}"
    return html(
        '<path class="edge" d="{}"{}/>', d, Markup(' marker-end="url(#arrow)"') if arrow else ""
    )


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


@dataclass
class _Node(_Block):
    task: WorkflowTask
    ctx: _Ctx
    width: float = NODE_W
    height: float = NODE_H

    def draw(self, x: float, y: float, out: list[Markup]) -> None:
        ref = self.task.task_reference_name
        state = self.ctx.states.get(ref, NodeState())
        status = state.status or "NOT_RUN"
        css = TASK_STATUS_CLASS.get(status, "s-none")
        kind = self.task.type if self.task.type != TaskType.WORKER else self.task.name
        meta = status.replace("_", " ").lower() if state.status else "not run"
        if state.runs > 1:
            meta += f" · {state.runs} runs"
        label = f"{ref} ({self.task.type}): {meta}"
        if state.child_run:
            label += f", child run {state.child_run}"
        body = html(
            '<g class="node {css}"><title>{title}</title>'
            '<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="7"/>'
            '<text class="ref" x="{tx}" y="{ty1}">{ref}</text>'
            '<text class="meta" x="{tx}" y="{ty2}">{kind} · {meta}</text></g>',
            css=css,
            title=label,
            x=f"{x:.1f}",
            y=f"{y:.1f}",
            w=f"{self.width:.1f}",
            h=f"{self.height:.1f}",
            tx=f"{x + 10:.1f}",
            ty1=f"{y + 20:.1f}",
            ty2=f"{y + 38:.1f}",
            ref=_short(ref),
            kind=kind if len(kind) <= 22 else kind[:21] + "…",
            meta=meta,
        )
        target = self.ctx.link(state) if state.status else None
        attrs = html(
            ' class="task" data-ref="{}" data-status="{}" data-type="{}" aria-label="{}"',
            ref,
            status,
            self.task.type,
            label,
        )
        if target:
            out.append(html('<a href="{}"{}>{}</a>', target, attrs, body))
        else:
            out.append(html('<g role="img"{}>{}</g>', attrs, body))


@dataclass
class _Sequence(_Block):
    blocks: list[_Block]
    width: float = 0.0
    height: float = 0.0

    def __post_init__(self) -> None:
        if not self.blocks:
            self.width, self.height = NODE_W * 0.6, 22.0
            return
        self.width = max(b.width for b in self.blocks)
        self.height = sum(b.height for b in self.blocks) + GAP_Y * (len(self.blocks) - 1)

    def draw(self, x: float, y: float, out: list[Markup]) -> None:
        centre = x + self.width / 2
        if not self.blocks:
            out.append(_edge(centre, y, centre, y + self.height, arrow=False))
            return
        top = y
        for i, block in enumerate(self.blocks):
            if i:
                out.append(_edge(centre, top - GAP_Y, centre, top))
            block.draw(centre - block.width / 2, top, out)
            top += block.height + GAP_Y


@dataclass
class _Branches(_Block):
    """SWITCH cases or FORK_JOIN lanes side by side under the task's node."""

    head: _Node
    lanes: list[tuple[str, _Sequence, bool]]  # (label, body, taken)
    width: float = 0.0
    height: float = 0.0

    def __post_init__(self) -> None:
        lanes_w = sum(s.width for _, s, _ in self.lanes) + GAP_X * max(0, len(self.lanes) - 1)
        self.width = max(NODE_W, lanes_w)
        tallest = max((s.height for _, s, _ in self.lanes), default=0.0)
        self.height = NODE_H + GAP_Y + LABEL_H + tallest + GAP_Y + MERGE_H

    def draw(self, x: float, y: float, out: list[Markup]) -> None:
        centre = x + self.width / 2
        self.head.draw(centre - NODE_W / 2, y, out)
        lanes_w = sum(s.width for _, s, _ in self.lanes) + GAP_X * max(0, len(self.lanes) - 1)
        left = x + (self.width - lanes_w) / 2
        lane_top = y + NODE_H + GAP_Y
        merge_y = y + self.height - MERGE_H / 2
        for label, seq, taken in self.lanes:
            lane_centre = left + seq.width / 2
            out.append(_edge(centre, y + NODE_H, lane_centre, lane_top))
            out.append(
                html(
                    '<text class="lane{}" x="{}" y="{}" text-anchor="middle">{}</text>',
                    " taken" if taken else "",
                    f"{lane_centre:.1f}",
                    f"{lane_top + 14:.1f}",
                    _short(label),
                )
            )
            body_top = lane_top + LABEL_H
            seq.draw(left, body_top, out)
            # down to a bus under the tallest lane, so no line crosses a shorter lane
            out.append(
                _edge(
                    lane_centre,
                    body_top + seq.height,
                    centre,
                    merge_y,
                    arrow=False,
                    turn=merge_y - MERGE_H / 2,
                )
            )
            left += seq.width + GAP_X
        out.append(
            html(
                '<circle class="merge" cx="{}" cy="{}" r="5"/>',
                f"{centre:.1f}",
                f"{merge_y:.1f}",
            )
        )


@dataclass
class _Loop(_Block):
    """DO_WHILE: the loop node, its body in a frame, an arrow back up."""

    head: _Node
    body: _Sequence
    width: float = 0.0
    height: float = 0.0

    def __post_init__(self) -> None:
        self.width = max(NODE_W, self.body.width + 2 * FRAME_PAD) + 2 * LOOP_ARROW
        self.height = NODE_H + GAP_Y + self.body.height + 2 * FRAME_PAD

    def draw(self, x: float, y: float, out: list[Markup]) -> None:
        centre = x + self.width / 2
        self.head.draw(centre - NODE_W / 2, y, out)
        frame_w = self.body.width + 2 * FRAME_PAD
        frame_x = centre - frame_w / 2
        frame_y = y + NODE_H + GAP_Y
        out.append(_edge(centre, y + NODE_H, centre, frame_y + FRAME_PAD))
        out.append(
            html(
                '<rect class="frame" x="{}" y="{}" width="{}" height="{}" rx="10"/>',
                f"{frame_x:.1f}",
                f"{frame_y:.1f}",
                f"{frame_w:.1f}",
                f"{self.body.height + 2 * FRAME_PAD:.1f}",
            )
        )
        self.body.draw(centre - self.body.width / 2, frame_y + FRAME_PAD, out)
        # back edge: from the frame's bottom right, up the side, into the loop node
        right = frame_x + frame_w + LOOP_ARROW / 2
        bottom = frame_y + self.body.height + 2 * FRAME_PAD - 6
        out.append(
            html(
                '<path class="edge loop" d="M{},{} H{} V{} H{}" marker-end="url(#arrow)"/>',
                f"{frame_x + frame_w:.1f}",
                f"{bottom:.1f}",
                f"{right:.1f}",
                f"{y + NODE_H / 2:.1f}",
                f"{centre + NODE_W / 2:.1f}",
            )
        )


def _block(task: WorkflowTask, ctx: _Ctx) -> _Block:
    node = _Node(task, ctx)
    state = ctx.states.get(task.task_reference_name, NodeState())
    if task.type == TaskType.SWITCH:
        lanes = [
            (f"{case}", _sequence(tasks, ctx), state.selected_case == case)
            for case, tasks in task.decision_cases.items()
        ]
        taken_default = state.selected_case is not None and not any(t for _, _, t in lanes)
        lanes.append(("default", _sequence(task.default_case, ctx), taken_default))
        return _Branches(node, lanes)
    if task.type == TaskType.FORK_JOIN:
        return _Branches(
            node,
            [
                (f"branch {i + 1}", _sequence(branch, ctx), state.status is not None)
                for i, branch in enumerate(task.fork_tasks)
            ],
        )
    if task.type == TaskType.DO_WHILE:
        return _Loop(node, _sequence(task.loop_over, ctx))
    return node


def _sequence(tasks: list[WorkflowTask], ctx: _Ctx) -> _Sequence:
    return _Sequence([_block(t, ctx) for t in tasks])


def render_graph(
    definition: WorkflowDef,
    states: dict[str, NodeState],
    link: Callable[[NodeState], str | None] = lambda s: None,
) -> Markup:
    """The definition as one ``<svg>`` element (scaled down by CSS on narrow screens)."""
    ctx = _Ctx(states, link)
    root = _Sequence([_block(t, ctx) for t in definition.tasks])
    out: list[Markup] = []
    root.draw(MARGIN, MARGIN, out)
    width = root.width + 2 * MARGIN
    height = root.height + 2 * MARGIN
    return html(
        '<svg class="graph" xmlns="http://www.w3.org/2000/svg" role="group" '
        'aria-label="{label}" width="{w}" height="{h}" viewBox="0 0 {w} {h}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'class="arrowhead"/></marker></defs>{body}</svg>',
        label=f"Tasks of {definition.name} v{definition.version}",
        w=f"{width:.0f}",
        h=f"{height:.0f}",
        body=join(out),
    )


@dataclass
class GraphSummary:
    """Counts by status, for the text next to the picture."""

    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, definition: WorkflowDef, states: dict[str, NodeState]) -> GraphSummary:
        counts: dict[str, int] = {}
        for location in definition.walk():
            status = states.get(location.task.task_reference_name, NodeState()).status
            key = status or "NOT_RUN"
            counts[key] = counts.get(key, 0) + 1
        return cls(counts)
