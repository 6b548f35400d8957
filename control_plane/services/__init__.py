"""The use cases behind the API, framework-free and synchronous: task hand-out and
results, runs, metadata, and the rendering of Conductor Task/Workflow JSON."""
