"""Checks for a machine with a GPU (`python -m benchmarks run gpu.NAME`)."""
