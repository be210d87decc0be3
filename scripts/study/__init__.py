"""The study's runs and analyses (`python -m scripts.study.NAME`); their results are in benchmarks/results/."""
