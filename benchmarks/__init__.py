"""ragmem's benchmark suite.

Run everything with ``python -m benchmarks.run_all`` (``--quick`` for the CI
smoke slice). Each module can also be run alone, e.g.
``python -m benchmarks.recall_locomo``. Results land in ``benchmarks/results``
and ``BENCHMARKS.md``.
"""
