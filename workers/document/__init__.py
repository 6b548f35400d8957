"""Document worker (docs/architecture.md, "Worker code areas"): parse_pdf, extract_excel,
classify_document.

Importing the package registers the handlers: ``python -m stepway_worker --app
workers.document``."""

from workers.document import handlers as handlers
