"""benchmarks/eval_share.py: evaluation seconds over training-step seconds, from a hand-written metrics file."""

from __future__ import annotations

import json

from benchmarks import eval_share


def test_eval_share_sums_every_evaluation_over_the_steps(tmp_path):
    rows = [{"step": 0, "eval/success": 0.5, "eval/instances": 200.0, "time/eval_s": 10.0},
            {"step": 1, "time/rollout_s": 30.0, "time/update_s": 10.0, "train/success": 0.1},
            {"step": 2, "time/rollout_s": 50.0, "time/update_s": 10.0, "train/success": 0.2},
            {"step": 2, "eval/success": 0.5, "eval/instances": 50.0, "time/eval_s": 4.0},
            {"step": 2, "eval/success": 0.6, "eval/instances": 200.0, "time/eval_s": 6.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    share = eval_share.eval_share(tmp_path)
    # (10 + 4 + 6) eval seconds over (30 + 10 + 50 + 10) step seconds
    assert share == {"eval_s": 20.0, "train_s": 100.0, "share": 0.2, "evaluations": 3.0, "eval_instances": 450.0}
