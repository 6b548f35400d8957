"""Run store port: runs, task rows, definitions, poll data, leases and limit counters.

The run store is the durable record of everything the control plane and the
interpreter's activities need outside the orchestration history. The API is
synchronous: it is called from durabletask activities and from FastAPI handlers
running in threads. Every method is one transaction, and most are one statement;
``batch`` makes several calls one transaction.

Conventions
-----------
* Times are epoch milliseconds (``int``) and are always passed in by the caller
  (``now``), so the store never reads a clock and tests are deterministic.
* Records use snake_case attributes; ``model_dump(by_alias=True)`` gives the
  Conductor camelCase field names (``workflowId``, ``referenceTaskName`` ...).
* Large JSON values are either inline (``input``, ``output_data`` ...) or an
  offload reference into the payload store (``input_ref``, ``output_ref`` ...).
* A database that cannot be used right now (locked past its wait, unreachable,
  restarting, out of resources) raises :class:`RunStoreUnavailable`: the call wrote
  nothing and may be made again. Any other error of the database raises
  :class:`RunStoreRefused`, naming it without the values it quotes.

Monotonic statuses
------------------
Writes that change a status say whether they applied (``bool``). A late or
duplicate write never moves a row backwards:

* Run: RUNNING <-> PAUSED freely; RUNNING/PAUSED -> any terminal status; a
  terminal status is final (only the explicit operator action ``reopen_run``
  leaves it). Non-status updates (variables, output) apply only while the run
  is not terminal.
* Task, for the same attempt: SCHEDULED -> IN_PROGRESS -> terminal. Writing the
  current status again applies (IN_PROGRESS updates carry progress, a repeated
  SCHEDULED write from a retried activity is harmless); a terminal status is
  final. A write for an older attempt never applies. A write for a newer
  attempt (a retry) replaces the row unless the row already succeeded
  (COMPLETED, COMPLETED_WITH_ERRORS, SKIPPED).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# The status enums live with the definition models; re-exported here for callers of the port.
from engine.language.definitions import RunStatus as RunStatus
from engine.language.definitions import TaskStatus as TaskStatus

RUN_TERMINAL: frozenset[RunStatus] = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED}
)
RUN_ACTIVE: frozenset[RunStatus] = frozenset({RunStatus.RUNNING, RunStatus.PAUSED})


TASK_TERMINAL: frozenset[TaskStatus] = frozenset(
    {
        TaskStatus.COMPLETED,
        TaskStatus.COMPLETED_WITH_ERRORS,
        TaskStatus.FAILED,
        TaskStatus.FAILED_WITH_TERMINAL_ERROR,
        TaskStatus.TIMED_OUT,
        TaskStatus.CANCELED,
        TaskStatus.SKIPPED,
    }
)
#: Terminal task statuses that a newer attempt may NOT replace.
TASK_SUCCEEDED: frozenset[TaskStatus] = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.COMPLETED_WITH_ERRORS, TaskStatus.SKIPPED}
)


class RunStoreUnavailable(Exception):
    """The run store cannot be used right now: its database is locked past the busy
    timeout, unreachable, restarting or out of resources. Nothing was written by the
    call that raised it; the same call may succeed when tried again. Integrity and
    programming errors are not this: they raise as the database raised them.

    ``reason`` names what is wrong in words safe to show a caller (no statement, no
    parameter, no address or credential); ``detail`` names the driver's error (its class
    and code) for the server's log."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"run store unavailable: {reason}")
        self.reason = reason
        self.detail = detail


class RunStoreRefused(Exception):
    """The run store's database refused the call for a reason that trying again will not
    change (a constraint, a value the database cannot store, an error in a statement):
    nothing was written by the call that raised it. Its message names the database's
    error by class and code and its primary message, never the statement's values nor
    the row the database quotes (runs' inputs and outputs): it reaches logs, error
    bodies and tasks' reasons."""


