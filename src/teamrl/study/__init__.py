"""The study: named tables of rows (methods and ablations) run over seeds with an honest protocol.

`protocol` holds the statistics (pure functions), `rows` the named studies, `runner` runs them
(`seed_run`: the rows of one seed), `table` writes the results page. The command is `teamrl study` (docs/study/index.md).
"""
