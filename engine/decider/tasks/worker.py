"""WORKER (alias SIMPLE): a message on the type's queue; a worker polls it and posts the
result, which the run waits for (with the task definition's poll, response, task and
total timeouts on one durable timer)."""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class WorkerTask(ScheduledTask):
    polled = True
