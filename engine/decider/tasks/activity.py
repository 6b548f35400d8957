"""The built-in activity types (HTTP, CALL_TOOL, LOGIC_APP, DOCUMENT_INTELLIGENCE; INLINE and
JSON_JQ_TRANSFORM have modules of their own but are scheduled the same way): an
activity inside the engine (``engine.runtime.builtins``) whose result envelope is the
outcome; retries are the Decider's, so Retry-After and terminal errors are honoured."""

from __future__ import annotations

from engine.decider.tasks.base import ScheduledTask


class ActivityTask(ScheduledTask):
    pass
