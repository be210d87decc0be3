"""Repository commands that are not benchmarks: data generators, long-running checks, study analyses."""
