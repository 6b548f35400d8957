"""``python -m control_plane.cli``: the ``stepway`` command line."""

from control_plane.cli.main import app

app()
