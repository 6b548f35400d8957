"""Side-by-side benchmarks: Stepway and the engines a user would pick instead.

``uv run python -m bench`` (peers: ``uv sync --group bench`` first) runs every workload
for Stepway and each installed peer in one run, interleaving the repetitions, prints
medians and ratios and rewrites the generated part of ``docs/benchmarks.md``.
``--smoke`` runs tiny sizes (``tests/bench`` runs it in CI).

Each system runs in a process of its own (``bench.child``), so one system's idle
threads never hold the GIL of another; worker processes are started per workload.
"""
