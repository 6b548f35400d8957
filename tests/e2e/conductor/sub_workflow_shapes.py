"""The three levels of runs of conductor-oss's test-harness sub-workflow specs
(``SubWorkflowRerunSpec``, ``SubWorkflowRestartSpec`` and the
``HierarchicalForkJoinSubworkflow{Retry,Rerun,Restart}Spec``; in part
``NestedForkJoinSubWorkflowSpec``), shared by the tests that port them.

It mirrors the test-harness resources those specs register (and, for the inline
sub-workflow ports, the definition ``complex_dynamic_plan_wf`` a worker returns):

* ``simple_workflow_1_integration_test.json`` (``integration_test_wf``): a SIMPLE ``t1``
  (``integration_task_1``), then a SIMPLE ``t2`` (``integration_task_2``);
* ``workflow_with_sub_workflow_1_integration_test.json``
  (``integration_test_wf_with_sub_wf``): a SIMPLE ``t1``, then a SUB_WORKFLOW ``t2``;
* ``hierarchical_fork_join_swf.json``: a FORK of a SUB_WORKFLOW ``st1`` and a SIMPLE
  ``t2``, then a JOIN;
* the harness's task definitions: ``integration_task_1`` (1 retry, 120 s timeouts) and
  ``integration_task_2`` with the 0 retries the specs' setup gives it.

Each test registers them under names of its own (``harness.unique``). A root run of the
"chain" (``integration_test_wf_with_sub_wf``) or of the "fork"
(``hierarchical_fork_join_swf``) is started with its own definition as ``subwf`` and
``integration_test_wf`` as ``nextSubwf``: its SUB_WORKFLOW starts a mid-level run of the
same definition, whose SUB_WORKFLOW starts a leaf run of ``integration_test_wf``. The
specs' setups fail the leaf's ``t2``: the leaf, the mid-level run and the root end FAILED.
The SUB_WORKFLOW task is ``tasks[1]`` of a root or mid-level run in both shapes.

The definitions leave out ``failureWorkflow: "$workflow.input.failureWfName"`` (the
specs' input leaves it unset, so Conductor starts none; no assertion reads it); a test
that keeps it passes it to :func:`integration_test_wf`.

Conductor decides inside its API calls and the specs ``sweep`` and execute system tasks
by hand; Stepway decides in its engine a moment later, so each step waits for the state
it expects (:func:`settle`) and then asserts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from tests.e2e.conductor.harness import SETTLE_SECONDS, Conductor, simple, unique, workflow

OWNER = "test@harness.com"
#: the workers the specs poll with
WORKER1, WORKER2 = "task1.integration.worker", "task2.integration.worker"
#: the JOIN of a parent waiting for its branches
JOIN_WAITING = frozenset({"IN_PROGRESS"})
#: the JOIN of a failed parent, before or after a child's rerun or restart reopens it
#: (the specs accept either: the parent is also evaluated in the background)
JOIN_REOPENED = frozenset({"CANCELED", "IN_PROGRESS"})

#: the input of the resources' SUB_WORKFLOW tasks and FORKs: the child's ``subwf`` is
#: the parent's ``nextSubwf``
SUB_WORKFLOW_INPUT = {
    "param1": "${workflow.input.param1}",
    "param2": "${workflow.input.param2}",
    "subwf": "${workflow.input.nextSubwf}",
}
#: the ``p1`` and ``p2`` of the resources' SIMPLE tasks
SIMPLE_INPUT = {"p1": "${workflow.input.param1}", "p2": "${workflow.input.param2}"}


@dataclass
class Names:
    """The names one test registered the resources under."""

    #: ``integration_test_wf_with_sub_wf`` or ``hierarchical_fork_join_swf``
    root: str
    #: ``integration_test_wf``
    leaf: str
    task1: str
    task2: str


@dataclass
class Levels:
    """The three runs of a spec's setup and the two task types."""

    root_id: str
    mid_id: str
    leaf_id: str
    task1: str
    task2: str


def shape(run: dict[str, Any]) -> list[tuple[str, str]]:
    """A run's tasks as (type, status), in row order."""
    return [(t["taskType"], t["status"]) for t in run["tasks"]]


