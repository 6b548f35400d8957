"""One handler per task type (see :mod:`engine.decider.tasks.base` for the interface)."""

from __future__ import annotations

from engine.decider.tasks.activity import ActivityTask
from engine.decider.tasks.base import (
    ActionFields,
    ScheduledTask,
    TaskFailed,
    TaskHandler,
    TaskStart,
)
from engine.decider.tasks.do_while import DoWhileTask
from engine.decider.tasks.dynamic import DynamicTask
from engine.decider.tasks.exclusive_join import ExclusiveJoinTask
from engine.decider.tasks.fork_join import ForkJoinTask
from engine.decider.tasks.fork_join_dynamic import ForkJoinDynamicTask
from engine.decider.tasks.human import HumanTask, human_timeout
from engine.decider.tasks.inline import InlineTask
from engine.decider.tasks.join import JoinTask
from engine.decider.tasks.json_jq_transform import JsonJqTransformTask
from engine.decider.tasks.lambda_task import LambdaTask
from engine.decider.tasks.noop import NoopTask
from engine.decider.tasks.set_variable import SetVariableTask
from engine.decider.tasks.start_workflow import StartWorkflowTask
from engine.decider.tasks.sub_workflow import SubWorkflowTask
from engine.decider.tasks.switch import SwitchTask
from engine.decider.tasks.terminate import TerminateTask
from engine.decider.tasks.wait import WaitTask
from engine.decider.tasks.worker import WorkerTask
from engine.language.definitions import ACTIVITY_TYPES, TaskType

__all__ = [
    "HANDLERS",
    "ActionFields",
    "ScheduledTask",
    "TaskFailed",
    "TaskHandler",
    "TaskStart",
    "handler_for",
    "human_timeout",
]

#: Task type -> its handler.
HANDLERS: dict[str, TaskHandler] = {
    TaskType.WORKER: WorkerTask(),
    **{task_type: ActivityTask() for task_type in ACTIVITY_TYPES},
    TaskType.HUMAN: HumanTask(),
    TaskType.WAIT: WaitTask(),
    TaskType.SUB_WORKFLOW: SubWorkflowTask(),
    TaskType.SWITCH: SwitchTask(),
    TaskType.FORK_JOIN: ForkJoinTask(),
    TaskType.JOIN: JoinTask(),
    TaskType.DO_WHILE: DoWhileTask(),
    TaskType.SET_VARIABLE: SetVariableTask(),
    TaskType.TERMINATE: TerminateTask(),
    TaskType.INLINE: InlineTask(),
    TaskType.JSON_JQ_TRANSFORM: JsonJqTransformTask(),
    TaskType.FORK_JOIN_DYNAMIC: ForkJoinDynamicTask(),
    TaskType.DYNAMIC: DynamicTask(),
    TaskType.EXCLUSIVE_JOIN: ExclusiveJoinTask(),
    TaskType.START_WORKFLOW: StartWorkflowTask(),
    TaskType.LAMBDA: LambdaTask(),
    TaskType.NOOP: NoopTask(),
}


def handler_for(task_type: str) -> TaskHandler | None:
    """The handler of ``task_type``, or None for a type the Decider does not know."""
    return HANDLERS.get(task_type)
