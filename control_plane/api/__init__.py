"""The HTTP layer of the control plane: the FastAPI app (:mod:`control_plane.api.app`),
its routes (metadata, tasks, workflow), the errors services raise
(:mod:`control_plane.api.errors`) and their handlers
(:mod:`control_plane.api.error_handlers`)."""
