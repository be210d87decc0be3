"""teamrl's maintained benchmarks, run from the repository root as `python -m benchmarks run NAME [args]`
(`python -m benchmarks list` names them). Frozen one-off experiments live in benchmarks/experiments/,
results in benchmarks/results/<benchmark>/<host>/; see docs/performance/index.md."""
