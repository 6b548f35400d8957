"""Connector worker (docs/architecture.md, "Worker code areas"): fetch_bank_feed,
lodge_return. The bank and tax credential stays in this service.

Importing the package registers the handlers: ``python -m stepway_worker --app
workers.connector``."""

from workers.connector import handlers as handlers
