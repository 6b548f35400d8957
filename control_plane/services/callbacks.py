"""Resetting a run's task callbacks (Conductor's ``POST /workflow/{id}/resetcallbacks``).

A worker that answers IN_PROGRESS with ``callbackAfterSeconds`` gives its task back to
be handed out again after that delay (control_plane/services/task_results.py): the
lease is released and the attempt's message is put back on the queue, visible at the
end of the delay. conductor-oss's ``resetCallbacksForWorkflow`` makes every such worker
task of a running run available now and sets its ``callbackAfterSeconds`` to 0.

Here the message put back cannot be moved (a Service Bus scheduled message keeps its
time), so a new message of the attempt is sent, visible at once, and the task's
``callbackAfterSeconds`` is set to 0. The delayed message still comes when it is due;
the hand-out drops it if the attempt was taken meanwhile (a worker holds its lease) or
ended, and hands the task out then if its worker gave it back again by that time.
"""

from __future__ import annotations

from control_plane.api.errors import conflict, not_found
from control_plane.services.task_support import WORKER, TaskSupport
from control_plane.services.wire import task_type_name
from engine.ports.run_store import TaskRecord, TaskStatus, TaskUpdate


class RunCallbacks(TaskSupport):
    def reset(self, workflow_id: str) -> int:
        """Make the run's worker tasks waiting out a callback available now; how many
        there were. 404 for an unknown run, 409 for one that ended (conductor-oss's
        message)."""
        store = self.deps.run_store
        run = store.get_run(workflow_id)
        if run is None:
            raise not_found(f"workflow {workflow_id} not found")
        if run.status.is_terminal:
            raise conflict(f"Workflow is in terminal state. Status = {run.status.value}")
        reset = 0
        for row in store.list_tasks(workflow_id):
            if not self._waits_for_its_callback(row):
                continue
            # sent first: an update that then fails leaves a message more, which the
            # hand-out drops once the attempt is taken, not a task left to its delay
            self._send_anew(row, task_type_name(row), 0)
            store.update_task(
                row.task_id, row.attempt, TaskUpdate(callback_after_seconds=0), self.deps.clock()
            )
            reset += 1
        return reset

    def _waits_for_its_callback(self, row: TaskRecord) -> bool:
        """A worker task given back with ``callbackAfterSeconds`` and not taken since: no
        worker holds its attempt's lease."""
        if (
            row.task_type != WORKER
            or row.status not in (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)
            or not row.callback_after_seconds
        ):
            return False
        lease = self.deps.run_store.get_lease(row.task_id, row.attempt)
        return lease is not None and lease.released
