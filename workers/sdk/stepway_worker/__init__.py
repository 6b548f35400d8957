"""Stepway worker SDK: poll the Task API over HTTP, run handlers, post results.

    from stepway_worker import worker_task, run

    @worker_task("parse_pdf")
    def parse_pdf(url: str) -> dict:
        return {"text": ..., "pages": ...}

    run()  # polls until SIGTERM

See workers/sdk/README.md.
"""

from stepway_worker.auth import AzureIdentityToken, NoToken, StaticToken, TokenProvider
from stepway_worker.client import (
    ConflictError,
    RejectedError,
    TaskApiError,
    TaskClient,
    TransientError,
)
from stepway_worker.context import TaskContext, current_context, task_log
from stepway_worker.functions import handle_queue_message
from stepway_worker.registry import Handler, Outcome, Registry, registry, worker_task
from stepway_worker.results import InProgress, TerminalError
from stepway_worker.runner import Worker, run
from stepway_worker.settings import WorkerSettings

__all__ = [
    "AzureIdentityToken",
    "ConflictError",
    "Handler",
    "InProgress",
    "NoToken",
    "Outcome",
    "Registry",
    "RejectedError",
    "StaticToken",
    "TaskApiError",
    "TaskClient",
    "TaskContext",
    "TerminalError",
    "TokenProvider",
    "TransientError",
    "Worker",
    "WorkerSettings",
    "current_context",
    "handle_queue_message",
    "registry",
    "run",
    "task_log",
    "worker_task",
]