class _Record(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class NewRun(_Record):
    """What ``create_run`` needs. ``status`` defaults to RUNNING."""

    workflow_id: str
    name: str
    version: int
    status: RunStatus = RunStatus.RUNNING
    input: Any = None
    input_ref: str | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str | None = None
    priority: int = Field(default=0, ge=0, le=99)
    task_to_domain: dict[str, str] = Field(default_factory=dict)
    idempotency_key: str | None = None
    parent_workflow_id: str | None = None
    parent_task_id: str | None = None
    create_time: int
    #: the definition snapshot the run executes (``engine.runtime.snapshots``)
    definition_ref: str | None = None
    #: part of the task ids of the run's current execution (a restart, rerun or retry
    #: starts a new one)
    generation: str | None = None


class RunRecord(NewRun):
    output: Any = None
    output_ref: str | None = None
    reason_for_incompletion: str | None = None
    failed_reference_task_names: list[str] = Field(default_factory=list)
    update_time: int
    end_time: int | None = None
    #: Conductor's ``lastRetriedTime``: when the run was last retried (epoch ms)
    last_retried_time: int | None = None


class RunUpdate(_Record):
    """A partial run update: only the fields that are set are written."""

    status: RunStatus | None = None
    output: Any = None
    output_ref: str | None = None
    variables: dict[str, Any] | None = None
    reason_for_incompletion: str | None = None
    failed_reference_task_names: list[str] | None = None
    end_time: int | None = None
    # what a retry, restart or rerun changes
    #: the definition version the run executes (a restart with the latest definitions)
    version: int | None = Field(default=None, ge=1)
    input: Any = None
    input_ref: str | None = None
    correlation_id: str | None = None
    create_time: int | None = None
    last_retried_time: int | None = None
    definition_ref: str | None = None
    generation: str | None = None


class CreateRunResult(_Record):
    workflow_id: str
    created: bool
    """False when the run already existed (same workflowId, or same idempotency key)."""


class RunQuery(_Record):
    name: str | None = None
    names: list[str] | None = Field(default=None, max_length=1000)
    """Any of these definition names (with ``name``: both must hold)."""
    statuses: list[RunStatus] | None = None
    correlation_id: str | None = None
    correlation_ids: list[str] | None = Field(default=None, max_length=1000)
    """Any of these correlation ids (with ``correlation_id``: both must hold)."""
    free_text: str | None = None
    """The run's workflow id, correlation id or definition name is this text."""
    create_time_from: int | None = None
    """Inclusive lower bound on createTime (epoch ms)."""
    create_time_to: int | None = None
    """Exclusive upper bound on createTime (epoch ms)."""
    start: int = Field(default=0, ge=0)
    size: int = Field(default=100, ge=0, le=1000)
    oldest_first: bool = False
    """createTime ascending (then workflowId ascending) instead of newest first."""


class PendingStart(_Record):
    """A run whose start was answered but whose orchestration may not be scheduled yet
    (``create_run`` with ``start``; ``delete_pending_starts`` once it is scheduled)."""

    workflow_id: str
    #: the orchestration's input (a RunInput in camelCase, a JSON object)
    run_input: dict[str, Any]
    created_at: int  # epoch ms (the run's create_time)


class KeptStep(_Record):
    """The result of a built-in step done in an orchestration's work item, kept for the
    replays of that work item (``put_step_result``)."""

    #: the built-in activity's result envelope
    result: dict[str, Any]
    #: when it was kept (epoch ms): the step's end, which a replay decides at again
    kept_at: int


class SearchResult(_Record):
    total_hits: int
    results: list[RunRecord]


class TaskRecord(_Record):
    task_id: str
    workflow_id: str
    reference_task_name: str
    #: the task's kind (``WORKER``, ``HUMAN``, ``HTTP`` ...)
    task_type: str
    #: Conductor's ``taskDefName``: for a WORKER task its worker task type (the queue is
    #: derived from it), else the task's ``name`` in the definition
    task_def_name: str | None = None
    status: TaskStatus = TaskStatus.SCHEDULED
    attempt: int = 1
    """1-based attempt number; the lease key is (task_id, attempt)."""
    retry_count: int = 0
    seq: int = 0
    input_data: Any = None
    input_ref: str | None = None
    output_data: Any = None
    output_ref: str | None = None
    reason_for_incompletion: str | None = None
    scheduled_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    update_time: int | None = None
    worker_id: str | None = None
    poll_count: int = 0
    callback_after_seconds: int = 0
    domain: str | None = None
    queue_name: str | None = None
    iteration: int = 0
    #: Conductor's ``retriedTaskId``: the attempt this one retries
    retried_task_id: str | None = None
    #: Conductor's ``retried``: a retry replaced this attempt
    retried: bool = False


class TaskUpdate(_Record):
    """A partial task update: only the fields that are set are written."""

    status: TaskStatus | None = None
    output_data: Any = None
    output_ref: str | None = None
    reason_for_incompletion: str | None = None
    worker_id: str | None = None
    start_time: int | None = None
    end_time: int | None = None
    callback_after_seconds: int | None = None
    #: a DO_WHILE's row: the iteration its loop is in
    iteration: int | None = None
    #: a SUB_WORKFLOW's row once its child exists: the input naming the child
    input_data: Any = None


class TaskLog(_Record):
    task_id: str
    log: str
    created_time: int


#: the log entries a task keeps: the first ones, then one ``TASK_LOGS_DROPPED`` entry;
#: entries appended after that are not kept. A worker that logs without end (an
#: IN_PROGRESS callback that adds lines each time, a loop posting to ``/log``) cannot
#: grow a task's log, and the store, without bound. Appends to one task take turns (SQLite
#: has one writer; on PostgreSQL each takes an advisory lock of the task): the limit is exact.
MAX_TASK_LOG_ENTRIES = 1000

#: the entry that ends a task's log once it holds ``MAX_TASK_LOG_ENTRIES``
TASK_LOGS_DROPPED = (
    f"[stepway] this task's log holds its first {MAX_TASK_LOG_ENTRIES} entries; "
    "later entries are not kept"
)


class DefinitionRecord(_Record):
    name: str
    version: int
    definition: dict[str, Any]
    create_time: int
    update_time: int


class DefinitionVersion(_Record):
    """A registered definition's name, version and creation time, without its body."""

    name: str
    version: int
    create_time: int


class TaskDefRecord(_Record):
    name: str
    definition: dict[str, Any]
    create_time: int
    update_time: int


class InstructionRecord(_Record):
    """Instruction texts are versioned like definitions: (name, version) -> text."""

    name: str
    version: int
    text: str
    create_time: int


class PollData(_Record):
    task_type: str
    domain: str | None
    worker_id: str
    last_poll_time: int


class Lease(_Record):
    task_id: str
    attempt: int
    #: the lease holder: the authenticated principal that polled the attempt, or its
    #: ``workerId`` when authentication is off
    worker_id: str
    expires_at: int
    acquired_at: int
    sequence_number: int | None = None
    queue_name: str | None = None
    released: bool = False
    #: the task type whose concurrency slot the attempt holds (freed with the lease);
    #: None when it holds none (the type has no ``concurrentExecLimit``)
    slot: str | None = None
    #: when the deferred message ``sequence_number`` was found settled (completed,
    #: dead-lettered or gone: :meth:`RunStore.mark_settled`); None while it is not known
    #: to be (a hand-out that takes the lease again clears it)
    settled_at: int | None = None


class EndedAttempt(_Record):
    """A handed-out attempt that is over, whose deferred message is not marked settled
    (:meth:`RunStore.unsettled_attempts`): its lease, and what its task row says now."""

    lease: Lease
    #: the row's attempt: the lease's, or a later one that replaced it
    row_attempt: int
    #: the row's status (at ``row_attempt``)
    status: TaskStatus
    #: a retry replaced the attempt (Conductor's ``retried``)
    retried: bool = False
    reason_for_incompletion: str | None = None

    @property
    def key(self) -> tuple[int, str, int]:
        """Its place in the order of :meth:`RunStore.unsettled_attempts` (``after``)."""
        return (self.lease.acquired_at, self.lease.task_id, self.lease.attempt)


class TaskLimits(_Record):
    """The limits a hand-out of ``task_type`` is subject to (0: none)."""

    task_type: str
    concurrency_limit: int = 0
    rate_per_frequency: int = 0
    rate_frequency_seconds: int = 0


class HandOut(_Record):
    """What :meth:`RunStore.hand_out_task` did: the row it moved to IN_PROGRESS, or
    nothing, with ``limited`` when a concurrency or rate limit refused it."""

    task: TaskRecord | None = None
    limited: bool = False


class RunWatch(Protocol):
    """Wakes a reader waiting for a run to change (``RunStore.watch``)."""

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for a write to the watched run (its row or
        one of its task rows) committed by this process since the watch began or since
        the last ``wait``; whether one was. Writes of other processes wake nobody: a
        reader re-reads the store after the timeout as well."""
        ...


@runtime_checkable
class RunStore(Protocol):
    """The run store port. Adapters: ``engine.adapters.run_store_sql.SqlRunStore``."""

    def close(self) -> None: ...

    def batch(self) -> AbstractContextManager[None]:
        """A block in which the calls of this thread are one transaction: committed at
        its end, rolled back when it raises; reads inside it see its writes. A batch
        inside a batch is part of it. Other threads' calls wait for (SQLite) or do not
        see (PostgreSQL) its writes until it ends."""
        ...

    def watch(self, workflow_id: str) -> AbstractContextManager[RunWatch]:
        """Watch a run for the duration of a block: a reader that read the store inside
        the block and did not find what it waits for calls ``wait`` instead of polling.
        Its writers in this process (the embedded engine, this process's API) wake it
        once their transaction committed."""
        ...

    # --- runs ---------------------------------------------------------------
    def create_run(self, run: NewRun, start: dict[str, Any] | None = None) -> CreateRunResult:
        """Insert a run. Idempotent: if a run with the same workflow_id, or with the
        same (name, idempotency_key) exists, nothing is written and the existing
        run's id is returned with ``created=False``. With ``start`` (the orchestration
        input), a run that is created gets a pending start with it in the same
        transaction; a run not created (it existed) gets none."""
        ...

    def add_pending_start(self, workflow_id: str, start: dict[str, Any], now: int) -> bool:
        """Give an existing run a pending start (``start``: the orchestration input),
        replacing one it had; False (nothing written) when the run does not exist."""
        ...

    def pending_starts(self, limit: int = 100) -> list[PendingStart]:
        """Pending starts, oldest first (created_at, then workflow_id), at most ``limit``."""
        ...

    def has_pending_start(self, workflow_id: str) -> bool:
        """Whether the run has a pending start (its orchestration may not be scheduled)."""
        ...

    def delete_pending_starts(self, workflow_ids: Sequence[str]) -> int:
        """Delete the pending starts of these runs (their orchestrations are scheduled), in one
        transaction; how many existed. An empty list writes nothing."""
        ...

    def get_run(self, workflow_id: str) -> RunRecord | None: ...

    def update_run(self, workflow_id: str, update: RunUpdate, now: int) -> bool:
        """Apply the set fields of ``update`` monotonically (see module doc).
        Moving to a terminal status sets end_time to ``update.end_time`` or ``now``.
        Returns whether the write applied."""
        ...

    def reopen_run(self, workflow_id: str, now: int) -> bool:
        """Operator retry/rerun: move a terminal run back to RUNNING, clearing
        end_time and the failure reason. The one deliberate exception to monotonicity."""
        ...

    def terminate_ended(self, workflow_id: str, reason: str, now: int) -> bool:
        """Operator terminate of a run that ended FAILED or TIMED_OUT: TERMINATED with
        ``reason``, its end time kept (Conductor's terminateWorkflow refuses only a
        COMPLETED run). Returns whether the write applied."""
        ...

    def delete_run(self, workflow_id: str) -> bool:
        """Delete a run with its task rows, task logs, leases, pending start and step
        results."""
        ...

    def put_step_result(
        self,
        workflow_id: str,
        task_id: str,
        attempt: int,
        result: dict[str, Any],
        now: int,
        execution: int = 0,
    ) -> None:
        """Keep the result of a built-in step's attempt done in an orchestration's work
        item (``engine.runtime.interpreter.LocalBuiltin``) in the run's ``execution``
        (its continue-as-new count), replacing one kept before (the work item done
        again), and delete in the same write those kept in the run's earlier executions
        (no replay reads them again)."""
        ...

    def get_step_result(self, workflow_id: str, task_id: str, attempt: int) -> KeptStep | None:
        """The result kept by ``put_step_result`` and when (its ``now``), or None."""
        ...

    def reopen_task(self, task_id: str, attempt: int, output: dict[str, Any], now: int) -> bool:
        """Operator retry of a run whose SUB_WORKFLOW task waits for its child run again
        (Conductor's ``updateAndPushParents``): move the attempt back from an unsuccessful
        end (FAILED, FAILED_WITH_TERMINAL_ERROR, TIMED_OUT, CANCELED) to IN_PROGRESS,
        clearing its end time and reason, its output ``output``. False when the row is
        not at ``attempt`` or not so ended."""
        ...

    def mark_retried(self, task_id: str, now: int) -> bool:
        """Flag an attempt a retry replaced (Conductor's ``retried``), whatever its
        status; False when there is no such row."""
        ...

    def delete_tasks(
        self,
        workflow_id: str,
        task_ids: list[str] | None = None,
        *,
        instances: list[str] | None = None,
    ) -> int:
        """Delete task rows of a run (all, those of ``task_ids``, or those of the task
        instances ``instances`` names by reference name, each with the instances nested
        in it: ``ref`` and ``ref__*``, case-sensitive, every attempt) with their logs and
        leases (a restart or rerun decides them again; a DO_WHILE's keepLastN drops an
        iteration); the number deleted."""
        ...

    def search_runs(self, query: RunQuery) -> SearchResult:
        """Filter by name, statuses, correlation id and createTime range; newest first
        (createTime desc, then workflowId desc), or oldest first (``oldest_first``: both
        ascending); page with start/size; total_hits counts all matches."""
        ...

    # --- tasks --------------------------------------------------------------
    def upsert_task(self, task: TaskRecord, now: int) -> bool:
        """Insert the task row or replace it under the monotonic rules (see module
        doc). Returns whether the write applied."""
        ...

    def update_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        logs: Sequence[str] = (),
    ) -> bool:
        """Apply the set fields of ``update`` to the row if it is still at ``attempt``
        and the status change is allowed, and append ``logs`` to the task's log in the
        same transaction when it applied. Returns whether the write applied."""
        ...

    def start_task(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        lease_expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
        holder: str | None = None,
    ) -> TaskRecord | None:
        """The poll's bookkeeping in one transaction: acquire the lease of
        (task_id, attempt) for ``holder`` (default ``worker_id``; the control plane
        passes the authenticated principal) and move the row to IN_PROGRESS
        (worker_id, poll_count + 1, update_time; start_time at the attempt's first
        hand-out only, as Conductor's poll sets it once). Returns the updated row, or None
        (nothing written) when the task is stale (row missing, at another attempt,
        or terminal) or another worker holds a live lease."""
        ...

    def hand_out_task(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        lease_expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
        holder: str | None = None,
        limits: TaskLimits | None = None,
    ) -> HandOut:
        """A poll's hand-out in one transaction: what ``start_task`` does, and, under
        ``limits``, a concurrency slot (only with a ``concurrency_limit``: the lease
        then names it in ``slot``) and a rate token. All or nothing: a stale task
        writes nothing (``task`` None), and neither does one a limit refuses
        (``limited``)."""
        ...

    def get_task(self, task_id: str) -> TaskRecord | None: ...

    def task_state(self, task_id: str) -> tuple[int, TaskStatus] | None:
        """``(attempt, status)`` of the task's row, without reading its data."""
        ...

    def get_task_with_lease(self, task_id: str) -> tuple[TaskRecord | None, Lease | None]:
        """The task row and the lease of its current attempt, read together."""
        ...

    def finish_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        holder: str,
        logs: Sequence[str] = (),
    ) -> bool:
        """``update_task`` (``logs`` included), and when it applied, ``release_lease`` of
        ``holder``'s lease of that attempt, in one transaction: a worker's result and the
        log lines that came with it are kept together or not at all. Returns whether the
        update applied."""
        ...

    def give_back_task(
        self,
        task_id: str,
        attempt: int,
        update: TaskUpdate,
        now: int,
        *,
        holder: str,
        logs: Sequence[str] = (),
    ) -> bool:
        """A worker gives its attempt back to be handed out again later (an IN_PROGRESS
        result with ``callbackAfterSeconds``): the row goes SCHEDULED from IN_PROGRESS,
        with ``update``'s other fields and ``logs``, and ``holder``'s lease is released,
        in one transaction, as Conductor's updateTask sets such a task SCHEDULED. The
        only transition back the row allows; False when the row was not IN_PROGRESS at
        that attempt."""
        ...

    def list_tasks(self, workflow_id: str) -> list[TaskRecord]:
        """Task rows of a run ordered by seq, then task_id."""
        ...

    def failed_task_refs(self, workflow_id: str) -> list[str]:
        """The reference names of the run's FAILED and FAILED_WITH_TERMINAL_ERROR task
        rows, each once, in the order of the rows (``seq``); no task data is read."""
        ...

    def list_open_tasks(
        self, task_type: str, *, start: int = 0, size: int = 100
    ) -> list[TaskRecord]:
        """Rows of ``task_type`` (the stored type: ``HUMAN``, ``WAIT`` ...) that are not
        terminal, across all runs, oldest first (scheduled_time, then task_id): the HUMAN
        inbox of the console. Paged with start/size."""
        ...

    def append_task_log(self, task_id: str, log: str, now: int) -> None:
        """Append ``log`` to the task's log, as every method that takes ``logs`` does:
        up to ``MAX_TASK_LOG_ENTRIES`` entries, then ``TASK_LOGS_DROPPED`` once, then
        nothing."""
        ...

    def list_task_logs(self, task_id: str) -> list[TaskLog]:
        """In append order."""
        ...

    # --- definitions --------------------------------------------------------
    def put_definition(self, name: str, version: int, definition: dict[str, Any], now: int) -> None:
        """Create or replace (name, version)."""
        ...

    def get_definition(self, name: str, version: int | None = None) -> DefinitionRecord | None:
        """``version=None`` returns the latest (highest) version."""
        ...

    def definition_stamp(self, name: str, version: int | None = None) -> tuple[int, int] | None:
        """``(version, update_time)`` of what :meth:`get_definition` would return, without
        reading the definition itself (a start checks its cache with it)."""
        ...

    def list_definitions(self, name: str | None = None) -> list[DefinitionRecord]:
        """Ordered by name, then version."""
        ...

    def definition_versions(self) -> list[DefinitionVersion]:
        """Every registered definition's name, version and creation time, ordered by name,
        then version; the bodies are not read."""
        ...

    def delete_definition(self, name: str, version: int) -> bool: ...

    def put_task_def(self, name: str, definition: dict[str, Any], now: int) -> None: ...

    def get_task_def(self, name: str) -> TaskDefRecord | None: ...

    def list_task_defs(self) -> list[TaskDefRecord]: ...

    def delete_task_def(self, name: str) -> bool: ...

    def put_instruction(self, name: str, version: int, text: str, now: int) -> None:
        """Create or replace instruction text (name, version)."""
        ...

    def get_instruction(self, name: str, version: int | None = None) -> InstructionRecord | None:
        """``version=None`` returns the latest version."""
        ...

    # --- poll data ----------------------------------------------------------
    def record_poll(self, task_type: str, domain: str | None, worker_id: str, now: int) -> None:
        """Upsert the last poll time of (task_type, domain, worker_id)."""
        ...

    def get_poll_data(self, task_type: str) -> list[PollData]: ...

    def get_all_poll_data(self) -> list[PollData]: ...

    # --- leases -------------------------------------------------------------
    def acquire_lease(
        self,
        task_id: str,
        attempt: int,
        worker_id: str,
        *,
        expires_at: int,
        now: int,
        sequence_number: int | None = None,
        queue_name: str | None = None,
    ) -> bool:
        """Atomically take the lease of (task_id, attempt). Succeeds when there is no
        lease, or the existing one is released or expired (expires_at <= now).
        At most one caller wins; returns whether this caller holds it now."""
        ...

    def get_lease(self, task_id: str, attempt: int | None = None) -> Lease | None:
        """The lease of an attempt; ``attempt=None`` means the task row's current attempt."""
        ...

    def is_lease_holder(
        self, task_id: str, worker_id: str, *, attempt: int | None = None, now: int | None = None
    ) -> bool:
        """True iff ``worker_id`` holds the unreleased lease of the task row's
        CURRENT attempt (and, when ``attempt`` is given, that attempt is the
        current one; when ``now`` is given, the lease has not expired)."""
        ...

    def release_lease(self, task_id: str, attempt: int, worker_id: str | None = None) -> bool:
        """Mark the lease released (only if held by ``worker_id`` when given) and free
        the concurrency slot it holds (``Lease.slot``), once."""
        ...

    def extend_lease(
        self, task_id: str, attempt: int, worker_id: str, *, expires_at: int, now: int
    ) -> bool:
        """Move the expiry of ``worker_id``'s unreleased lease of the attempt to
        ``expires_at`` (``acquired_at`` to ``now``); it keeps its slot. Returns whether
        the lease was extended."""
        ...

    def expire_lease(self, task_id: str, attempt: int, now: int) -> bool:
        """Set the lease's expiry to ``now`` so that another worker can take it."""
        ...

    def mark_settled(self, task_id: str, attempt: int, sequence_number: int, now: int) -> bool:
        """Record that the deferred message ``sequence_number`` of the attempt's lease is
        settled (``Lease.settled_at = now``); nothing when it is recorded already or the
        lease names another message now. Whether it wrote."""
        ...

    def mark_settled_later(
        self, task_id: str, attempt: int, sequence_number: int, now: int
    ) -> None:
        """:meth:`mark_settled`, now or soon, with other marks: at the latest by the next
        :meth:`unsettled_attempts` of this store or its close. A mark is a shortcut for
        the sweep (a lease not marked costs it one question to the queue), so a mark the
        store refuses, or one lost when the process stops, loses nothing."""
        ...

    def unsettled_attempts(
        self, before: int, *, limit: int = 100, after: tuple[int, str, int] | None = None
    ) -> list[EndedAttempt]:
        """Handed-out attempts that are over whose deferred message (a lease with a
        sequence number and a queue) is not marked settled, with the lease taken and the
        task row last written at ``before`` or earlier; in the order of
        ``(acquired_at, task_id, attempt)`` of their lease, after ``after`` (the
        :attr:`EndedAttempt.key` of the last one of the previous batch), at most ``limit``.

        An attempt is over when its row moved to a later attempt, or is at it and
        COMPLETED, COMPLETED_WITH_ERRORS, SKIPPED or CANCELED, or failed (FAILED,
        FAILED_WITH_TERMINAL_ERROR, TIMED_OUT) with no retry to come: a retry replaced it
        (``retried``) or its run is over (terminal, or gone). A failed attempt of a run
        still running that no retry replaced is not listed: the engine has not decided
        it yet. Nor is an attempt still live (SCHEDULED, IN_PROGRESS: one whose worker
        asked for a callback has released its lease and waits for its message to come
        back). One statement on an index of the leases not marked settled."""
        ...

    # --- limits -------------------------------------------------------------
    def try_acquire_concurrency(self, task_type: str, limit: int) -> bool:
        """Counter of hand-outs in flight for ``task_type``: increment if below
        ``limit`` and return True, else False. ``limit <= 0`` means unlimited (still
        counted). Atomic across processes. The caller must call
        ``release_concurrency`` exactly once per successful acquire (tie it to a
        status write that returned True, which happens once). The Task API takes its
        slots with ``hand_out_task``, and they are freed with the lease."""
        ...

    def release_concurrency(self, task_type: str) -> None:
        """Decrement the counter (never below zero)."""
        ...

    def concurrency_in_use(self, task_type: str) -> int: ...

    def try_acquire_rate(
        self, task_type: str, per_frequency: int, frequency_seconds: int, now: int
    ) -> bool:
        """Fixed-window rate limit: at most ``per_frequency`` grants per window of
        ``frequency_seconds`` aligned to the epoch (window = now // (freq*1000)).
        ``now`` is epoch ms. ``per_frequency <= 0`` or ``frequency_seconds <= 0``
        means unlimited. Atomic across processes. A fixed window can grant up to
        2x per_frequency across one window boundary."""
        ...
