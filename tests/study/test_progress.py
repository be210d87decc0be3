"""A running cell prints its steps (throttled) and every held-out evaluation to the study's log."""

import logging

from teamrl.study.progress import cell_progress


def test_cell_progress_forwards_evaluations_and_throttled_steps():
    clock = iter([0.0, 1.0, 2.0, 5.0, 25.0, 26.0, 27.0, 30.0, 31.0, 32.0])  # started, then one reading per record
    lines = []
    logger = logging.getLogger("teamrl")
    with cell_progress(lines.append, "  seed 0 shared: ", every_s=20.0, clock=lambda: next(clock)):
        logger.info("held-out evaluation at step %d: success %.3f on %d instances, %.0f s", 0, 0.25, 8, 3.0)
        logger.info("step %d/%d: train success %.3f", 1, 4, 0.5)  # the first step: forwarded
        logger.info("step %d/%d: train success %.3f", 2, 4, 0.5)  # 4 s later: dropped
        logger.info("step %d/%d: train success %.3f", 3, 4, 0.75)  # 24 s after step 1: forwarded
        logger.info("something else")  # not a step or an evaluation: dropped
        logger.info("held-out evaluation at step %d: success %.3f on %d instances, %.0f s", 3, 0.5, 8, 1.0)
        logger.info("step %d/%d: train success %.3f", 4, 4, 1.0)  # the last step: always
        logging.getLogger("teamrl.study.seed_run").info("held-out scoring: test, pass 1/1: success 0.500")
    logger.info("step %d/%d: train success %.3f", 9, 9, 1.0)  # after the cell: not forwarded
    assert lines == [
        "  seed 0 shared: held-out evaluation at step 0: success 0.250 on 8 instances, 3 s [1 s into the cell]",
        "  seed 0 shared: step 1/4: train success 0.500 [2 s into the cell]",
        "  seed 0 shared: step 3/4: train success 0.750 [25 s into the cell]",
        "  seed 0 shared: held-out evaluation at step 3: success 0.500 on 8 instances, 1 s [27 s into the cell]",
        "  seed 0 shared: step 4/4: train success 1.000 [30 s into the cell]",
        "  seed 0 shared: held-out scoring: test, pass 1/1: success 0.500 [31 s into the cell]",
    ]
    assert logger.level == logging.NOTSET and not logger.handlers  # left as it was
