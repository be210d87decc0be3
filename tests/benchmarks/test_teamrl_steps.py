"""benchmarks/teamrl_steps.py: the process-tree CPU clock and the choice of timed steps."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import teamrl_steps

steps = teamrl_steps


def test_tree_cpu_counts_a_live_child():
    # A child burning CPU is still running when the clock is read: getrusage alone would miss it.
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time() - t < 0.6: pass\ntime.sleep(30)"])
    try:
        before = steps.tree_cpu_seconds()
        for _ in range(100):  # wait (at most 10 s on a loaded machine) until the child has burnt its 0.6 s
            if steps._ticks(str(child.pid)) / 100 >= 0.6:
                break
            subprocess.run(["sleep", "0.1"])
        assert steps.tree_cpu_seconds() - before >= 0.3
    finally:
        child.kill()
        child.wait()


def _record(step, train):
    return steps.StepRecord(step, 1.0, 0.5, 0.0, 0.0, {"train/samples": 4.0} if train else {"time/eval_s": 1.0})


def test_measured_skips_warmup_and_evaluation_rows():
    records = [_record(0, False), _record(1, True), _record(2, True), _record(3, True), _record(3, False)]
    assert [r.step for r in steps.measured(records, warmup_steps=1)] == [2, 3]
    with pytest.raises(ValueError, match="none left after 3 warm-up steps"):
        steps.measured(records, warmup_steps=3)


def test_trained_sums_every_policy_and_tokens_come_from_the_rollout_rate():
    record = steps.StepRecord(1, 1.0, 1.0, 0.0, 0.0, {"train/samples": 12.0, "policy/a/samples": 8.0,
                                                      "policy/b/samples": 4.0, "policy/a/loss": 3.0,
                                                      "time/tokens_per_s": 50.0, "time/rollout_s": 2.0})
    assert (record.sampled, record.trained, record.tokens) == (12.0, 12.0, 100.0)
