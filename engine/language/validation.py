"""Validation of workflow definitions and task definitions.

Every check returns *all* problems of a document at once as :class:`ValidationIssue`
values with a JSON path into the document as it was written (camelCase field names, e.g.
``$.tasks[2].decisionCases.yes[0].taskReferenceName``). Errors refuse the document;
warnings (``severity="warning"``) name what Conductor accepts but is likely a mistake
(:func:`errors_only` leaves them out). Nothing here raises on bad input: unknown
Conductor fields are kept by the models and ignored by the checks.

Order of the issues: first the structural errors reported by pydantic (wrong types,
missing fields, values outside an enumeration); then, when the structure parsed, the
semantic rules below, in definition order.

Semantic rules for a workflow definition:

* the name can travel in a URL path and a database key (``protocol.limits.name_problem``:
  1-255 characters, no control characters, ``/`` or ``:``).
* ``taskReferenceName`` is unique across the whole nesting; a duplicate is reported at
  its second occurrence, naming the first.
* every ``${ref.…}`` reference names a task of the workflow. A reference to a task the
  workflow does not have is an error in the ``inputParameters`` of a top-level task (where
  Conductor refuses it: ``ConstraintParamUtil``) and a *warning* anywhere else (nested
  tasks, ``outputParameters``, loop conditions: Conductor accepts those and reads null).
* a reference should name a task that may have run before the referencing point: earlier
  in the sequence, an enclosing SWITCH / FORK_JOIN / DO_WHILE task, any task nested in an
  earlier SWITCH, FORK_JOIN or DO_WHILE. A later task, a task in a sibling fork branch
  (runs concurrently), a task in another SWITCH case or the task itself is a *warning*
  (Conductor accepts the definition; the reference reads null, or a value depending on
  timing). Inside a DO_WHILE any task of the same loop body may be referenced: one that
  runs later reads null on the first iteration and the previous iteration's value after.
  A DO_WHILE's own ``inputParameters``, resolved again for its ``loopCondition`` after
  every iteration, may read the loop itself and its body.
  ``ref__N`` names iteration N of a task inside a DO_WHILE. ``workflow`` and
  ``CPEWF_TASK_ID`` are always available. Expression syntax errors (``${`` not closed)
  are reported at the parameter.
* FORK_JOIN is followed by a JOIN; a JOIN follows a FORK_JOIN and its ``joinOn`` names
  only tasks inside that fork's branches.
* per type: SWITCH, DO_WHILE, WAIT, TERMINATE, SUB_WORKFLOW, HTTP, HUMAN settings; WORKER
  names are valid queue names; unknown types are listed with the known ones.
* an inline ``taskDefinition`` gets the task definition checks.

Task definitions: timeouts consistent, the name a valid Service Bus queue name (see
:data:`MAX_TASK_TYPE_LENGTH`), ``inputSchema`` / ``outputSchema`` valid JSON Schema.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from jsonschema import validators as _jsonschema_validators
from pydantic import ValidationError

from engine.language.definitions import (
    TASK_TYPE_ALIASES,
    TaskDef,
    TaskType,
    WorkflowDef,
    WorkflowTask,
    schema_document,
)
from engine.language.durations import parse_duration, parse_until
from engine.language.expressions import expression_errors, reference_paths
from engine.language.secret_refs import SECRETS_PREFIX, secret_names
from protocol.limits import name_problem
from protocol.queues import (
    HIGH_PRIORITY_SUFFIX,
    MAX_DOMAIN_LENGTH,
    MAX_QUEUE_NAME_LENGTH,
    MAX_TASK_TYPE_LENGTH,
    is_queue_name_part,
)

__all__ = [
    "EVALUATOR_TYPES",
    "MAX_DOMAIN_LENGTH",
    "MAX_QUEUE_NAME_LENGTH",
    "MAX_TASK_TYPE_LENGTH",
    "TERMINATION_STATUSES",
    "CodeArea",
    "Severity",
    "TaskDefLookup",
    "ValidationIssue",
    "check_coverage",
    "errors_only",
    "pydantic_issues",
    "queue_name_problem",
    "severity_mark",
    "validate_task_def",
    "validate_workflow",
]


class TaskDefLookup(Protocol):
    """The registered task definitions as the workflow checks read them: one by name (a
    dict, or one that reads the run store when asked)."""

    def get(self, name: str, /) -> TaskDef | None: ...


class CodeArea(Protocol):
    """A code area of the worker catalog, as :func:`check_coverage` reads it (the
    catalog's ``WorkerCatalogEntry`` is one; this package does not import ``workers``)."""

    @property
    def name(self) -> str: ...

    @property
    def task_types(self) -> Sequence[str]: ...


Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class ValidationIssue:
    """One problem of a document: a JSON path into it and a message."""

    path: str
    message: str
    #: "error" refuses the document; "warning" is reported and the document accepted
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        return f"{self.path}: {severity_mark(self.severity)}{self.message}"


def severity_mark(severity: Severity) -> str:
    """What precedes a message in a printed issue: nothing for an error."""
    return "" if severity == "error" else f"{severity}: "


def errors_only(issues: Iterable[ValidationIssue]) -> list[ValidationIssue]:
    """The issues that refuse a document (its warnings left out)."""
    return [issue for issue in issues if issue.is_error]


# --- queue names -------------------------------------------------------------------------

# One set of queue-name limits for the catalog, the Pulumi program and this validator
# (protocol.queues): a task type must fit in ``<type>-high`` and ``<domain>-<type>``
# within Service Bus's 260 characters.


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a task type (a Service Bus queue name), or None if it can."""
    if not name:
        return "a task type name must not be empty"
    if len(name) > MAX_TASK_TYPE_LENGTH:
        return (
            f"task type name is {len(name)} characters; at most {MAX_TASK_TYPE_LENGTH} fit "
            f"in a queue name with the {HIGH_PRIORITY_SUFFIX!r} suffix or a domain prefix "
            f"of up to {MAX_DOMAIN_LENGTH} characters"
        )
    if not is_queue_name_part(name):
        return (
            f"task type {name!r} is not a valid queue name: use letters, digits, '.', '-' "
            "and '_', starting and ending with a letter or digit"
        )
    if name.lower().endswith(HIGH_PRIORITY_SUFFIX):
        return (
            f"task type {name!r} must not end with {HIGH_PRIORITY_SUFFIX!r}: that suffix "
            "names the high-priority queue of another type"
        )
    return None


# --- paths -------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _key(name: str) -> str:
    """The path step for an object key: ``.name``, or ``["odd key"]`` (as expressions)."""
    if _PLAIN_KEY.match(name):
        return f".{name}"
    return f"[{json.dumps(name, ensure_ascii=False)}]"


def _join(prefix: str, loc: Iterable[int | str]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else _key(str(part))
    return path


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def pydantic_issues(error: ValidationError, prefix: str = "$") -> list[ValidationIssue]:
    """pydantic's errors as issues with wire (camelCase) paths."""
    issues: list[ValidationIssue] = []
    for item in error.errors():
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] in ("literal_error", "enum"):
            message += f" (got {_short(item.get('input'))})"
        issues.append(ValidationIssue(_join(prefix, item["loc"]), message))
    return issues


