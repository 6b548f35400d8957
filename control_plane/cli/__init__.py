"""The ``stepway`` command line (:mod:`control_plane.cli.main`) and the processes it
runs: ``stepway dev`` (:mod:`control_plane.cli.dev`) and ``stepway serve``
(:mod:`control_plane.cli.serve`)."""
