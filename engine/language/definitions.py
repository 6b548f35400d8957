"""Conductor-compatible definition models: TaskDef, WorkflowDef, WorkflowTask.

Field names are Conductor's (camelCase on the wire, snake_case in Python) and so are the
defaults. Unknown fields from Conductor JSON are kept (``extra="allow"``) and written back
unchanged, never a crash.

The task ``type`` is kept as a plain string so that one validation pass
(:mod:`engine.language.validation`) can report an unknown type together with every other error of
the definition; aliases (``SIMPLE`` -> ``WORKER``, ``DECISION`` -> ``SWITCH``) are
normalised on load.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from protocol.limits import MAX_INT32


class TaskType(StrEnum):
    WORKER = "WORKER"
    HTTP = "HTTP"
    CALL_TOOL = "CALL_TOOL"
    LOGIC_APP = "LOGIC_APP"
    DOCUMENT_INTELLIGENCE = "DOCUMENT_INTELLIGENCE"
    INLINE = "INLINE"
    JSON_JQ_TRANSFORM = "JSON_JQ_TRANSFORM"
    SWITCH = "SWITCH"
    FORK_JOIN = "FORK_JOIN"
    JOIN = "JOIN"
    DO_WHILE = "DO_WHILE"
    WAIT = "WAIT"
    HUMAN = "HUMAN"
    SUB_WORKFLOW = "SUB_WORKFLOW"
    SET_VARIABLE = "SET_VARIABLE"
    TERMINATE = "TERMINATE"
    FORK_JOIN_DYNAMIC = "FORK_JOIN_DYNAMIC"
    DYNAMIC = "DYNAMIC"
    EXCLUSIVE_JOIN = "EXCLUSIVE_JOIN"
    START_WORKFLOW = "START_WORKFLOW"
    LAMBDA = "LAMBDA"
    NOOP = "NOOP"


#: Conductor names accepted on input and stored under Stepway's name.
TASK_TYPE_ALIASES: dict[str, str] = {"SIMPLE": "WORKER", "DECISION": "SWITCH"}

#: Types evaluated in the engine's evaluator processes (engine.runtime.evaluators),
#: as an activity whose result is recorded once: replays read it, never re-evaluate.
SCRIPT_TASK_TYPES = frozenset({TaskType.INLINE, TaskType.LAMBDA, TaskType.JSON_JQ_TRANSFORM})

#: Types that run as durabletask activities inside the engine.
ACTIVITY_TYPES = frozenset(
    {
        TaskType.HTTP,
        TaskType.CALL_TOOL,
        TaskType.LOGIC_APP,
        TaskType.DOCUMENT_INTELLIGENCE,
        *SCRIPT_TASK_TYPES,
    }
)

#: The built-in types that call out. ``asyncComplete`` holds such a task IN_PROGRESS
#: after its call answered, until a task update completes it (Conductor's HTTP task); a
#: script completes itself, in Conductor too.
CALL_TASK_TYPES = ACTIVITY_TYPES - SCRIPT_TASK_TYPES

TimeoutPolicy = Literal["RETRY", "TIME_OUT_WF", "ALERT_ONLY"]
WorkflowTimeoutPolicy = Literal["TIME_OUT_WF", "ALERT_ONLY"]
RetryLogic = Literal["FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF"]


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    TERMINATED = "TERMINATED"

    @property
    def is_terminal(self) -> bool:
        return self not in (RunStatus.RUNNING, RunStatus.PAUSED)


class TaskStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    COMPLETED_WITH_ERRORS = "COMPLETED_WITH_ERRORS"
    FAILED = "FAILED"
    FAILED_WITH_TERMINAL_ERROR = "FAILED_WITH_TERMINAL_ERROR"
    TIMED_OUT = "TIMED_OUT"
    CANCELED = "CANCELED"
    SKIPPED = "SKIPPED"

    @property
    def is_terminal(self) -> bool:
        return self not in (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)

    @property
    def is_successful(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.COMPLETED_WITH_ERRORS, TaskStatus.SKIPPED)


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=False,
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The Conductor wire form (camelCase, unknown fields kept)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class TaskDef(_Model):
    """Settings of a task type (docs/architecture.md, "Retries and timeouts"). Defaults
    are Conductor's."""

    name: str
    description: str | None = None
    owner_email: str | None = None
    retry_count: int = Field(default=3, ge=0, le=MAX_INT32)
    retry_logic: RetryLogic = "FIXED"
    retry_delay_seconds: int = Field(default=60, ge=0, le=MAX_INT32)
    backoff_scale_factor: int = Field(default=1, ge=1, le=MAX_INT32)
    #: caps a retry's computed delay when above 0 (conductor-oss)
    max_retry_delay_seconds: int = Field(default=0, ge=0, le=MAX_INT32)
    #: adds 0 to this many ms to a retry's delay when above 0 (conductor-oss)
    backoff_jitter_ms: int = Field(default=0, ge=0, le=MAX_INT32)
    timeout_seconds: int = Field(default=0, ge=0, le=MAX_INT32)
    response_timeout_seconds: int = Field(default=3600, ge=1, le=MAX_INT32)
    poll_timeout_seconds: int | None = Field(default=None, ge=0, le=MAX_INT32)
    total_timeout_seconds: int = Field(default=0, ge=0, le=MAX_INT32)
    timeout_policy: TimeoutPolicy = "TIME_OUT_WF"
    concurrent_exec_limit: int | None = Field(default=None, ge=0, le=MAX_INT32)
    rate_limit_per_frequency: int | None = Field(default=None, ge=0, le=MAX_INT32)
    rate_limit_frequency_in_seconds: int | None = Field(default=None, ge=0, le=MAX_INT32)
    input_keys: list[str] = Field(default_factory=list)
    output_keys: list[str] = Field(default_factory=list)
    input_template: dict[str, Any] = Field(default_factory=dict)
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None


