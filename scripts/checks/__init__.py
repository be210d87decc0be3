"""Long-running correctness checks of the verifiers and parsers (`python -m scripts.checks.NAME`); the tests run
each on a small budget."""