# --- expressions -------------------------------------------------------------------------

#: Roots of ``${…}`` references that are not task references.
_NON_TASK_ROOTS = frozenset({"workflow", "CPEWF_TASK_ID"})
_ITERATION_REF = re.compile(r"^(?P<base>.+)__(?P<n>\d+)$")


def _expression_problems(text: str) -> list[str]:
    """Syntax problems of the ``${…}`` expressions in one string."""
    return [f"{error.problem} in {_short(error.expression)}" for error in expression_errors(text)]


def _expression_roots(text: str) -> list[str]:
    """Task references (and ``workflow`` etc.) of one string; iterations as their task."""
    return [root for _, root in reference_paths(text)]


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string leaf of a JSON value with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, path + _key(str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


# --- WAIT ----------------------------------------------------------------------------


def _literal(value: Any) -> bool:
    """Set, and not a ``${…}`` expression (which is only known at run time)."""
    return value is not None and not (isinstance(value, str) and "${" in value)


# --- JSON Schema -------------------------------------------------------------------------


def _schema_issues(schema: Any, path: str) -> list[ValidationIssue]:
    """``schema`` checked against its meta-schema (``$schema``, default draft 2020-12);
    a Conductor SchemaDef only for its ``data`` (:func:`schema_document`)."""
    document = schema_document(schema)
    if document is not schema:
        path += ".data"
    schema = document
    if not isinstance(schema, Mapping) or not schema:
        return []
    dialect = schema.get("$schema")
    if dialect is not None:
        if not isinstance(dialect, str):
            return [ValidationIssue(path + ".$schema", "$schema must be a URI string")]
        cls = _jsonschema_validators.validator_for(schema, default=None)  # type: ignore[arg-type]
        if cls is None:
            return [ValidationIssue(path + ".$schema", f"unknown JSON Schema dialect {dialect!r}")]
    else:
        cls = _jsonschema_validators.Draft202012Validator
    meta_cls = _jsonschema_validators.validator_for(cls.META_SCHEMA, default=cls)
    meta = meta_cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    issues = []
    for error in sorted(meta.iter_errors(schema), key=lambda e: list(map(str, e.path))):
        where = _join(path, [p if isinstance(p, int) else str(p) for p in error.path])
        issues.append(ValidationIssue(where, f"not valid JSON Schema: {error.message}"))
    return issues


# --- task definitions --------------------------------------------------------------------


def _task_def_rules(
    td: TaskDef, prefix: str, check_name: bool = True, inline: bool = False
) -> list[ValidationIssue]:
    """``inline``: a workflow task's own ``taskDefinition``, whose timeouts Conductor does
    not relate to each other (TaskTimeoutConstraint applies to registered ones)."""
    issues: list[ValidationIssue] = []
    if check_name:
        problem = queue_name_problem(td.name)
        if problem:
            issues.append(ValidationIssue(prefix + ".name", problem))
    if inline:
        pass
    elif td.timeout_seconds > 0 and td.response_timeout_seconds > td.timeout_seconds:
        issues.append(
            ValidationIssue(
                prefix + ".responseTimeoutSeconds",
                f"responseTimeoutSeconds ({td.response_timeout_seconds}) must not exceed "
                f"timeoutSeconds ({td.timeout_seconds})",
            )
        )
    if not inline and 0 < td.total_timeout_seconds < td.timeout_seconds:
        issues.append(
            ValidationIssue(
                prefix + ".timeoutSeconds",
                f"timeoutSeconds ({td.timeout_seconds}) must not exceed "
                f"totalTimeoutSeconds ({td.total_timeout_seconds})",
            )
        )
    issues += _schema_issues(td.input_schema, prefix + ".inputSchema")
    issues += _schema_issues(td.output_schema, prefix + ".outputSchema")
    return issues


def validate_task_def(data: Mapping[str, Any] | TaskDef) -> list[ValidationIssue]:
    """All problems of one task definition (empty when it is valid)."""
    if isinstance(data, TaskDef):
        td = data
    else:
        try:
            td = TaskDef.model_validate(data)
        except ValidationError as exc:
            return pydantic_issues(exc)
    return _task_def_rules(td, "$")


# --- workflow definitions ----------------------------------------------------------------

#: SWITCH evaluators; ``graaljs`` (Conductor) is accepted as ``javascript``.
EVALUATOR_TYPES = ("value-param", "javascript", "graaljs")
TERMINATION_STATUSES = ("COMPLETED", "FAILED", "TERMINATED")
_KNOWN_TYPES = ", ".join(t.value for t in TaskType)
_ALIASES = ", ".join(f"{k} (= {v})" for k, v in TASK_TYPE_ALIASES.items())
_INSTRUCTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class _Scope:
    """One level of nesting: the container task, its type, and which branch."""

    ref: str
    type: str
    branch: str


@dataclass(frozen=True)
class _RefInfo:
    path: str
    scopes: tuple[_Scope, ...]

    @property
    def in_loop(self) -> bool:
        return any(s.type == TaskType.DO_WHILE for s in self.scopes)


def _branches(task: WorkflowTask, path: str) -> Iterator[tuple[str, str, list[WorkflowTask]]]:
    """(branch label, path, tasks) of a container task, in definition order."""
    for case, tasks in task.decision_cases.items():
        yield f"decisionCases{_key(case)}", f"{path}.decisionCases{_key(case)}", tasks
    if task.default_case:
        yield "defaultCase", f"{path}.defaultCase", task.default_case
    for i, branch in enumerate(task.fork_tasks):
        yield f"forkTasks[{i}]", f"{path}.forkTasks[{i}]", branch
    if task.loop_over:
        yield "loopOver", f"{path}.loopOver", task.loop_over


class _Union:
    """Membership in either of two sets, without copying the first (the refs visible at
    a point can be every task of a large definition)."""

    def __init__(self, first: Container[str], second: Container[str]) -> None:
        self.first = first
        self.second = second

    def __contains__(self, item: object) -> bool:
        return item in self.first or item in self.second


class _Within:
    """A container task's ref and every ref nested in it, answered from the refs' scopes
    (a set of them per DO_WHILE would make nested loops cost the square of their size)."""

    def __init__(self, refs: Mapping[str, _RefInfo], container: str) -> None:
        self.refs = refs
        self.container = container

    def __contains__(self, item: object) -> bool:
        if item == self.container:
            return True
        info = self.refs.get(item) if isinstance(item, str) else None
        return info is not None and any(scope.ref == self.container for scope in info.scopes)


_COMPUTED_SECRET = re.compile(r"\$\{\s*workflow\.secrets\.\$\{")
_REQUEST_FIELDS = ("uri", "headers", "body")


def _in_request(where: str, ip: str) -> bool:
    """Whether the path ``where`` is inside an HTTP request's URI, headers or body (the
    ``http_request`` form or the flat one)."""
    for base in (ip + ".http_request", ip):
        for field_name in _REQUEST_FIELDS:
            at = f"{base}.{field_name}"
            if where == at or where.startswith((at + ".", at + "[")):
                return True
    return False


def _refs_within(task: WorkflowTask) -> set[str]:
    refs: set[str] = set()
    for _, _, tasks in _branches(task, ""):
        for inner in tasks:
            refs.add(inner.task_reference_name)
            refs |= _refs_within(inner)
    return refs


#: "did you mean" hints per definition, and the most tasks a definition may have for them
_HINTS = 20
_HINT_REFS = 2000


class _WorkflowChecker:
    def __init__(
        self, wf: WorkflowDef, task_defs: TaskDefLookup | None, require: bool, warnings: bool
    ) -> None:
        self.wf = wf
        self.task_defs = task_defs
        #: every WORKER type needs a task definition in ``task_defs``
        self.require = require and task_defs is not None
        #: report warnings (off: only what refuses the definition is looked for)
        self.warnings = warnings
        self.issues: list[ValidationIssue] = []
        self.refs: dict[str, _RefInfo] = {}
        self._hints = 0
        #: a dynamic fork makes tasks only known when it runs: references to them are
        #: not checked
        self.dynamic = any(
            location.task.type == TaskType.FORK_JOIN_DYNAMIC for location in wf.walk()
        )

    def add(self, path: str, message: str, severity: Severity = "error") -> None:
        if severity == "error" or self.warnings:
            self.issues.append(ValidationIssue(path, message, severity))

    def _suggestion(self, root: str) -> str:
        """``; did you mean 'x'?`` for an unknown reference, for the first
        :data:`_HINTS` of them in a definition of at most :data:`_HINT_REFS` tasks: each
        hint compares the name with every ref (difflib), which for thousands of unknown
        references among thousands of tasks would take minutes."""
        if self._hints >= _HINTS or len(self.refs) > _HINT_REFS:
            return ""
        self._hints += 1
        hint = difflib.get_close_matches(root, list(self.refs), n=1)
        return f"; did you mean {hint[0]!r}?" if hint else ""

    def run(self) -> list[ValidationIssue]:
        problem = name_problem(self.wf.name, "the workflow name")
        if problem is not None:
            self.add("$.name", problem)
        # Conductor's WorkflowDef: @NotEmpty tasks, @Min(2) @Max(2) schemaVersion
        if not self.wf.tasks:
            self.add("$.tasks", "WorkflowTask list cannot be empty")
        if self.wf.schema_version != 2:
            self.add(
                "$.schemaVersion",
                f"workflowDef schemaVersion: {self.wf.schema_version} is only supported "
                "as 2 (Conductor's only schema version)",
            )
        self._index(self.wf.tasks, "$.tasks", ())
        self._check_list(self.wf.tasks, "$.tasks", set(), ())
        self._check_template(
            self.wf.output_parameters, "$.outputParameters", frozenset(self.refs), None, ()
        )
        self.issues += _schema_issues(self.wf.input_schema, "$.inputSchema")
        self.issues += _schema_issues(self.wf.output_schema, "$.outputSchema")
        return self.issues

    # -- pass 1: where every reference name is (first occurrence), duplicates

    def _index(self, tasks: list[WorkflowTask], path: str, scopes: tuple[_Scope, ...]) -> None:
        for i, task in enumerate(tasks):
            here = f"{path}[{i}]"
            ref = task.task_reference_name
            if not ref.strip():
                self.add(here + ".taskReferenceName", "taskReferenceName must not be empty")
            elif ref in self.refs:
                self.add(
                    here + ".taskReferenceName",
                    f"duplicate taskReferenceName {ref!r}: already used at {self.refs[ref].path}",
                )
            else:
                self.refs[ref] = _RefInfo(here, scopes)
            for label, inner_path, inner in _branches(task, here):
                self._index(inner, inner_path, (*scopes, _Scope(ref, task.type, label)))

    # -- pass 2: per-task rules and the references, with what may have run before

    def _check_list(
        self,
        tasks: list[WorkflowTask],
        path: str,
        visible: set[str],
        scopes: tuple[_Scope, ...],
    ) -> list[str]:
        """Check a task sequence; ``visible`` holds the refs that may have run before it,
        and has those that may have run after it added on return (the list of them, for
        the caller to take back when the sequence is one of several branches). One set,
        extended and taken back, not a copy per task: copies made a definition of n tasks
        cost n^2 (20,000 tasks took 12 s to register)."""
        added: list[str] = []

        def see(ref: str) -> None:
            if ref not in visible:
                visible.add(ref)
                added.append(ref)

        for i, task in enumerate(tasks):
            here = f"{path}[{i}]"
            ref = task.task_reference_name
            self._check_task(task, here, visible, scopes)
            if task.type in (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC):
                following = tasks[i + 1] if i + 1 < len(tasks) else None
                if following is None or following.type != TaskType.JOIN:
                    self.add(here, f"{task.type} {ref!r} must be followed by a JOIN task")
            if task.type == TaskType.JOIN:
                self._check_join(task, here, tasks[i - 1] if i > 0 else None)
            see(ref)
            # each branch sees what ran before the task and the task itself, not its
            # sibling branches; after the task, any of them may have run
            inside: list[str] = []
            for label, inner_path, inner in _branches(task, here):
                inner_scopes = (*scopes, _Scope(ref, task.type, label))
                branch = self._check_list(inner, inner_path, visible, inner_scopes)
                visible.difference_update(branch)
                inside += branch
            for inner_ref in inside:
                see(inner_ref)
            if task.type == TaskType.DO_WHILE and task.loop_condition:
                self._check_string(
                    task.loop_condition, here + ".loopCondition", visible, None, scopes
                )
            if task.type == TaskType.DO_WHILE and task.items:
                self._check_string(task.items, here + ".items", visible, None, scopes)
        return added

    def _check_join(self, task: WorkflowTask, path: str, previous: WorkflowTask | None) -> None:
        if previous is None or previous.type not in (
            TaskType.FORK_JOIN,
            TaskType.FORK_JOIN_DYNAMIC,
        ):
            self.add(path, "a JOIN must immediately follow a FORK_JOIN or FORK_JOIN_DYNAMIC task")
            return
        if previous.type == TaskType.FORK_JOIN_DYNAMIC:
            return  # its branches are known only when it runs
        inside = _refs_within(previous)
        for k, name in enumerate(task.join_on):
            if name not in inside:
                self.add(
                    f"{path}.joinOn[{k}]",
                    f"joinOn names {name!r}, which is not a task in the branches of "
                    f"FORK_JOIN {previous.task_reference_name!r}",
                )

    def _check_task(
        self,
        task: WorkflowTask,
        path: str,
        visible: Container[str],
        scopes: tuple[_Scope, ...],
    ) -> None:
        kind = task.type
        params = task.input_parameters
        ip = path + ".inputParameters"
        if kind == TaskType.DO_WHILE:
            # a DO_WHILE's inputParameters are resolved again after every iteration for
            # its loopCondition (``$.iteration: ${loop.output.iteration}``): they may
            # read the loop itself and its body, as the condition does
            visible = _Union(visible, _Within(self.refs, task.task_reference_name))
        self._check_template(params, ip, visible, task, scopes)
        self._check_secrets(task, ip)
        if self.warnings:
            self._check_unsupported(task, path)
        if kind not in TaskType.__members__:
            self.add(
                path + ".type",
                f"unknown task type {kind!r}; known types: {_KNOWN_TYPES} (aliases: {_ALIASES})",
            )
        elif kind == TaskType.WORKER:
            problem = queue_name_problem(task.name)
            if problem:
                self.add(path + ".name", problem)
            elif (
                self.task_defs is not None
                and (self.require or (self.warnings and task.task_definition is None))
                and self.task_defs.get(task.name) is None
            ):
                if self.require:
                    self.add(path + ".name", f"no task definition for WORKER type {task.name!r}")
                else:
                    self.add(
                        path + ".name",
                        f"no task definition for WORKER type {task.name!r}: it runs with "
                        "Conductor's default (3 retries 60 s apart, response timeout 3600 s, "
                        "TIME_OUT_WF)",
                        "warning",
                    )
        elif kind == TaskType.SWITCH:
            self._check_switch(task, path)
        elif kind == TaskType.DO_WHILE:
            # Conductor's WorkflowTaskTypeConstraint: a loopCondition, empty or not (an
            # empty one runs one iteration)
            if task.loop_condition is None and not task.iterates_a_list():
                self.add(
                    path + ".loopCondition",
                    "DO_WHILE needs a loopCondition, or items to iterate over",
                )
            if not task.loop_over:
                self.add(path + ".loopOver", "DO_WHILE needs at least one task in loopOver")
        elif kind == TaskType.FORK_JOIN:
            if not task.fork_tasks:
                self.add(path + ".forkTasks", "FORK_JOIN needs at least one branch")
        elif kind == TaskType.WAIT:
            self._check_wait(params, ip)
        elif kind == TaskType.TERMINATE:
            status = params.get("terminationStatus")
            if status not in TERMINATION_STATUSES:
                got = "it is missing" if status is None else f"got {_short(status)}"
                self.add(
                    ip + ".terminationStatus",
                    f"TERMINATE needs terminationStatus COMPLETED, FAILED or TERMINATED; {got}",
                )
        elif kind == TaskType.SUB_WORKFLOW:
            param = task.sub_workflow_param
            if param is None or not param.name.strip():
                self.add(
                    path + ".subWorkflowParam.name", "SUB_WORKFLOW needs subWorkflowParam.name"
                )
        elif kind == TaskType.HTTP:
            # Conductor (WorkflowTaskTypeConstraint.isHttpTaskValid): http_request, or uri /
            # method directly in inputParameters, or an inputTemplate with http_request
            request = params.get("http_request")
            flat = "uri" in params or "method" in params
            templated = self._templated(task, "http_request")
            uri = request.get("uri") if isinstance(request, Mapping) else params.get("uri")
            if not (flat or templated or isinstance(request, Mapping)) or (
                (flat or isinstance(request, Mapping))
                and not (isinstance(uri, str) and uri.strip())
            ):
                where = ".http_request.uri" if isinstance(request, Mapping) else ".uri"
                self.add(
                    ip + where,
                    "HTTP needs inputParameters.http_request.uri or inputParameters.uri",
                )
        elif kind == TaskType.JSON_JQ_TRANSFORM:
            # Conductor (isJSONJQTransformTaskValid): in inputParameters or an inputTemplate
            if "queryExpression" not in params and not self._templated(task, "queryExpression"):
                self.add(
                    ip + ".queryExpression",
                    "JSON_JQ_TRANSFORM needs inputParameters.queryExpression (or an "
                    "inputTemplate with one in its task definition)",
                )
        elif kind == TaskType.FORK_JOIN_DYNAMIC:
            simple = "forkTaskInputs" in params
            if not simple and task.dynamic_fork_join_tasks_param is None:
                if task.dynamic_fork_tasks_param is None:
                    self.add(
                        path + ".dynamicForkTasksParam",
                        "FORK_JOIN_DYNAMIC needs dynamicForkTasksParam (with "
                        "dynamicForkTasksInputParamName) or inputParameters.forkTaskInputs",
                    )
                elif task.dynamic_fork_tasks_input_param_name is None:
                    self.add(
                        path + ".dynamicForkTasksInputParamName",
                        "FORK_JOIN_DYNAMIC needs dynamicForkTasksInputParamName",
                    )
        elif kind == TaskType.DYNAMIC:
            if not task.dynamic_task_name_param:
                self.add(path + ".dynamicTaskNameParam", "DYNAMIC needs dynamicTaskNameParam")
        elif kind == TaskType.EXCLUSIVE_JOIN:
            if not task.join_on:
                self.add(path + ".joinOn", "EXCLUSIVE_JOIN needs joinOn")
        elif kind == TaskType.HUMAN:
            name = params.get("instructions")
            if isinstance(name, str) and "${" not in name and not _INSTRUCTION_NAME.match(name):
                self.add(
                    ip + ".instructions",
                    f"instructions {name!r} must name an instruction text: letters, digits, "
                    "'_', '-' and '.', starting with a letter or digit (no paths)",
                )
        if task.task_definition is not None:
            td_path = path + ".taskDefinition"
            self.issues += _task_def_rules(
                task.task_definition, td_path, check_name=kind == TaskType.WORKER, inline=True
            )
            if task.task_definition.name != task.name:
                # Conductor does not compare them (conductor-oss's DynamicForkTests
                # registers a FORK_JOIN_DYNAMIC with another task's definition): the task
                # runs with this definition and its own name, which names its type
                self.add(
                    td_path + ".name",
                    f"taskDefinition.name {task.task_definition.name!r} differs from the "
                    f"task name {task.name!r}: the task runs with this definition, as "
                    f"{task.name!r}",
                    "warning",
                )

    def _check_unsupported(self, task: WorkflowTask, path: str) -> None:
        """Conductor fields Stepway keeps but does not act on, set to what changes how a
        run goes there: a warning each, so that a definition exported from Conductor
        registers and its author learns where it will run differently
        (docs/conductor-compatibility.md, "Workflow task fields not supported")."""
        extra = task.model_extra or {}
        if extra.get("onStateChange"):
            self.add(
                path + ".onStateChange",
                "onStateChange is not supported: no event is published when this task's "
                "state changes",
                "warning",
            )
        if extra.get("cacheConfig"):
            self.add(
                path + ".cacheConfig",
                "cacheConfig is not supported: this task runs every time, its output is not cached",
                "warning",
            )

    def _check_secrets(self, task: WorkflowTask, ip: str) -> None:
        """A secret reference anywhere but an HTTP request's URI, headers or body stays
        its literal text (engine/language/secret_refs.py): a warning. A DYNAMIC task may
        run as an HTTP task, so its request fields count too."""
        request = task.type in (TaskType.HTTP, TaskType.DYNAMIC)
        for where, text in _strings(task.input_parameters, ip):
            if SECRETS_PREFIX not in text:
                continue
            if _COMPUTED_SECRET.search(text):
                self.add(
                    where,
                    "a secret's name cannot be computed (${workflow.secrets.${...}}): it reads "
                    "null",
                    "warning",
                )
            if secret_names(text) and not (request and _in_request(where, ip)):
                self.add(
                    where,
                    "references a secret, which stays its literal text here: a secret is "
                    "revealed only in an HTTP task's request (uri, headers, body), to the "
                    "hosts STEPWAY_SECRET_HOSTS binds it to",
                    "warning",
                )

    def _templated(self, task: WorkflowTask, key: str) -> bool:
        """Whether the task definition the task runs with (its own ``taskDefinition``,
        else the registered one, as the engine picks it) has ``key`` in its
        inputTemplate: the engine fills a missing input from it."""
        if task.task_definition is not None:
            return key in task.task_definition.input_template
        registered = self.task_defs.get(task.name) if self.task_defs is not None else None
        return registered is not None and key in registered.input_template

    def _check_switch(self, task: WorkflowTask, path: str) -> None:
        evaluator = task.evaluator_type
        if evaluator is not None and evaluator not in EVALUATOR_TYPES:
            self.add(
                path + ".evaluatorType",
                f"unknown evaluatorType {evaluator!r}; use value-param or javascript "
                "(graaljs is accepted as javascript)",
            )
            return
        if not (task.expression or task.case_value_param or task.case_expression):
            self.add(
                path + ".expression",
                "SWITCH needs an expression (or the legacy caseValueParam / caseExpression)",
            )
            return
        value_param = evaluator == "value-param" or (
            evaluator is None and not task.expression and not task.case_expression
        )
        if value_param:
            field, key = (
                ("expression", task.expression)
                if task.expression
                else ("caseValueParam", task.case_value_param)
            )
            if key is not None and key not in task.input_parameters:
                self.add(
                    f"{path}.{field}",
                    f"a value-param SWITCH reads inputParameters.{key}, which is not set "
                    "(the expression names an input parameter; put any ${...} reference "
                    "in inputParameters)",
                )

    def _check_wait(self, params: Mapping[str, Any], ip: str) -> None:
        """Literal ``duration`` / ``until`` read by the run's own parser
        (engine/language/durations.py), bound included, so that what registers runs."""
        duration = params.get("duration")
        until = params.get("until")
        if duration is not None and until is not None:
            self.add(ip, "WAIT takes either duration or until, not both")
        if _literal(duration):
            try:
                parse_duration(duration)
            except ValueError as exc:
                self.add(ip + ".duration", str(exc))
        if _literal(until):
            try:
                parse_until(until, int(time.time() * 1000))
            except ValueError as exc:
                self.add(ip + ".until", str(exc))

    # -- references

    def _check_template(
        self,
        value: Any,
        path: str,
        visible: Container[str],
        task: WorkflowTask | None,
        scopes: tuple[_Scope, ...],
    ) -> None:
        for where, text in _strings(value, path):
            self._check_string(text, where, visible, task, scopes)

    def _check_string(
        self,
        text: str,
        path: str,
        visible: Container[str],
        task: WorkflowTask | None,
        scopes: tuple[_Scope, ...],
    ) -> None:
        if "${" not in text:
            return
        problems = _expression_problems(text)
        for problem in problems:
            self.add(path, f"invalid expression: {problem}")
        if problems:
            return
        for root in dict.fromkeys(_expression_roots(text)):
            if root in _NON_TASK_ROOTS:
                continue
            ref = self._resolve(root)
            if ref is None and self.dynamic:
                continue
            if ref is None:
                suggestion = self._suggestion(root)
                # Conductor refuses an unknown reference in a top-level task's input only
                top_level_input = task is not None and not scopes
                self.add(
                    path,
                    f"references {root!r}, which is not a task of this workflow{suggestion}"
                    + ("" if top_level_input else "; it reads null"),
                    "error" if top_level_input else "warning",
                )
            elif ref not in visible and not self._same_loop(ref, scopes):
                self.add(
                    path,
                    f"references {root!r}, which cannot have run before this point: "
                    f"{self._why_not(ref, task, scopes)}",
                    "warning",
                )

    def _resolve(self, root: str) -> str | None:
        if root in self.refs:
            return root
        match = _ITERATION_REF.match(root)
        if match and match.group("base") in self.refs and self.refs[match.group("base")].in_loop:
            return match.group("base")
        return None

    def _same_loop(self, ref: str, scopes: tuple[_Scope, ...]) -> bool:
        """Whether ``ref`` and the referencing point are in one DO_WHILE body: from the
        second iteration on, the reference reads the previous iteration's task."""
        for mine, theirs in zip(scopes, self.refs[ref].scopes, strict=False):
            if mine.ref != theirs.ref:
                return False
            if mine.type == TaskType.DO_WHILE:
                return True
            if mine.branch != theirs.branch:
                return False
        return False

    def _why_not(self, ref: str, task: WorkflowTask | None, scopes: tuple[_Scope, ...]) -> str:
        if task is not None and ref == task.task_reference_name:
            return "it is this task itself"
        target = self.refs[ref].scopes
        for mine, theirs in zip(scopes, target, strict=False):
            if mine.ref != theirs.ref:
                break
            if mine.branch != theirs.branch:
                if mine.type == TaskType.FORK_JOIN:
                    return f"it runs in a parallel branch of FORK_JOIN {mine.ref!r}"
                if mine.type == TaskType.SWITCH:
                    return f"it is in another case of SWITCH {mine.ref!r}"
                break
        return f"it runs later ({self.refs[ref].path})"


def validate_workflow(
    data: Mapping[str, Any] | WorkflowDef,
    task_defs: TaskDefLookup | None = None,
    *,
    require_task_defs: bool = True,
    warnings: bool = True,
) -> list[ValidationIssue]:
    """All problems of one workflow definition (empty when it is valid).

    ``task_defs``: the registered task definitions by name; their inputTemplates count
    for a system task's required input (an HTTP ``http_request``, a JSON_JQ_TRANSFORM
    ``queryExpression``). With them and ``require_task_defs``, every WORKER type also
    needs a task definition there; an inline ``taskDefinition`` does not count, because
    registering the task definition is what creates the type's queues. Without
    ``require_task_defs``, a WORKER type with neither is a warning (it runs with
    Conductor's default task definition). Without ``warnings`` only errors are looked
    for (a start with an inline definition has no one to show warnings to).
    """
    if isinstance(data, WorkflowDef):
        wf = data
    else:
        try:
            wf = WorkflowDef.model_validate(data)
        except ValidationError as exc:
            return pydantic_issues(exc)
    return _WorkflowChecker(wf, task_defs, require_task_defs, warnings).run()


def check_coverage(
    workflows: list[WorkflowDef],
    task_defs: Mapping[str, TaskDef],
    catalog: Iterable[CodeArea],
) -> list[ValidationIssue]:
    """Every WORKER type used has a task definition and a worker in the catalog.

    Routing is strict (docs/architecture.md, "Engine roles and routing"): a type without
    a worker waits forever, a type without a task definition has no queue. One issue per
    workflow and type, at its first use.
    """
    area_of: dict[str, str] = {}
    for entry in catalog:
        for task_type in entry.task_types:
            area_of.setdefault(task_type, entry.name)
    issues: list[ValidationIssue] = []
    for wf in workflows:
        seen: set[str] = set()
        for location in wf.walk():
            task = location.task
            if task.type != TaskType.WORKER or task.name in seen:
                continue
            if queue_name_problem(task.name):
                continue  # not a usable type name at all; validate_workflow reports it
            seen.add(task.name)
            has_def = task.name in task_defs
            area = area_of.get(task.name)
            subject = f"WORKER type {task.name!r} used by workflow {wf.name!r}"
            if not has_def and area is None:
                message = (
                    f"{subject} has no task definition and no worker in the catalog lists it "
                    "(add a task definition and list the type under taskTypes in a "
                    "workers/<area>/worker.yaml)"
                )
            elif not has_def:
                message = (
                    f"{subject} has no task definition (expected e.g. "
                    f"workers/{area}/taskdefs/{task.name}.json)"
                )
            elif area is None:
                message = (
                    f"{subject} has a task definition but no worker in the catalog lists it "
                    "(add it to taskTypes in a workers/<area>/worker.yaml)"
                )
            else:
                continue
            issues.append(ValidationIssue(location.path + ".name", message))
    return issues
