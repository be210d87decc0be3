"""benchmarks/trl_side_by_side.py: parsing a worker's output, the ratios by hand, both sides' setups
agreeing, and each side's worker on a tiny budget (TRL's only where TRL is importable)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys

import pytest

from teamrl.config import load_config
from benchmarks import trl_side_by_side

sbs = trl_side_by_side


def _output(side, walls, cpus, trained):
    return json.dumps({"side": side, "info": {"trl": "x"}, "steps": [
        {"wall_s": w, "cpu_s": c, "trained": t, "sampled": t, "tokens": 10 * t, "reward": 0.5}
        for w, c, t in zip(walls, cpus, trained)]})


def test_parse_side_and_its_rates_by_hand():
    result = sbs.parse_side(_output("teamrl", [1.0, 3.0, 2.0], [0.5, 1.0, 1.5], [10, 10, 10]))
    assert result.side == "teamrl" and result.info == {"trl": "x"}
    assert result.s_per_step == 2.0  # median of 1, 3, 2
    assert result.cpu_per_step == 1.0
    assert result.samples_per_s == pytest.approx(30 / 6)
    assert result.samples_per_cpu_s == pytest.approx(30 / 3)
    assert result.tokens == [100.0, 100.0, 100.0]


@pytest.mark.parametrize("text, message", [
    ("Traceback (most recent call last)", "not JSON"),
    (json.dumps({"side": "other", "steps": []}), "needs 'side'"),
    (json.dumps({"side": "trl", "steps": []}), "no timed steps"),
    (json.dumps({"side": "trl", "steps": [{"wall_s": 1.0}]}), "missing or non-numeric cpu_s"),
    (_output("trl", [0.0], [1.0], [4]), "wall_s must be > 0"),
])
def test_parse_side_refuses_bad_output(text, message):
    with pytest.raises(ValueError, match=message):
        sbs.parse_side(text)


def test_round_ratios_and_summary_by_hand():
    ours = sbs.parse_side(_output("teamrl", [1.0, 3.0, 2.0], [1.0, 1.0, 1.0], [10, 10, 10]))  # 2 s/step, 5/s
    trl = sbs.parse_side(_output("trl", [4.0, 4.0], [2.0, 2.0], [8, 8]))  # 4 s/step, 2 samples/s
    team = sbs.parse_side(_output("team", [5.0], [2.0], [30]))  # 6 samples/s
    ratios = sbs.round_ratios({"teamrl": ours, "trl": trl, "team": team})
    assert ratios["per_step"] == pytest.approx(2.0)
    assert ratios["per_sample"] == pytest.approx(5 / 2)
    assert ratios["cpu_per_sample"] == pytest.approx((30 / 3) / (16 / 4))
    assert ratios["team_per_sample"] == pytest.approx(6 / 2)
    summary = sbs.summarise([{"per_step": 2.0}, {"per_step": 4.0}, {"per_step": 3.0, "team_per_sample": 1.0}])
    assert summary == {"per_step": (3.0, 2.0, 4.0)}  # a ratio missing from a round is left out


def test_both_sides_get_the_same_setup():
    setup = sbs.Setup(model="m", prompts=3, k=4, max_new_tokens=7, lr=3e-4, weight_decay=0.01, warmup_steps=2,
                      steps=5)
    config = load_config(None, [o for o in sbs.teamrl_overrides(setup, team=False) if not o.startswith("policy.model")])
    trl = sbs.trl_arguments(setup, "out")
    assert config.algorithm.k == trl["num_generations"] == 4
    assert config.train.batch_size * config.algorithm.k == trl["per_device_train_batch_size"] == 12
    assert trl["gradient_accumulation_steps"] == 1 and config.algorithm.minibatch_size >= 12  # one optimizer step
    assert config.rollout.max_new_tokens == trl["max_completion_length"] == 7
    assert config.policy.lr == trl["learning_rate"] == 3e-4
    assert config.policy.weight_decay == trl["weight_decay"] == 0.01
    assert config.train.steps == trl["max_steps"] == 7
    assert config.train.grad_clip == trl["max_grad_norm"] and config.algorithm.kl_coef == trl["beta"] == 0.0
    assert config.train.warmup_steps == trl["warmup_steps"] == 0
    assert (config.workflow.name, config.workflow.max_turns) == ("single", 1)
    assert not config.algorithm.drop_zero_signal  # every sample is trained, as in TRL
    team = load_config(None, [o for o in sbs.teamrl_overrides(setup, team=True) if not o.startswith("policy.model")])
    assert (team.workflow.name, team.workflow.max_turns, team.algorithm.k) == ("team", 3, 4)


def _run_worker(worker, tmp_path, model, **kwargs):
    setup = sbs.Setup(model=str(model), prompts=2, k=2, max_new_tokens=4, warmup_steps=1, steps=1)
    out = tmp_path / "out.json"
    worker(setup, out=out, **kwargs)
    return sbs.parse_side(out.read_text())


def test_teamrl_worker_times_its_steps(tmp_path, small_model_dir):
    result = _run_worker(sbs.worker_teamrl, tmp_path, small_model_dir, team=False)
    assert result.side == "teamrl" and len(result.wall_s) == 1
    assert result.trained == [4.0]  # 2 prompts x K=2, one turn, every sample trained
    assert 0 < result.tokens[0] <= 4 * 4 and result.cpu_s[0] > 0


@pytest.mark.skipif(importlib.util.find_spec("trl") is None,
                    reason="TRL is not installed here; see benchmarks/trl_side_by_side.py for its venv")
def test_trl_worker_times_its_steps(tmp_path, small_model_dir):
    result = _run_worker(sbs.worker_trl, tmp_path, small_model_dir)
    assert result.side == "trl" and len(result.wall_s) == 1 and result.trained == [4.0]
    assert 0 < result.tokens[0] <= 4 * 4
    assert result.info["prompt_ids_as_teamrl"] is True


@pytest.mark.skipif(importlib.util.find_spec("trl") is not None, reason="TRL is importable here")
def test_missing_trl_says_what_to_run(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["trl_side_by_side.py", "--trl-python", sys.executable])
    with pytest.raises(SystemExit) as stop:
        sbs.main()
    assert "pip install trl==1.16.0" in str(stop.value) and "--system-site-packages" in str(stop.value)


def test_report_shows_the_ratios_phases_and_differences():
    ours = sbs.parse_side(_output("teamrl", [1.0, 1.0], [1.0, 1.0], [8, 8]))
    ours.info = {"rollout_s": 0.6, "update_s": 0.3}
    trl = sbs.parse_side(_output("trl", [4.0, 4.0], [2.0, 2.0], [8, 8]))
    report = sbs.format_report(sbs.Setup(model="m"), [{"teamrl": ours, "trl": trl}], "today", ("load 1", "load 2"))
    assert "per trained sample (wall): 4.00x (4.00-4.00)" in report
    assert "per trained sample (CPU seconds): 2.00x" in report
    assert "teamrl: rollout + update, median wall s/step from its metrics.jsonl, by round: 0.60 + 0.30" in report
    assert "two-agent AT-GRPO team vs TRL" not in report  # the team's ratio only with a team side
    assert all(d in report for d in sbs.DIFFERENCES)


def test_arithmetic_floor_and_its_report_by_hand():
    shape = sbs.grpo_work.ModelShape(decoder_weights=10, head_weights=4, hidden=2, layers=1)
    setup = sbs.Setup(model="m", prompts=1, k=2, warmup_steps=0, steps=2)
    ours = sbs.parse_side(_output("teamrl", [1.0], [0.5], [0.4]))  # 4 sampled tokens per step
    trl = sbs.parse_side(_output("trl", [1.0], [2.0], [0.4]))
    # two steps' prompts of 3 tokens: per step, 4 x (108 + 2 x 68) shared, 4 x (2 x 108 + 2 x 68) per row
    floor = sbs.arithmetic_floor(setup, [{"teamrl": ours, "trl": trl}], [3, 3], peak_gflops=1e-6, shape=shape)
    assert floor.gflop == pytest.approx({"teamrl": 976e-9, "trl": 1408e-9})
    assert floor.floor_s("teamrl") == pytest.approx(976e-3)  # 976 FLOP at 1000 FLOP/s
    assert floor.share("teamrl") == pytest.approx(0.976 / 0.5)
    assert floor.ceiling == pytest.approx(2.0 / 0.976)
    report = "\n".join(sbs.format_floor(floor))
    assert "TRL's step does 1.44x teamrl's unavoidable arithmetic" in report
    assert "would be 2.05x faster than TRL as measured" in report
    lora = sbs.arithmetic_floor(dataclasses.replace(setup, lora_r=8), [{"teamrl": ours, "trl": trl}], [3, 3],
                                peak_gflops=1e-6, shape=shape)
    assert lora.gflop == pytest.approx({"teamrl": 732e-9, "trl": 1056e-9})  # 3 forwards' worth, not 4
    assert "the base is frozen, so the update counts 2 forwards" in "\n".join(sbs.format_floor(lora))
