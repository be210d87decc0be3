"""scripts/study/main_job_settings.py: a finished run's curve and times read back, and the paired verdict
of an arm against fp32 from hand-made run folders (no training)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.study import main_job_settings as study


def fake_run(folder: Path, curve: dict[int, tuple[float, int]], step_s: float, staleness: float = 0.0) -> None:
    """A run folder as `teamrl train` leaves it: metrics.jsonl (evaluations and steps) and summary.json."""
    folder.mkdir(parents=True)
    rows = []
    for step in range(1, 5):
        rows.append({"step": step, "train/success": 0.5, "time/rollout_s": step_s * 0.6, "time/update_s": step_s * 0.4,
                     "rollout_correction/tool/staleness": staleness})
    for step, (success, instances) in curve.items():
        rows.append({"step": step, "eval/success": success, "eval/instances": instances})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, last = curve[min(curve)][0], curve[max(curve)][0]
    (folder / "summary.json").write_text(json.dumps({"initial_success": first, "final_success": last}))


def test_a_run_is_read_back_with_its_curve_times_and_correction_metrics(tmp_path):
    fake_run(tmp_path / "r", {0: (0.25, 96), 2: (0.5, 50), 4: (0.75, 96)}, step_s=10.0, staleness=1.0)
    got = study.read_run(tmp_path / "r")
    assert got["curve"] == {"0": {"success": 0.25, "instances": 96}, "2": {"success": 0.5, "instances": 50},
                            "4": {"success": 0.75, "instances": 96}}
    assert got["median_step_s"] == 10.0 and got["median_rollout_s"] == 6.0
    assert got["correction_medians"] == {"rollout_correction/tool/staleness": 1.0}


def test_the_summary_pairs_each_arm_with_fp32_by_seed(tmp_path):
    finals = {"fp32": [0.90, 0.92, 0.94], "bf16": [0.91, 0.92, 0.93], "pipelined": [0.50, 0.55, 0.60]}
    lines = []
    for arm, values in finals.items():
        for seed, final in enumerate(values):
            run_dir = tmp_path / f"{arm}-seed{seed}"
            fake_run(run_dir, {0: (0.2, 96), 4: (final, 96)}, step_s=10.0)
            lines.append(json.dumps({"key": f"{arm}/seed{seed}", "arm": arm, "seed": seed, "wall_s": 100.0,
                                     "load_start": 1.0, "load_end": 1.0, **study.read_run(run_dir)}))
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    text = study.summarize(tmp_path)
    bf16 = next(line for line in text.splitlines() if "bf16 - fp32" in line)
    pipelined = next(line for line in text.splitlines() if "pipelined - fp32" in line)
    assert "+0.0 points" in bf16 and "no effect larger than 10 points" in bf16 and "x 96 test instances" in bf16
    assert "-37.0 points" in pipelined and "interval below 0" in pipelined
    assert "| fp32 | 20.0 [20, 20, 20] | 92.0 [90, 92, 94] |" in text


def test_a_lock_is_taken_once_and_taken_over_from_a_dead_process(tmp_path):
    lock = tmp_path / "run.lock"
    assert study._claim(lock) and not study._claim(lock)  # this process holds it: not twice
    lock.write_text("999999999")  # no such process
    assert study._claim(lock)