class SubWorkflowParams(_Model):
    name: str
    version: int | None = Field(default=None, le=MAX_INT32)
    task_to_domain: dict[str, str] = Field(default_factory=dict)
    #: the child's definition itself (Conductor runs it without registering it)
    workflow_definition: Any = None
    #: the child run's priority (0-99; Conductor's SubWorkflowParams.priority)
    priority: Any = None
    #: shown in the SUB_WORKFLOW task's input, as Conductor's SubWorkflowTaskMapper
    #: forwards them; the child is not looked up by them (docs/conductor-compatibility.md)
    idempotency_key: Any = None
    idempotency_strategy: Any = None

    def child_priority(self, parent: int) -> int:
        """The child run's priority: ``priority`` when it is a whole number 0-99 (or its
        text), else the parent's, as before Conductor's field was read."""
        given = self.priority
        if isinstance(given, str) and given.strip().isdigit():
            given = int(given)
        if isinstance(given, int) and not isinstance(given, bool) and 0 <= given <= 99:
            return given
        return parent


class WorkflowTask(_Model):
    """One step of a definition (Conductor's ``WorkflowTask``).

    Type-specific settings follow Conductor:

    * SWITCH: ``evaluatorType`` (``value-param`` | ``javascript``), ``expression``,
      ``decisionCases``, ``defaultCase`` (legacy DECISION: ``caseValueParam``,
      ``caseExpression``).
    * FORK_JOIN: ``forkTasks`` (list of branches), followed by a JOIN with ``joinOn``.
    * DO_WHILE: ``loopCondition`` (javascript), ``loopOver``; ``items`` (or
      ``inputParameters._items``) iterates over a list.
    * WAIT: ``inputParameters.duration`` (e.g. ``"30s"``, ``"1h 5m"``) or
      ``inputParameters.until`` (ISO 8601 or ``yyyy-MM-dd HH:mm``, UTC unless a zone is
      given); neither means wait for an external completion.
    * HUMAN: completed through the API; ``inputParameters.instructions`` names an
      instruction text, ``inputParameters.timeoutSeconds`` bounds the wait.
    * SUB_WORKFLOW: ``subWorkflowParam`` {name, version}.
    * SET_VARIABLE: ``inputParameters`` are the variables to set.
    * TERMINATE: ``inputParameters.terminationStatus`` (COMPLETED | FAILED | TERMINATED),
      ``terminationReason``, ``workflowOutput``.
    * INLINE: ``inputParameters.evaluatorType`` (javascript), ``inputParameters.expression``.
    * JSON_JQ_TRANSFORM: ``inputParameters.queryExpression``.
    * FORK_JOIN_DYNAMIC: the branches come from the input: ``dynamicForkTasksParam`` names
      the input holding a list of workflow tasks and ``dynamicForkTasksInputParamName``
      the input holding their inputs by reference name; or ``inputParameters.forkTaskName``
      (or ``forkTaskWorkflow``) with ``forkTaskInputs``, one branch per input. A JOIN
      follows.
    * DYNAMIC: ``dynamicTaskNameParam`` names the input holding the worker task type.
    * EXCLUSIVE_JOIN: ``joinOn`` (the first of them that ran), ``defaultExclusiveJoinTask``.
    * START_WORKFLOW: ``inputParameters.startWorkflow`` (a StartWorkflowRequest).
    * LAMBDA: ``inputParameters.scriptExpression`` (the body of a javascript function).
    * NOOP: nothing.
    """

    name: str
    task_reference_name: str
    type: str = "WORKER"
    description: str | None = None
    input_parameters: dict[str, Any] = Field(default_factory=dict)
    optional: bool = False
    #: conductor-oss's ``permissive``: the task's failure (its retries spent) does not end
    #: the run at once; the run goes on and FAILS when it would have completed, a JOIN on
    #: the task fails once every task it joins on has ended, a loop at its iteration's end
    permissive: bool = False
    start_delay: int = Field(default=0, ge=0, le=MAX_INT32)
    async_complete: bool = False
    retry_count: int | None = Field(default=None, ge=0, le=MAX_INT32)
    # SWITCH / DECISION
    evaluator_type: str | None = None
    expression: str | None = None
    case_value_param: str | None = None
    case_expression: str | None = None
    decision_cases: dict[str, list[WorkflowTask]] = Field(default_factory=dict)
    default_case: list[WorkflowTask] = Field(default_factory=list)
    # FORK_JOIN / JOIN
    fork_tasks: list[list[WorkflowTask]] = Field(default_factory=list)
    join_on: list[str] = Field(default_factory=list)
    # DO_WHILE
    loop_condition: str | None = None
    loop_over: list[WorkflowTask] = Field(default_factory=list)
    #: list iteration: an expression giving the list to iterate over (conductor-oss; Orkes
    #: puts it in ``inputParameters._items``)
    items: str | None = None
    # SUB_WORKFLOW
    sub_workflow_param: SubWorkflowParams | None = None
    # FORK_JOIN_DYNAMIC, DYNAMIC, EXCLUSIVE_JOIN
    dynamic_fork_tasks_param: str | None = None
    dynamic_fork_tasks_input_param_name: str | None = None
    dynamic_fork_join_tasks_param: str | None = None
    dynamic_task_name_param: str | None = None
    default_exclusive_join_task: list[str] = Field(default_factory=list)
    # inline task definition (Conductor allows one on the workflow task)
    task_definition: TaskDef | None = None

    #: the type as the definition spells it when that is an alias (``SIMPLE``,
    #: ``DECISION``): written back in the definition's JSON and reported as the rows'
    #: ``taskType``, so a definition reads back as it was registered
    declared_type: str | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _remember_alias(cls, data: Any) -> Any:
        if isinstance(data, dict):
            raw = data.get("type", "SIMPLE")  # Conductor's default type
            if isinstance(raw, str) and raw.strip().upper() in TASK_TYPE_ALIASES:
                data = {**data, "declared_type": raw.strip().upper()}
        return data

    @model_validator(mode="before")
    @classmethod
    def _name_inline_task_definition(cls, data: Any) -> Any:
        """Conductor does not validate a workflow task's inline task definition, and
        exported definitions leave its name out: it is the task's."""
        if isinstance(data, dict) and "name" in data:
            key = "taskDefinition" if "taskDefinition" in data else "task_definition"
            inline = data.get(key)
            if isinstance(inline, dict) and "name" not in inline:
                data = {**data, key: {**inline, "name": data["name"]}}
        return data

    @field_validator("type", mode="before")
    @classmethod
    def _normalise_type(cls, value: Any) -> Any:
        if isinstance(value, str):
            upper = value.strip().upper()
            return TASK_TYPE_ALIASES.get(upper, upper)
        return value

    @model_serializer(mode="wrap")
    def _write_declared_type(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.declared_type and isinstance(data, dict) and "type" in data:
            data["type"] = self.declared_type
        return data

    def iterates_a_list(self) -> bool:
        """A DO_WHILE over a list (conductor-oss's ``isListIteration``): ``items`` is set,
        or ``inputParameters._items`` is a list or a non-blank string (Orkes' form)."""
        if self.items and self.items.strip():
            return True
        value = self.input_parameters.get("_items")
        return isinstance(value, list) or (isinstance(value, str) and bool(value.strip()))

    def children(self) -> Iterator[tuple[str, list[WorkflowTask]]]:
        """Nested task lists with their JSON path suffix (relative to this task)."""
        for case, tasks in self.decision_cases.items():
            yield f".decisionCases.{case}", tasks
        if self.default_case:
            yield ".defaultCase", self.default_case
        for i, branch in enumerate(self.fork_tasks):
            yield f".forkTasks[{i}]", branch
        if self.loop_over:
            yield ".loopOver", self.loop_over


class WorkflowDef(_Model):
    """A workflow definition (Conductor's ``WorkflowDef``)."""

    name: str
    description: str | None = None
    version: int = Field(default=1, ge=1, le=MAX_INT32)
    tasks: list[WorkflowTask] = Field(default_factory=list)
    input_parameters: list[str] = Field(default_factory=list)
    output_parameters: dict[str, Any] = Field(default_factory=dict)
    failure_workflow: str | None = None
    schema_version: int = Field(default=2, le=MAX_INT32)
    restartable: bool = True
    workflow_status_listener_enabled: bool = False
    owner_email: str | None = None
    timeout_policy: WorkflowTimeoutPolicy = "ALERT_ONLY"
    timeout_seconds: int = Field(default=0, ge=0, le=MAX_INT32)
    variables: dict[str, Any] = Field(default_factory=dict)
    input_template: dict[str, Any] = Field(default_factory=dict)
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None

    def run_input(self, given: dict[str, Any]) -> dict[str, Any]:
        """The input a run of this definition starts with, given ``given``: the
        ``inputTemplate`` fills the keys a non-empty input leaves out; an empty input
        stays empty (Conductor's StartWorkflowOperation applies
        ParametersUtils.getWorkflowInput only to a non-empty input). The one place of
        this rule: the run's record and the engine both take the input from here."""
        if not given or not self.input_template:
            return given
        return {**self.input_template, **given}

    def run_variables(self) -> dict[str, Any]:
        """The variables a run of this definition starts with: the definition's
        ``variables`` (Conductor's StartWorkflowOperation: ``workflow.setVariables(
        workflowDefinition.getVariables())``)."""
        return dict(self.variables)

    def walk(self) -> Iterator[TaskLocation]:
        """Every task of the definition, depth first, in definition order."""
        yield from walk_tasks(self.tasks, "$.tasks", ())


@dataclass(frozen=True)
class TaskLocation:
    """A task with its JSON path and the chain of container tasks around it."""

    task: WorkflowTask
    path: str
    ancestors: tuple[WorkflowTask, ...]


def walk_tasks(
    tasks: list[WorkflowTask], path: str, ancestors: tuple[WorkflowTask, ...]
) -> Iterator[TaskLocation]:
    for i, task in enumerate(tasks):
        here = f"{path}[{i}]"
        yield TaskLocation(task, here, ancestors)
        for suffix, nested in task.children():
            yield from walk_tasks(nested, here + suffix, (*ancestors, task))


WorkflowTask.model_rebuild()


#: The fields of Conductor's SchemaDef (a schema by name and version in a schema registry,
#: with the schema itself in ``data``).
_SCHEMA_DEF_FIELDS = frozenset(
    {
        "name",
        "version",
        "type",
        "data",
        "externalRef",
        "ownerApp",
        "createTime",
        "updateTime",
        "createdBy",
        "updatedBy",
    }
)


def schema_document(schema: Any) -> dict[str, Any] | None:
    """The JSON Schema an ``inputSchema`` / ``outputSchema`` holds, or None when there is
    none to check: a JSON Schema is itself; Conductor's SchemaDef (``{name, version,
    type}``, a reference into a schema registry) holds one only in ``data`` (type JSON);
    a reference alone is kept and not checked."""
    if not isinstance(schema, dict) or not schema:
        return None
    if "name" in schema and "$schema" not in schema and set(schema) <= _SCHEMA_DEF_FIELDS:
        data = schema.get("data")
        if str(schema.get("type") or "JSON").upper() == "JSON" and isinstance(data, dict):
            return data or None
        return None
    return schema
