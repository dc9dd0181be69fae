"""skyconv's benchmark harness: skyconv against the tool it replaces, on the same machine.

Run ``python -m bench --help`` from the repository root. A *case* (see :mod:`bench.harness`)
computes one thing several ways: skyconv on the CPU and the GPU, and the anchor tool on each
engine (scipy, cupy, healpy, ...). Each way is timed end to end from NumPy (wall clock) and,
on the GPU, also on the device alone; the floor that bandwidth and arithmetic allow is printed
beside it. Families of cases live in ``bench/cases/<family>.py``.
"""
