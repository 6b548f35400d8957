"""Starting, reading and steering runs.

A start writes the run row RUNNING first (``create_run``; a repeated idempotency key
returns the existing run's id and starts nothing), then starts the orchestration; if
that fails the row is deleted again, so nothing is left half-started, and the start
answers 503 (retryable) for an outage of the backend, else 500 (not retryable), never
with the backend's error text (``failure_of`` in control_plane/api/errors.py). A start
whose call ran out of time may have been carried out: its run is kept with a pending
start, tried again until the backend has it (:mod:`control_plane.services.run_starts`),
and its id answered, so a caller's retry never makes a second run. Once
started it answers, without waiting for the engine: a read of the run waits for its
first decision instead (:mod:`control_plane.services.settling`). Where every adapter
is local the API's start (``start_stored``) answers once the row is stored, with the
starts that arrived together, and its orchestration is scheduled right after
(:mod:`control_plane.services.run_starts`). Pause, resume, terminate, restart and retry
signal the orchestration through ``RunSignals``.

Restart, retry and rerun run a finished run again (:mod:`control_plane.services.replays`).

A start (and a restart, retry or rerun) is the root span of the run's trace; its
``traceparent`` goes into the orchestration input, so every span of the run joins that
trace (engine/runtime/tracing.py). A caller's own trace context is linked, not joined:
one trace per run.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span, SpanKind
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from control_plane.api.errors import ApiError, bad_request, conflict, failure_of, not_found
from control_plane.deps import Deps, Settings
from control_plane.services.callbacks import RunCallbacks
from control_plane.services.metadata import MetadataService
from control_plane.services.reconciling import RunReconciling
from control_plane.services.replays import RerunWorkflowRequest, RunReplays, SkipTaskRequest
from control_plane.services.run_starts import RunStarts
from control_plane.services.settling import Reached, RunSettling
from control_plane.services.signals import ReturnStrategy, RunWaits
from control_plane.services.stamp_reads import Stamp, StampReads
from control_plane.services.start_cache import StartCache, input_validator
from control_plane.services.tasks import TaskService
from control_plane.services.wire import (
    offload_posted,
    read_offloaded,
    task_def_name,
    workflow_json,
)
from control_plane.services.wire_types import Text
from control_plane.services.worker_queues import ensure_worker_queues
from engine.language.definitions import WorkflowDef
from engine.ports.payload_store import PayloadKind
from engine.ports.run_signals import RunSignalsUnavailable
from engine.ports.run_store import (
    DefinitionRecord,
    NewRun,
    RunQuery,
    RunRecord,
    RunStatus,
    RunUpdate,
    SearchResult,
)
from engine.runtime.snapshots import publish_snapshot_of
from engine.runtime.tracing import WORKFLOW_ID, link_to, span, traceparent_of, tracer
from protocol.events import TERMINATE_EVENT, TerminateEvent
from protocol.limits import MAX_INT32
from protocol.payload_keys import INPUT_REF, workflow_input_key
from protocol.runs import RunInput, TaskMock

log = logging.getLogger(__name__)

#: values of one field a search may allow (``IN (...)``; the run store's limit)
_SEARCH_VALUES = 1000

#: the field a search sorts by: a run's start (createTime), by which the runs table's
#: search indexes are ordered (alone, or after the status, name or correlation id a
#: filter names); sorting by another field would sort every matching run
_SORT_FIELD = "startTime"


def oldest_first(sort: str | None) -> bool:
    """Whether a search's ``sort`` (Conductor's: ``field[:ASC|DESC]`` items joined by
    ``|``, ASC when the direction is left out) asks for the oldest runs first. Only
    ``startTime`` sorts, so the first item decides (a later one breaks no tie); absent
    or blank, the newest come first. Anything else is a 400 naming ``sort``, not an
    order silently ignored."""
    orders: list[str] = []
    for item in filter(None, (part.strip() for part in (sort or "").split("|"))):
        field, _, direction = (text.strip() for text in item.partition(":"))
        if field != _SORT_FIELD:
            raise bad_request(
                f"cannot sort by {field!r}: runs sort by {_SORT_FIELD} only "
                f"({_SORT_FIELD}:ASC or {_SORT_FIELD}:DESC)",
                "sort",
            )
        order = direction.upper() or "ASC"
        if order not in ("ASC", "DESC"):
            raise bad_request(f"sort direction {direction!r} of {_SORT_FIELD}: ASC or DESC", "sort")
        orders.append(order)
    return bool(orders) and orders[0] == "ASC"


class StartWorkflowRequest(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: Text = Field(min_length=1)
    version: int | None = Field(default=None, ge=1, le=MAX_INT32)
    input: dict[str, Any] = Field(default_factory=dict)
    correlation_id: Text | None = None
    priority: int = Field(default=0, ge=0, le=99)
    task_to_domain: dict[Text, Text] = Field(default_factory=dict)
    idempotency_key: Text | None = None
    #: a definition given in the request instead of a registered one (Conductor runs it
    #: without registering it)
    workflow_def: dict[str, Any] | None = None


class ExecuteWorkflowRequest(StartWorkflowRequest):
    """The body of a synchronous execute: name and version come from the path."""

    name: str = ""


class WorkflowTestRequest(StartWorkflowRequest):
    """Conductor's WorkflowTestRequest: a start whose worker tasks complete with the
    given results (one per attempt, by task reference name) instead of being queued."""

    task_ref_to_mock_output: dict[Text, list[TaskMock]] = Field(default_factory=dict)


def run_input(
    run: NewRun,
    input_value: dict[str, Any],
    definition_ref: str | None = None,
    traceparent: str | None = None,
    task_mocks: dict[str, list[TaskMock]] | None = None,
) -> dict[str, Any]:
    """The orchestration input of ``run``. An offloaded workflow input travels as
    ``{"inputRef": ref}`` (the engine reads it from the payload store), so a large input
    never enters the durable history."""
    return RunInput(
        name=run.name,
        version=run.version,
        input={INPUT_REF: run.input_ref} if run.input_ref else input_value,
        correlation_id=run.correlation_id,
        priority=run.priority,
        task_to_domain=run.task_to_domain,
        parent_workflow_id=run.parent_workflow_id,
        parent_task_id=run.parent_task_id,
        definition_ref=definition_ref,
        traceparent=traceparent,
        task_mocks=task_mocks or {},
    ).wire()


class WorkflowService:
    def __init__(self, settings: Settings, deps: Deps, tasks: TaskService) -> None:
        self.settings = settings
        self.deps = deps
        self.tasks = tasks
        self.start_cache = StartCache(settings, deps, tasks.taskdefs)
        self.stamps = StampReads(deps.run_store.definition_stamp)
        self.tracer = tracer(deps.tracer_provider, "stepway.control_plane")
        self.settling = RunSettling(settings, deps)
        self.replays = RunReplays(settings, deps, self.settle)
        self.callbacks = RunCallbacks(settings, deps, tasks.taskdefs)
        self.waits = RunWaits(deps, self.workflow_json, self.tasks.row_json)
        self.starts = RunStarts(settings, deps)
        self.reconciling = RunReconciling(settings, deps, self.starts.pending)

    def _definition(
        self, name: str, version: int | None, stamp: Stamp
    ) -> tuple[DefinitionRecord, WorkflowDef]:
        """The registered definition, read once (parsed once per registration; the
        snapshot a run starts with is built from it)."""
        record = self.start_cache.record(name, version, stamp)
        if record is None:
            raise not_found(
                f"No such workflow found by name: {name}, version: "
                f"{version if version is not None else 'null'}"
            )
        return record, self.start_cache.parsed(record)

    def test(
        self, request: WorkflowTestRequest, *, caller_trace: str | None = None
    ) -> dict[str, Any]:
        """Conductor's workflow test: a run whose mocked worker tasks complete with their
        mocks; the run as it is once it started."""
        workflow_id = self.start(
            request, caller_trace=caller_trace, task_mocks=request.task_ref_to_mock_output
        )
        return self.get(workflow_id, True)

    def execute(
        self,
        request: StartWorkflowRequest,
        request_id: str | None,
        wait_until_task_ref: str | None,
        wait_for_seconds: int,
        strategy: ReturnStrategy = ReturnStrategy.TARGET_WORKFLOW,
        *,
        caller_trace: str | None = None,
    ) -> dict[str, Any] | None:
        """Conductor's synchronous execute: start, then answer once the run ended or
        blocks, or a task of ``wait_until_task_ref`` (comma-separated) ended, at most
        ``wait_for_seconds`` (0: 10) later (:mod:`control_plane.services.signals`)."""
        workflow_id = self.start(request, caller_trace=caller_trace)
        refs = [r.strip() for r in (wait_until_task_ref or "").split(",") if r.strip()]
        return self.waits.await_response(
            workflow_id, refs, strategy, request_id, wait_for_seconds or 10
        )

    def start(
        self,
        request: StartWorkflowRequest,
        *,
        caller_trace: str | None = None,
        task_mocks: dict[str, list[TaskMock]] | None = None,
    ) -> str:
        """Start a run; its id. ``caller_trace``: the caller's W3C traceparent (linked)."""
        with self._start_span(caller_trace) as current:
            workflow_id = self._start(request, traceparent_of(current), task_mocks)
            current.set_attribute(WORKFLOW_ID, workflow_id)
            return workflow_id

    async def start_stored(
        self, request: StartWorkflowRequest, *, caller_trace: str | None = None
    ) -> str:
        """Start a run, answered once the run is stored (with local adapters: the event
        loop's start, :mod:`control_plane.services.run_starts`); its id."""
        with self._start_span(caller_trace) as current:
            # which registration is current: one read for the starts of a turn of the loop
            stamp = (
                None
                if request.workflow_def
                else await self.stamps.current(request.name, request.version)
            )
            run, orchestration_input = self._prepare(request, traceparent_of(current), None, stamp)
            workflow_id = await self.starts.start(run, orchestration_input)
            current.set_attribute(WORKFLOW_ID, workflow_id)
            return workflow_id

    def current_stamp(self, request: StartWorkflowRequest) -> Stamp:
        """Which registration the start of ``request`` runs (None for a start with a
        definition of its own, or a workflow not registered), read now."""
        if request.workflow_def:
            return None
        return self.deps.run_store.definition_stamp(request.name, request.version)

    def _start_span(self, caller_trace: str | None) -> AbstractContextManager[Span]:
        """The start's span: the root of the run's trace, the caller's linked."""
        return span(
            self.tracer,
            "stepway.workflow.start",
            root=True,
            kind=SpanKind.SERVER,
            links=link_to(caller_trace),
        )

    def _start(
        self,
        request: StartWorkflowRequest,
        traceparent: str | None,
        task_mocks: dict[str, list[TaskMock]] | None,
    ) -> str:
        run, orchestration_input = self._prepare(
            request, traceparent, task_mocks, self.current_stamp(request)
        )
        created = self.deps.run_store.create_run(run)
        if not created.created:
            return created.workflow_id
        try:
            self.deps.signals.start_run(run.workflow_id, orchestration_input)
        except Exception as exc:
            # its answer lost to the deadline, the start may have been carried out: the
            # orchestration may run. Deleting the row and answering "retry" would make a
            # second run of the caller's retry; the start is kept and tried again until
            # the backend says it exists (run_starts.py), and the run's id answered
            maybe_done = isinstance(exc, RunSignalsUnavailable) and exc.maybe_done
            if maybe_done and self.starts.keep_trying(run.workflow_id, orchestration_input):
                log.warning("run %s: its start is tried again (%s)", run.workflow_id, exc)
                return run.workflow_id
            log.exception("could not start run %s", run.workflow_id)
            self.deps.run_store.delete_run(run.workflow_id)
            raise failure_of("could not start the run", exc) from exc
        # Conductor answers after the first decision; Stepway answers now, and a client
        # reading the run next waits for its first tasks (or its end): ``run``
        return run.workflow_id

    def _prepare(
        self,
        request: StartWorkflowRequest,
        traceparent: str | None,
        task_mocks: dict[str, list[TaskMock]] | None,
        stamp: Stamp,
    ) -> tuple[NewRun, dict[str, Any]]:
        """The run row of a start and its orchestration's input (the definition found,
        the input validated and offloaded when large): nothing is written but an
        offloaded input and, for a start with a definition of its own, its snapshot.
        ``stamp``: which registration of the workflow named is current
        (:meth:`current_stamp`; not read for a start with a definition of its own)."""
        if request.workflow_def:
            # validated as a registration would be, but not registered
            (wf,) = MetadataService(self.settings, self.deps).parse_workflows(
                [request.workflow_def], single=True
            )
            definition_json = request.workflow_def
            ensure_worker_queues(self.settings, self.deps, wf, request.task_to_domain)
            validator = input_validator(wf)
        else:
            record, wf = self._definition(request.name, request.version, stamp)
            definition_json = record.definition
            validator = self.start_cache.validator(record, wf)
        if validator is not None:
            errors = sorted(validator.iter_errors(request.input), key=lambda e: list(e.path))
            if errors:
                issues = [
                    (
                        "$.input"
                        + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.path),
                        e.message,
                    )
                    for e in errors
                ]
                raise ApiError(
                    400,
                    f"input does not match the inputSchema of {wf.name} v{wf.version}: "
                    + "; ".join(f"{p}: {m}" for p, m in issues[:3]),
                    validation_errors=issues,
                )
        if request.task_to_domain and not request.workflow_def:
            ensure_worker_queues(self.settings, self.deps, wf, request.task_to_domain)
        try:
            if request.workflow_def:
                snapshot = publish_snapshot_of(
                    self.deps.run_store, self.deps.payloads, definition_json, wf
                )
            else:  # once per registration
                snapshot = self.start_cache.snapshot(record, wf)
        except Exception as exc:
            log.exception("could not store the definition of %s v%s", wf.name, wf.version)
            raise failure_of("could not store the definition", exc) from exc
        workflow_id = str(uuid.uuid4())
        now = self.deps.clock()
        # the run's input and variables as the engine starts it with them
        given = wf.run_input(request.input)
        inline, input_ref = offload_posted(
            self.deps.payloads,
            PayloadKind.WORKFLOW_INPUT,
            workflow_input_key(workflow_id),
            given,
            "$.input",
        )
        run = NewRun(
            workflow_id=workflow_id,
            name=wf.name,
            version=wf.version,
            input=inline,
            input_ref=input_ref,
            variables=wf.run_variables(),
            correlation_id=request.correlation_id,
            priority=request.priority,
            task_to_domain=request.task_to_domain,
            idempotency_key=request.idempotency_key,
            create_time=now,
            definition_ref=snapshot,
        )
        return run, run_input(run, given, snapshot, traceparent, task_mocks)

    def settle(self, workflow_id: str, reached: Reached) -> None:
        """Wait until the run store shows what a call just caused (``reached``), at most
        ``settle_seconds``; the engine acts on the call's signal a moment later."""
        self.settling.settle(workflow_id, reached)

    def run(self, workflow_id: str) -> RunRecord:
        """The run as a client may read it: a run started a moment ago once its first
        decision is visible (:mod:`control_plane.services.settling`); 404 if none."""
        run = self.deps.run_store.get_run(workflow_id)
        if run is not None:
            run = self.settling.decided(run)
        if run is None:
            raise not_found(f"Workflow with id: {workflow_id} not found.")
        return run

    def _input(self, run: RunRecord) -> Any:
        return read_offloaded(self.deps.payloads, run.input_ref, run.input)

    def workflow_json(self, run: RunRecord, include_tasks: bool) -> dict[str, Any]:
        definition = self.tasks.definitions.of(run)
        rows = (
            self.deps.run_store.list_tasks(run.workflow_id)
            if include_tasks or run.failed_reference_task_names
            else []
        )
        failed = set(run.failed_reference_task_names)
        failed_names = sorted({task_def_name(r) for r in rows if r.reference_task_name in failed})
        forked = definition.with_forked(rows) if definition is not None else None
        tasks = [self.tasks.row_json(r, run, forked) for r in rows] if include_tasks else None
        return workflow_json(
            run,
            self.deps.payloads,
            tasks,
            definition=definition.definition if definition is not None else None,
            failed_task_names=failed_names,
        )

    def _current(self, workflow_id: str) -> RunRecord:
        """The run, reconciled on read (:mod:`control_plane.services.reconciling`)."""
        return self.reconciling.current(self.run(workflow_id), lambda: self.run(workflow_id))

    def get(self, workflow_id: str, include_tasks: bool) -> dict[str, Any]:
        return self.workflow_json(self._current(workflow_id), include_tasks)

    def status(
        self, workflow_id: str, include_output: bool = False, include_variables: bool = False
    ) -> dict[str, Any]:
        """Conductor's WorkflowStatus: output and variables only when asked for."""
        run = self._current(workflow_id)
        output = read_offloaded(self.deps.payloads, run.output_ref, run.output)
        return {
            "workflowId": run.workflow_id,
            "correlationId": run.correlation_id,
            "output": (output or {}) if include_output else None,
            "variables": (run.variables or {}) if include_variables else None,
            "status": run.status.value,
        }

    def pause(self, workflow_id: str) -> None:
        run = self.run(workflow_id)
        if run.status.is_terminal:
            raise conflict(f"workflow {workflow_id} is {run.status.value}")
        if run.status == RunStatus.PAUSED:
            return
        self.starts.scheduled(workflow_id)
        self.deps.signals.suspend(workflow_id, "paused through the API")
        self.deps.run_store.update_run(
            workflow_id, RunUpdate(status=RunStatus.PAUSED), self.deps.clock()
        )

    def resume(self, workflow_id: str) -> None:
        run = self.run(workflow_id)
        if run.status != RunStatus.PAUSED:
            # conductor-oss's resumeWorkflow refuses it in these words (an
            # IllegalStateException: its 500); a conflict with the run's state here
            raise conflict(
                f"The workflow {workflow_id} is not PAUSED so cannot resume. "
                f"Current status is {run.status.value}"
            )
        self.starts.scheduled(workflow_id)
        self.deps.signals.resume(workflow_id, "resumed through the API")
        self.deps.run_store.update_run(
            workflow_id, RunUpdate(status=RunStatus.RUNNING), self.deps.clock()
        )

    def terminate(self, workflow_id: str, reason: str | None) -> None:
        run = self.run(workflow_id)
        if run.status == RunStatus.TERMINATED:
            return  # Conductor: terminating a terminated run again is a no-op
        if run.status == RunStatus.COMPLETED:
            raise conflict(f"Cannot terminate a COMPLETED workflow {workflow_id}.")
        if run.status.is_terminal:
            # Conductor's terminateWorkflow: a FAILED or TIMED_OUT run becomes TERMINATED
            # (its orchestration ended already: nothing to signal)
            why = reason or "terminated through the API"
            if not self.deps.run_store.terminate_ended(workflow_id, why, self.deps.clock()):
                current = self.run(workflow_id)
                if current.status != RunStatus.TERMINATED:
                    raise conflict(
                        f"workflow {workflow_id} changed meanwhile: it is {current.status.value}"
                    )
            return
        if run.status == RunStatus.PAUSED:
            self.resume(workflow_id)
        self.starts.scheduled(workflow_id)
        self.deps.signals.raise_event(
            workflow_id,
            TERMINATE_EVENT,
            TerminateEvent(reason=reason or "terminated through the API").payload(),
        )
        self.settle(workflow_id, lambda run, _: run.status.is_terminal)

    def restart(self, workflow_id: str, use_latest_definitions: bool = False) -> None:
        self.replays.restart(workflow_id, use_latest_definitions)

    def retry(self, workflow_id: str, resume_subworkflow_tasks: bool = False) -> None:
        self.replays.retry(workflow_id, resume_subworkflow_tasks)

    def rerun(self, workflow_id: str, request: RerunWorkflowRequest) -> str:
        return self.replays.rerun(workflow_id, request)

    def reset_callbacks(self, workflow_id: str) -> None:
        self.callbacks.reset(workflow_id)

    def skip(self, workflow_id: str, ref: str, request: SkipTaskRequest) -> None:
        self.starts.scheduled(workflow_id)
        self.replays.skip(workflow_id, ref, request)

    def remove(self, workflow_id: str) -> None:
        """Delete a run and its task rows (Conductor's ``remove``); a run still going is
        terminated first."""
        run = self.run(workflow_id)
        if not run.status.is_terminal:
            self.terminate(workflow_id, "removed through the API")
        self.deps.run_store.delete_run(workflow_id)

    def terminate_remove(self, workflow_id: str, reason: str | None) -> None:
        """Conductor's ``terminate-remove``: terminate a run still going, then delete it."""
        run = self.run(workflow_id)
        if not run.status.is_terminal:
            self.terminate(workflow_id, reason)
        self.deps.run_store.delete_run(workflow_id)

    def task_page(
        self, workflow_id: str, start: int, count: int, statuses: list[str]
    ) -> dict[str, Any]:
        """Conductor's ``GET /workflow/{id}/tasks``: a page of the run's tasks, optionally
        of the given statuses, as a SearchResult."""
        run = self._current(workflow_id)
        wanted = {s.upper() for s in statuses}
        rows = [
            r
            for r in self.deps.run_store.list_tasks(workflow_id)
            if not wanted or r.status.value in wanted
        ]
        definition = self.tasks.definitions.of(run)
        if definition is not None:
            definition = definition.with_forked(rows)
        page = rows[start : start + count]
        return {
            "totalHits": len(rows),
            "results": [self.tasks.row_json(r, run, definition) for r in page],
        }

    def running(
        self, name: str, version: int, start_time: int | None, end_time: int | None
    ) -> list[str]:
        """Conductor's ``GET /workflow/running/{name}``: ids of the RUNNING runs of a
        version (created in [startTime, endTime) when both are given)."""
        ids: list[str] = []
        start = 0
        while True:
            page = self.deps.run_store.search_runs(
                RunQuery(
                    name=name,
                    statuses=[RunStatus.RUNNING],
                    create_time_from=start_time if end_time is not None else None,
                    create_time_to=end_time if start_time is not None else None,
                    start=start,
                    size=1000,
                )
            )
            ids += [r.workflow_id for r in page.results if r.version == version]
            start += len(page.results)
            if not page.results or start >= page.total_hits:
                return ids

    def decide(self, workflow_id: str) -> None:
        """Conductor's ``decide``: the engine decides a run on every event it gets, so
        there is nothing to do beyond finding the run."""
        self.run(workflow_id)

    def correlated(
        self, name: str, correlation_id: str, include_closed: bool, include_tasks: bool
    ) -> list[dict[str, Any]]:
        """The runs of ``name`` with ``correlation_id``: only those still going unless
        ``include_closed``."""
        return self.correlated_many(name, [correlation_id], include_closed, include_tasks)[
            correlation_id
        ]

    def correlated_many(
        self, name: str, correlation_ids: list[str], include_closed: bool, include_tasks: bool
    ) -> dict[str, list[dict[str, Any]]]:
        """The runs of ``name`` by correlation id (every id a key, newest run first), in
        one paged search whatever the number of ids."""
        statuses = None if include_closed else [RunStatus.RUNNING, RunStatus.PAUSED]
        wanted = list(dict.fromkeys(correlation_ids))
        found: dict[str, list[dict[str, Any]]] = {key: [] for key in wanted}
        start = 0
        while wanted:
            page = self.deps.run_store.search_runs(
                RunQuery(
                    name=name,
                    correlation_ids=wanted,
                    statuses=statuses,
                    start=start,
                    size=1000,
                )
            )
            for run in page.results:
                decided = self.settling.decided(run)
                if decided is not None:
                    found[decided.correlation_id or ""].append(
                        self.workflow_json(decided, include_tasks)
                    )
            start += len(page.results)
            if not page.results or start >= page.total_hits:
                break
        return found

    # --- search -----------------------------------------------------------------------

    _CLAUSE = re.compile(
        r"^\s*(\w+)\s*(=|IN)\s*(?:\(([^)]*)\)|'([^']*)'|\"([^\"]*)\"|(\S+))\s*$", re.IGNORECASE
    )

    def find(
        self,
        *,
        query: str | None,
        free_text: str | None,
        workflow_type: str | None,
        status: list[str],
        correlation_id: str | None,
        start_time: int | None,
        end_time: int | None,
        start: int,
        size: int,
        sort: str | None = None,
    ) -> SearchResult:
        """The runs that every clause of ``query`` and every other argument allows
        (Conductor ANDs them: ``workflowType IN (a, b)`` is a or b, ``workflowType = a
        AND workflowType = b`` is nothing), newest first unless ``sort`` says
        (:func:`oldest_first`). ``freeText`` is a run's workflow id, correlation id or
        definition name (``*``: anything)."""
        ascending = oldest_first(sort)
        names: set[str] | None = {workflow_type} if workflow_type else None
        statuses: set[str] | None = {s.upper() for s in status} if status else None
        correlation_ids: set[str] | None = {correlation_id} if correlation_id else None
        for key, values in self._clauses(query):
            if key == "workflowType":
                names = set(values) if names is None else names & set(values)
            elif key == "status":
                upper = {v.upper() for v in values}
                statuses = upper if statuses is None else statuses & upper
            else:
                ids = set(values)
                correlation_ids = ids if correlation_ids is None else correlation_ids & ids
        try:
            parsed = sorted(RunStatus(s) for s in statuses or ())
        except ValueError:
            raise bad_request(
                f"unknown status in {sorted(statuses or ())}; use "
                f"{', '.join(s.value for s in RunStatus)}",
                "status",
            ) from None
        if names == set() or statuses == set() or correlation_ids == set():
            return SearchResult(total_hits=0, results=[])
        for field, chosen in (("workflowType", names), ("correlationId", correlation_ids)):
            if chosen is not None and len(chosen) > _SEARCH_VALUES:
                raise bad_request(
                    f"at most {_SEARCH_VALUES} values of {field} in one search, not {len(chosen)}",
                    "query",
                )
        return self.deps.run_store.search_runs(
            RunQuery(
                names=sorted(names) if names is not None else None,
                statuses=parsed or None,
                correlation_ids=sorted(correlation_ids) if correlation_ids is not None else None,
                free_text=free_text if free_text and free_text != "*" else None,
                create_time_from=start_time,
                create_time_to=end_time,
                start=start,
                size=size,
                oldest_first=ascending,
            )
        )

    def _clauses(self, query: str | None) -> list[tuple[str, list[str]]]:
        """The (field, allowed values) of each clause of a search query."""
        clauses: list[tuple[str, list[str]]] = []
        for clause in re.split(r"\s+AND\s+", (query or "").strip(), flags=re.IGNORECASE):
            if not clause:
                continue
            m = self._CLAUSE.match(clause)
            if not m:
                raise bad_request(f"cannot parse query clause {clause!r}", "query")
            key, op, listed = m.group(1), m.group(2).upper(), m.group(3)
            value = m.group(4) or m.group(5) or m.group(6) or ""
            values = (
                [v.strip().strip("'\"") for v in listed.split(",") if v.strip()]
                if op == "IN" and listed is not None
                else [value]
            )
            if key not in ("workflowType", "status", "correlationId"):
                raise bad_request(
                    f"unsupported query field {key!r} (workflowType, status, correlationId)",
                    "query",
                )
            clauses.append((key, values))
        return clauses