def child_of(run: dict[str, Any]) -> str:
    """The run the SUB_WORKFLOW task of a root or mid-level run started."""
    child_id: str = run["tasks"][1]["subWorkflowId"]
    assert child_id
    return child_id


def new_child_of(run: dict[str, Any], old_id: str) -> str:
    """The run the SUB_WORKFLOW task started, a new one instead of ``old_id``."""
    child_id = child_of(run)
    assert child_id != old_id
    return child_id


# --- definitions ------------------------------------------------------------------------


def task_defs(conductor: Conductor) -> tuple[str, str]:
    """``integration_task_1`` and ``integration_task_2`` under names of their own."""
    task1, task2 = unique("integration_task_1"), unique("integration_task_2")
    common = {"timeoutSeconds": 120, "responseTimeoutSeconds": 120, "ownerEmail": OWNER}
    conductor.taskdefs(
        {"name": task1, "retryCount": 1, **common},
        {"name": task2, "retryCount": 0, **common},
    )
    return task1, task2


def _definition(name: str, tasks: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A harness resource's common fields."""
    return workflow(
        name,
        tasks,
        ownerEmail=OWNER,
        restartable=True,
        timeoutPolicy="ALERT_ONLY",
        timeoutSeconds=0,
        **fields,
    )


def integration_test_wf(name: str, task1: str, task2: str, **fields: Any) -> dict[str, Any]:
    """``simple_workflow_1_integration_test.json``, with ``fields`` added."""
    return _definition(
        name,
        [
            simple(
                task1,
                "t1",
                **SIMPLE_INPUT,
                p3="${CPEWF_TASK_ID}",
                someNullKey=None,
            ),
            simple(
                task2,
                "t2",
                tp1="${workflow.input.param1}",
                tp2="${t1.output.op}",
                tp3="${CPEWF_TASK_ID}",
            ),
        ],
        description="integration_test_wf",
        inputParameters=["param1", "param2"],
        outputParameters={
            "o1": "${workflow.input.param1}",
            "o2": "${t2.output.uuid}",
            "o3": "${t1.output.op}",
        },
        **fields,
    )


def sub_workflow_task(ref: str, name: str = "sub_workflow_task") -> dict[str, Any]:
    """The resources' SUB_WORKFLOW task: it starts the workflow its run's input names
    ``subwf``, passing on ``nextSubwf`` as the child's ``subwf``."""
    return {
        "name": name,
        "taskReferenceName": ref,
        "inputParameters": SUB_WORKFLOW_INPUT,
        "type": "SUB_WORKFLOW",
        "subWorkflowParam": {"name": "${workflow.input.subwf}", "version": 1},
        "retryCount": 0,
    }


def forked_task(task2: str, ref: str) -> dict[str, Any]:
    """The SIMPLE ``integration_task_2`` a fork's branch runs beside a SUB_WORKFLOW."""
    return {**simple(task2, ref, **SIMPLE_INPUT), "retryCount": 0}


def integration_test_wf_with_sub_wf(name: str, task1: str) -> dict[str, Any]:
    """``workflow_with_sub_workflow_1_integration_test.json``."""
    return _definition(
        name,
        [simple(task1, "t1", **SIMPLE_INPUT, someNullKey=None), sub_workflow_task("t2")],
        description="integration_test_wf_with_sub_wf",
        inputParameters=["param1", "param2"],
    )


def hierarchical_fork_join_swf(name: str, task2: str) -> dict[str, Any]:
    """``hierarchical_fork_join_swf.json``."""
    return _definition(
        name,
        [
            {
                "name": "fork",
                "taskReferenceName": "fanouttask",
                "inputParameters": SUB_WORKFLOW_INPUT,
                "type": "FORK_JOIN",
                "forkTasks": [[sub_workflow_task("st1")], [forked_task(task2, "t2")]],
            },
            {
                "name": "join",
                "taskReferenceName": "fanouttask_join",
                "inputParameters": {},
                "type": "JOIN",
                "joinOn": ["st1", "t2"],
            },
        ],
        description="hierarchical_fork_join_swf",
        inputParameters=["param1", "param2", "subwf"],
    )


def register_chain(conductor: Conductor) -> Names:
    """The task definitions, ``integration_test_wf_with_sub_wf`` and
    ``integration_test_wf``."""
    task1, task2 = task_defs(conductor)
    names = Names(
        unique("integration_test_wf_with_sub_wf"), unique("integration_test_wf"), task1, task2
    )
    conductor.register(
        integration_test_wf(names.leaf, task1, task2),
        integration_test_wf_with_sub_wf(names.root, task1),
    )
    return names


def register_fork_join(conductor: Conductor) -> Names:
    """The task definitions, ``hierarchical_fork_join_swf`` and ``integration_test_wf``."""
    task1, task2 = task_defs(conductor)
    names = Names(unique("hierarchical_fork_join_swf"), unique("integration_test_wf"), task1, task2)
    conductor.register(
        integration_test_wf(names.leaf, task1, task2),
        hierarchical_fork_join_swf(names.root, task2),
    )
    return names


def start_root(conductor: Conductor, names: Names, correlation_id: str | None = None) -> str:
    """Start the root run (version 1): its SUB_WORKFLOW starts a mid-level run of its own
    definition, whose SUB_WORKFLOW starts a leaf run of ``integration_test_wf``."""
    return conductor.start(
        names.root,
        {"param1": "p1 value", "param2": "p2 value", "subwf": names.root, "nextSubwf": names.leaf},
        version=1,
        correlation_id=correlation_id,
    )


# --- running again ----------------------------------------------------------------------


def retry(conductor: Conductor, workflow_id: str, *, resume: bool = False) -> None:
    """``POST /workflow/{id}/retry``, with ``resumeSubworkflowTasks`` when ``resume``."""
    params = {"resumeSubworkflowTasks": "true"} if resume else {}
    r = conductor.http.post(f"/api/workflow/{workflow_id}/retry", params=params)
    assert r.status_code == 204, r.text


def restart(conductor: Conductor, workflow_id: str) -> None:
    """``POST /workflow/{id}/restart`` with the run's own definition
    (``workflowExecutor.restart(id, false)``)."""
    r = conductor.http.post(
        f"/api/workflow/{workflow_id}/restart", params={"useLatestDefinitions": "false"}
    )
    assert r.status_code == 204, r.text


# --- waiting ----------------------------------------------------------------------------


def settle(
    conductor: Conductor,
    workflow_id: str,
    until: Callable[[dict[str, Any]], bool],
    seconds: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """The run once ``until(run)`` holds, else the last state read after ``seconds``.
    Unlike ``Conductor.wait`` it does not stop at an ended run: after a retry, rerun or
    restart a run may read FAILED until it is taken back to RUNNING."""
    deadline = time.monotonic() + seconds
    while True:
        run = conductor.run(workflow_id)
        if until(run) or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


def settle_run(
    conductor: Conductor, workflow_id: str, status: str, tasks: list[tuple[str, str]]
) -> dict[str, Any]:
    """The run once it is ``status`` with the tasks ``tasks`` (:func:`shape`); asserts
    both."""
    run = settle(conductor, workflow_id, lambda r: r["status"] == status and shape(r) == tasks)
    assert (run["status"], shape(run)) == (status, tasks), run.get("reasonForIncompletion")
    return run


def first_task_scheduled(conductor: Conductor, workflow_id: str, task1: str) -> None:
    """A (new, rerun or restarted) run of either definition before its first task
    completed: RUNNING, its ``t1`` SCHEDULED."""
    settle_run(conductor, workflow_id, "RUNNING", [(task1, "SCHEDULED")])


# --- the leaf ---------------------------------------------------------------------------


def fail_leaf_t2(conductor: Conductor, task1: str, task2: str) -> None:
    """The leaf's ``t1`` completes and its ``t2`` fails."""
    conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
    conductor.poll_and_fail(task2, "failed", WORKER2)


def leaf_fails(conductor: Conductor, levels: Levels) -> None:
    """The specs' setup from the leaf started: its ``t1`` completes, its ``t2`` fails,
    and the leaf is FAILED."""
    first_task_scheduled(conductor, levels.leaf_id, levels.task1)
    fail_leaf_t2(conductor, levels.task1, levels.task2)
    settle_run(
        conductor, levels.leaf_id, "FAILED", [(levels.task1, "COMPLETED"), (levels.task2, "FAILED")]
    )


def complete_leaf(conductor: Conductor, leaf_id: str, task1: str, task2: str) -> None:
    """The (new, rerun or restarted) leaf's ``t1`` and ``t2`` complete: the leaf
    COMPLETED."""
    conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
    conductor.poll_and_complete(task2, {"op": "task2.done"}, WORKER2)
    settle_run(conductor, leaf_id, "COMPLETED", [(task1, "COMPLETED"), (task2, "COMPLETED")])


def leaf_retried(
    conductor: Conductor, leaf_id: str, task1: str, task2: str, status: str = "SCHEDULED"
) -> None:
    """The leaf with ``t1`` kept and ``t2``'s failed attempt retried by a new one of
    ``status``: RUNNING while it is SCHEDULED, COMPLETED once it is."""
    leaf = settle_run(
        conductor,
        leaf_id,
        "RUNNING" if status == "SCHEDULED" else status,
        [(task1, "COMPLETED"), (task2, "FAILED"), (task2, status)],
    )
    assert leaf["tasks"][1]["retried"] is True
    assert leaf["tasks"][2]["retriedTaskId"] == leaf["tasks"][1]["taskId"]


# --- the chain: integration_test_wf_with_sub_wf -----------------------------------------


def chain_parent(
    conductor: Conductor, workflow_id: str, task1: str, status: str, sub: str
) -> dict[str, Any]:
    """A root or mid-level run of the chain once it is ``status`` with its ``t1``
    COMPLETED and its SUB_WORKFLOW ``sub``."""
    return settle_run(conductor, workflow_id, status, [(task1, "COMPLETED"), ("SUB_WORKFLOW", sub)])


def chain_resumed(
    conductor: Conductor, workflow_id: str, child_id: str, task1: str
) -> dict[str, Any]:
    """A parent taken back to RUNNING by its child's rerun or restart
    (``updateAndPushParents``): its SUB_WORKFLOW task IN_PROGRESS again, waiting for the
    same child run."""
    run = chain_parent(conductor, workflow_id, task1, "RUNNING", "IN_PROGRESS")
    assert run["tasks"][1]["subWorkflowId"] == child_id
    return run


def chain_failed(conductor: Conductor, correlation_id: str) -> Levels:
    """The setup of ``SubWorkflowRerunSpec`` and ``SubWorkflowRestartSpec``: three runs of
    the chain FAILED by the leaf's ``t2``."""
    names = register_chain(conductor)
    task1 = names.task1
    root_id = start_root(conductor, names, correlation_id)
    first_task_scheduled(conductor, root_id, task1)
    polled = conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
    assert polled["workflowInstanceId"] == root_id
    mid_id = child_of(chain_parent(conductor, root_id, task1, "RUNNING", "IN_PROGRESS"))

    first_task_scheduled(conductor, mid_id, task1)
    conductor.poll_and_complete(task1, {"op": "task1.done"}, WORKER1)
    leaf_id = child_of(chain_parent(conductor, mid_id, task1, "RUNNING", "IN_PROGRESS"))

    levels = Levels(root_id, mid_id, leaf_id, task1, names.task2)
    leaf_fails(conductor, levels)
    for workflow_id in (mid_id, root_id):
        chain_parent(conductor, workflow_id, task1, "FAILED", "FAILED")
    return levels


def new_mid_of_chain(conductor: Conductor, levels: Levels) -> str:
    """The root, its ``t1`` completed again, RUNNING with a new SUB_WORKFLOW task that
    started a NEW mid-level run, RUNNING with its ``t1`` SCHEDULED: that run's id."""
    root = chain_parent(conductor, levels.root_id, levels.task1, "RUNNING", "IN_PROGRESS")
    new_mid = new_child_of(root, levels.mid_id)
    first_task_scheduled(conductor, new_mid, levels.task1)
    return new_mid


def new_leaf_of_chain(conductor: Conductor, levels: Levels, mid_id: str) -> str:
    """The mid-level run ``mid_id``, its ``t1`` completed, RUNNING with a SUB_WORKFLOW
    task that started a NEW leaf, RUNNING with its ``t1`` SCHEDULED: the leaf's id."""
    mid = chain_parent(conductor, mid_id, levels.task1, "RUNNING", "IN_PROGRESS")
    new_leaf = new_child_of(mid, levels.leaf_id)
    first_task_scheduled(conductor, new_leaf, levels.task1)
    return new_leaf


def chain_completed(conductor: Conductor, workflow_id: str, task1: str) -> None:
    """A root or mid-level run of the chain COMPLETED, ``subworkflowChanged`` false
    ("flag is reset after decide")."""
    run = chain_parent(conductor, workflow_id, task1, "COMPLETED", "COMPLETED")
    assert not run["tasks"][1]["subworkflowChanged"]


def chain_completes(conductor: Conductor, levels: Levels, leaf_id: str, mid_id: str) -> None:
    """The leaf ``leaf_id`` completes, then the mid-level run ``mid_id`` and the root."""
    complete_leaf(conductor, leaf_id, levels.task1, levels.task2)
    chain_completed(conductor, mid_id, levels.task1)
    chain_completed(conductor, levels.root_id, levels.task1)


# --- the fork: hierarchical_fork_join_swf -----------------------------------------------


def fork_parent(
    conductor: Conductor,
    workflow_id: str,
    task2: str,
    *,
    status: str,
    sub: str,
    t2: str,
    join: Collection[str],
) -> dict[str, Any]:
    """A root or mid-level run of the fork once it is ``status`` with its SUB_WORKFLOW
    ``sub``, its ``t2`` ``t2`` and its JOIN one of ``join``."""

    def reached(r: dict[str, Any]) -> bool:
        return (
            r["status"] == status
            and len(r["tasks"]) == 4
            and [t["status"] for t in r["tasks"][1:3]] == [sub, t2]
            and r["tasks"][3]["status"] in join
        )

    run = settle(conductor, workflow_id, reached)
    assert run["status"] == status
    tasks = shape(run)
    assert tasks[:3] == [("FORK", "COMPLETED"), ("SUB_WORKFLOW", sub), (task2, t2)]
    assert len(tasks) == 4
    assert tasks[3][0] == "JOIN"
    assert tasks[3][1] in join
    return run


def fork_running(
    conductor: Conductor,
    workflow_id: str,
    task2: str,
    t2: str,
    join: Collection[str] = JOIN_WAITING,
) -> dict[str, Any]:
    """A root or mid-level run of the fork once RUNNING with its SUB_WORKFLOW
    IN_PROGRESS, its ``t2`` ``t2`` and its JOIN one of ``join``."""
    return fork_parent(
        conductor, workflow_id, task2, status="RUNNING", sub="IN_PROGRESS", t2=t2, join=join
    )


def fork_resumed(
    conductor: Conductor,
    workflow_id: str,
    child_id: str,
    task2: str,
    join: Collection[str] = JOIN_WAITING,
) -> dict[str, Any]:
    """A parent taken back to RUNNING by its child's retry, rerun or restart: its
    SUB_WORKFLOW task IN_PROGRESS again, waiting for the same child run, its ``t2``
    COMPLETED and its JOIN one of ``join``."""
    run = fork_running(conductor, workflow_id, task2, "COMPLETED", join)
    assert run["tasks"][1]["subWorkflowId"] == child_id
    return run


def complete_forked_t2s(conductor: Conductor, task2: str) -> None:
    """The root's and the mid-level run's ``t2`` complete (both are queued: either may be
    handed out first)."""
    conductor.poll_and_complete(task2, {"op": "task2.done"}, WORKER2)
    conductor.poll_and_complete(task2, {"op": "task2.done"}, WORKER2)


def fork_started(conductor: Conductor, correlation_id: str) -> tuple[Names, str, str]:
    """The fork's resources registered and a root run started: RUNNING, its SUB_WORKFLOW
    IN_PROGRESS (a mid-level run started), its ``t2`` SCHEDULED, its JOIN IN_PROGRESS.
    The names, the root's and the mid-level run's ids."""
    names = register_fork_join(conductor)
    root_id = start_root(conductor, names, correlation_id)
    root = fork_running(conductor, root_id, names.task2, "SCHEDULED")
    return names, root_id, child_of(root)


def fork_parents_failed(conductor: Conductor, levels: Levels) -> None:
    """The mid-level run and the root FAILED by the leaf, their JOIN CANCELED or already
    IN_PROGRESS again."""
    for workflow_id in (levels.mid_id, levels.root_id):
        fork_parent(
            conductor,
            workflow_id,
            levels.task2,
            status="FAILED",
            sub="FAILED",
            t2="COMPLETED",
            join=JOIN_REOPENED,
        )


def new_leaf_of_fork(conductor: Conductor, levels: Levels, mid_id: str) -> str:
    """The mid-level run ``mid_id``, its ``t2`` completed, RUNNING with a SUB_WORKFLOW
    task that started a NEW leaf, RUNNING with its ``t1`` SCHEDULED: the leaf's id."""
    mid = fork_running(conductor, mid_id, levels.task2, "COMPLETED")
    new_leaf = new_child_of(mid, levels.leaf_id)
    first_task_scheduled(conductor, new_leaf, levels.task1)
    return new_leaf


def fork_completed(conductor: Conductor, workflow_id: str, task2: str) -> None:
    """The specs' ``assertWorkflowIsCompleted``, ``subworkflowChanged`` false ("flag is
    reset after decide")."""
    run = fork_parent(
        conductor,
        workflow_id,
        task2,
        status="COMPLETED",
        sub="COMPLETED",
        t2="COMPLETED",
        join={"COMPLETED"},
    )
    assert not run["tasks"][1]["subworkflowChanged"]


def fork_completes(conductor: Conductor, levels: Levels, leaf_id: str, mid_id: str) -> None:
    """The leaf ``leaf_id`` completes, then the mid-level run ``mid_id`` and the root."""
    complete_leaf(conductor, leaf_id, levels.task1, levels.task2)
    fork_completed(conductor, mid_id, levels.task2)
    fork_completed(conductor, levels.root_id, levels.task2)


def complex_dynamic_plan_wf(task_type: str) -> dict[str, Any]:
    """``complex_dynamic_plan_wf`` of conductor-oss's InlineSubWorkflowFromExpressionSpec
    (buildComplexSubWorkflowDef) and of its e2e SubWorkflowInlineTests
    (buildComplexSubWfDefMap), its worker type ``task_type``: a DO_WHILE of an INLINE
    ``compute`` and a javascript SWITCH ``route`` (the worker task ``high_task`` when the
    product is above the threshold, else an INLINE ``low_result``), then an INLINE
    ``final_result`` mapped to the output."""

    def inline(ref: str, expression: str, **params: Any) -> dict[str, Any]:
        return {
            "name": ref,
            "taskReferenceName": ref,
            "type": "INLINE",
            "inputParameters": {"evaluatorType": "javascript", "expression": expression, **params},
        }

    compute = inline(
        "compute",
        "function f() { return $.iteration * $.threshold; } f();",
        iteration="${do_loop.output.iteration}",
        threshold="${workflow.input.threshold}",
    )
    high = {
        "name": task_type,
        "taskReferenceName": "high_task",
        "type": "SIMPLE",
        "inputParameters": {"product": "${compute.output.result}", "category": "high"},
    }
    low = inline(
        "low_result",
        'function f() { return {label: "low", product: $.product}; } f();',
        product="${compute.output.result}",
    )
    route = {
        "name": "route",
        "taskReferenceName": "route",
        "type": "SWITCH",
        "evaluatorType": "javascript",
        "expression": "$.product > $.threshold",
        "inputParameters": {
            "product": "${compute.output.result}",
            "threshold": "${workflow.input.threshold}",
        },
        "decisionCases": {"true": [high]},
        "defaultCase": [low],
    }
    loop = {
        "name": "do_loop",
        "taskReferenceName": "do_loop",
        "type": "DO_WHILE",
        "inputParameters": {
            "iters": "${workflow.input.iterations}",
            "threshold": "${workflow.input.threshold}",
        },
        "loopCondition": "$.do_loop['iteration'] < $.iters",
        "loopOver": [compute, route],
    }
    final = inline(
        "final_result",
        "function f() { return {loopsDone: $.loopsDone, allDone: true}; } f();",
        loopsDone="${do_loop.output.iteration}",
    )
    return {
        "name": "complex_dynamic_plan_wf",
        "version": 1,
        "schemaVersion": 2,
        "tasks": [loop, final],
        "inputParameters": ["iterations", "threshold"],
        "outputParameters": {
            "loopsDone": "${final_result.output.result.loopsDone}",
            "allDone": "${final_result.output.result.allDone}",
        },
        "timeoutPolicy": "ALERT_ONLY",
        "timeoutSeconds": 0,
    }
