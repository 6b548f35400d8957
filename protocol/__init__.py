"""The contracts between Stepway's parts, each spelled once.

The engine, the control plane, the worker catalog and the Pulumi program import these
modules; nothing else builds a queue name, a task message body, an event name or
payload, a run input or a payload key. Pure: pydantic and the standard library only,
so every part (including the Pulumi program, which must not import the engine) can
depend on it.

* :mod:`protocol.queues`: the queues of a task type, and which one a task goes to.
* :mod:`protocol.messages`: the message a WORKER task attempt is queued as.
* :mod:`protocol.events`: the external events raised on a run, with their payloads.
* :mod:`protocol.runs`: the orchestration input of a run.
* :mod:`protocol.payload_keys`: where payloads are kept, and how a value stands for an
  offloaded one.
* :mod:`protocol.limits`: the JSON depth limit, integer bounds and the definition-name
  rule.
"""
