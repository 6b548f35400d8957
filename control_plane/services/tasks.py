"""Task reads and the worker-side helpers of the Task API: a task as Conductor Task
JSON, task logs, signed payload locations."""

from __future__ import annotations

import uuid
from functools import cached_property
from typing import Any

from control_plane.api.errors import bad_request, forbidden, not_found
from control_plane.auth import Principal
from control_plane.services.run_definitions import RunDefinition, RunDefinitions
from control_plane.services.task_support import WORKER, TaskSupport
from control_plane.services.wire import render_task, task_type_name
from engine.language.definitions import TaskDef
from engine.ports.payload_store import (
    validate_reference,
)
from engine.ports.run_store import RunRecord, TaskLog, TaskRecord
from protocol.payload_keys import UPLOAD_PREFIX, upload_key


class TaskService(TaskSupport):
    @cached_property
    def definitions(self) -> RunDefinitions:
        return RunDefinitions(self.deps)

    def get_task(self, task_id: str, caller: Principal) -> dict[str, Any] | None:
        row = self.deps.run_store.get_task(task_id)
        if row is None:
            return None
        task_type = task_type_name(row)
        if not caller.can_read() and not caller.serves(task_type):
            raise forbidden(f"{caller.name} may not read tasks of type {task_type!r}")
        run = self.deps.run_store.get_run(row.workflow_id)
        return self.row_json(row, run)

    def row_json(
        self, row: TaskRecord, run: RunRecord | None, definition: RunDefinition | None = None
    ) -> dict[str, Any]:
        """Task ``row`` as Conductor's Task JSON; ``definition``: the run's, with its
        dynamically forked tasks (:meth:`RunDefinition.with_forked`), when the caller
        renders many rows of the run."""
        task_type = task_type_name(row)
        reading_one = definition is None
        if definition is None and run is not None:
            definition = self.definitions.of(run)
        workflow_task = (
            definition.workflow_task(row.reference_task_name) if definition is not None else None
        )
        if workflow_task is None and definition is not None and run is not None and reading_one:
            # a task a dynamic fork made: its WorkflowTask is on the fork's row
            forked = definition.with_forked(self.deps.run_store.list_tasks(run.workflow_id))
            workflow_task = forked.workflow_task(row.reference_task_name)
        td = self._worker_task_def(task_type, workflow_task) if row.task_type == WORKER else None
        if workflow_task is not None and "taskDefinition" not in workflow_task:
            workflow_task = {**workflow_task, "taskDefinition": self._shown_task_def(row, td)}
        return render_task(row, run, self.deps.payloads, td, workflow_task)

    def _shown_task_def(self, row: TaskRecord, td: TaskDef | None) -> dict[str, Any]:
        """The ``taskDefinition`` a workflow task that gives none shows, as conductor-oss's
        MetadataMapperService.populateWorkflowTaskWithDefinition sets it: a worker task's
        the one it runs with; a system task's the one registered under its name, else a
        stand-in named after it with no retries and no response timeout."""
        if td is not None:
            return td.to_json_dict()
        name = row.task_def_name or row.reference_task_name
        registered = self.taskdefs.get(name)
        if registered is not None:
            return registered.to_json_dict()
        shown = TaskDef(name=name, retry_count=0).to_json_dict()
        shown["responseTimeoutSeconds"] = 0
        return shown

    def _worker_task_def(self, task_type: str, workflow_task: dict[str, Any] | None) -> TaskDef:
        """The task definition a worker task runs with, as the engine picks it when it
        schedules the task and the poll answers it: the workflow task's own
        ``taskDefinition``, else the registered one, else Conductor's default (``new
        TaskDef()``: responseTimeoutSeconds 3600; SimpleTaskMapper copies its
        ``responseTimeoutSeconds`` and rate limits onto the task)."""
        inline = workflow_task.get("taskDefinition") if workflow_task else None
        if isinstance(inline, dict):
            try:
                return TaskDef.model_validate({"name": task_type, **inline})
            except ValueError:
                pass
        return self.taskdefs.get(task_type) or TaskDef(name=task_type)

    def check_worker(self, task_id: str, caller: Principal) -> TaskRecord:
        row = self.deps.run_store.get_task(task_id)
        if row is None:
            raise not_found(f"task {task_id} not found")
        task_type = task_type_name(row)
        if not caller.serves(task_type) and not caller.has_role("operator"):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        return row

    def add_log(self, task_id: str, text: str, caller: Principal) -> None:
        self.check_worker(task_id, caller)
        self.deps.run_store.append_task_log(task_id, text, self.deps.clock())

    def logs(self, task_id: str) -> list[TaskLog]:
        return self.deps.run_store.list_task_logs(task_id)

    def storage_location(
        self,
        path: str | None,
        operation: str,
        payload_type: str,
        task_type: str | None,
        caller: Principal,
    ) -> dict[str, str]:
        op = operation.upper()
        if op not in ("READ", "WRITE"):
            raise bad_request(f"operation must be READ or WRITE, not {operation!r}", "operation")
        kinds = ("WORKFLOW_INPUT", "WORKFLOW_OUTPUT", "TASK_INPUT", "TASK_OUTPUT")
        if payload_type.upper() not in kinds:
            raise bad_request(
                f"payloadType must be one of {', '.join(kinds)}, not {payload_type!r}",
                "payloadType",
            )
        store = self._payloads()
        if task_type is None and caller.task_types is not None and len(caller.task_types) == 1:
            task_type = next(iter(caller.task_types))
        if task_type is not None and not caller.serves(task_type):
            raise forbidden(f"{caller.name} is not a worker of task type {task_type!r}")
        if op == "WRITE":
            if task_type is None and not caller.all_types:
                raise bad_request("taskType is required for this worker", "taskType")
            ref = upload_key(task_type, payload_type, uuid.uuid4().hex)
        else:
            if not path:
                raise bad_request("path is required to read a payload", "path")
            try:
                ref = validate_reference(path)
            except ValueError:
                raise bad_request(f"invalid payload path {path!r}", "path") from None
            allowed = (
                caller.can_read()
                or caller.all_types
                or (task_type is not None and ref.startswith(f"{UPLOAD_PREFIX}/{task_type}/"))
            )
            if not allowed:
                raise forbidden(f"{caller.name} may not read {ref!r}")
        url = store.signed_url(
            ref, "write" if op == "WRITE" else "read", self.settings.signed_url_seconds
        )
        return {"uri": url, "path": ref}
