"""Running the language on Durable Task: the ``WorkflowInterpreter`` orchestration, its
activities, the built-in activity types, definition snapshots and payload pointers."""
