"""Benchmarks (pytest-benchmark files and ``python -m benchmarks.executor_table``)."""
