"""Data platform worker (docs/architecture.md, "Worker code areas"): reconcile_ledger,
bulk_export. Runs for minutes.

Importing the package registers the handlers: ``python -m stepway_worker --app
workers.data_platform``."""

from workers.data_platform import handlers as handlers
