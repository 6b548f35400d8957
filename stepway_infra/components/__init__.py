"""The platform program's ComponentResources, one per area of the platform.

``stepway_infra/program.py`` composes them in dependency order: network,
observability, hosting (registry and apps environment), data, messaging, engine,
control plane, then one :class:`~stepway_infra.components.workers.WorkerArea` per
worker code area.
"""
