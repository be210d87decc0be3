"""Frozen one-off experiments: runnable (`python -m benchmarks run experiments.NAME`), not maintained."""
