"""The wiring of an engine process: configuration, the services built from it, and the
durabletask worker that hosts a role."""
