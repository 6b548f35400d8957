"""The Azure Functions worker shape (docs/architecture.md, "Worker code
areas"): a Service Bus trigger per task type
queue runs the registered handler and posts the result with the same contract as the
polling worker. Not imported by the tests; deploy with the Azure Functions Python v2
programming model (``pip install azure-functions stepway-worker[azure]``).

App settings: ``STEPWAY_SERVER_URL``, ``STEPWAY_API_SCOPE`` (and ``AZURE_CLIENT_ID``
for a user-assigned identity), ``ServiceBusConnection__fullyQualifiedNamespace``.
"""

from __future__ import annotations

import logging

import azure.functions as func  # type: ignore[import-not-found]
from stepway_worker import handle_queue_message

import workers.document  # noqa: F401  (registers parse_pdf, extract_excel, classify_document)

app = func.FunctionApp()


def _handle(message: func.ServiceBusMessage, task_type: str) -> None:
    # Raises TransientError when the Task API stays unreachable: the runtime then
    # abandons the message and Service Bus delivers it again.
    result = handle_queue_message(message.get_body(), task_type=task_type)
    logging.info("task %s: %s", message.message_id, result and result["status"])


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="parse_pdf", connection="ServiceBusConnection"
)
def parse_pdf(message: func.ServiceBusMessage) -> None:
    _handle(message, "parse_pdf")


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="extract_excel", connection="ServiceBusConnection"
)
def extract_excel(message: func.ServiceBusMessage) -> None:
    _handle(message, "extract_excel")
