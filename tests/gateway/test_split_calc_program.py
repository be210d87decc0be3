"""Split-Calc written as a program (examples/gateway/split_calc_program.py) against the built-in team:
the same instances, prompt token ids, rewards and AT-GRPO groups in a training step, on a tiny random model."""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from pathlib import Path

import pytest
import torch

from teamrl.config import load_config
from teamrl.rollout.tree import RewardWeights
from teamrl.tasks.split_calc import answer_value, evaluate_formula
from teamrl.setup.team import build_policies, build_workflow
from teamrl.training.schedule import rollout_step

from toy import tiny_policy

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ROOT / "src/teamrl/configs/split_calc_team.yaml"
PROGRAM = ROOT / "examples/gateway/split_calc_program.yaml"
STEP = ["train.steps=1", "train.batch_size=3", "algorithm.k=4", "train.eval_instances=2", "train.threads=1"]


def _program_module():
    spec = importlib.util.spec_from_file_location("split_calc_program", ROOT / "examples/gateway/split_calc_program.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random model without a chat template, as the tiny default (no warm-up: a step takes seconds)."""
    folder = tmp_path_factory.mktemp("split-calc-model")
    policy = tiny_policy(seed=5)
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


def _one_step(config_file: Path, model_dir: Path, tmp_path: Path):
    """(samples, workflow, policies) of the first training step's rollout of a config, seeded as `train` seeds it."""
    config = load_config(config_file, STEP + [f"output_dir={tmp_path}"])
    workflow = build_workflow(config)
    policies, mapping = build_policies(config, workflow, model_path=str(model_dir))
    try:
        samples, _ = rollout_step(config, workflow, policies, mapping, 0, torch.Generator().manual_seed(config.seed),
                                  random.Random(config.seed))
    finally:
        if hasattr(workflow, "close"):
            workflow.close()
    return samples, workflow, policies[mapping["analyst"]]


def test_the_program_plays_the_built_in_instances():
    program = _program_module()
    builtin = build_workflow(load_config(BUILTIN))
    for split, index in [("train", 0), ("train", 7), ("train", 10_000), ("heldout", 0), ("heldout", 99)]:
        item = program.instances(split, index)
        assert (item["operation"], item["x"], item["y"]) == builtin.new_state(split, index).item


# Right formula and wrong value, and the reverse: there the two agents' team terms differ.
@pytest.mark.parametrize("formula, value", [("2*(x+y)", "2*(7+3)"), ("2*(x+y)", "21"), ("x+y", "20"), ("x y", "4 5"),
                                            ("", ""), ("x*y+x", "28"), ("  x*x -  y ", "46")])
def test_each_call_is_rewarded_as_the_built_in_rewards_it(formula, value):
    program = _program_module()
    builtin = build_workflow(load_config(BUILTIN))
    weights = RewardWeights()  # the config's: team_weight = local_weight = 1
    for operation in ("twice sum", "sum", "square minus y"):
        state = builtin.new_state("train", 0)
        state.item = (operation, 7, 3)
        analyst = weights.combine(builtin.apply("analyst", state, formula))
        calculator = weights.combine(builtin.apply("calculator", state, value))
        mirrored = program.SplitCalcState((operation, 7, 3), " ".join(formula.split())[:24])
        result = program.episode_result(mirrored, formula, value)
        assert result["team"] + result["agents"]["analyst"] == pytest.approx(analyst)
        assert result["team"] + result["agents"]["calculator"] == pytest.approx(calculator)
        assert result["success"] == builtin.success(state)


def test_a_step_has_the_built_in_prompts_and_groups(model_dir, tmp_path):
    builtin, builtin_flow, policy = _one_step(BUILTIN, model_dir, tmp_path / "builtin")
    program, _, _ = _one_step(PROGRAM, model_dir, tmp_path / "program")
    # The same AT-GRPO groups: (instance, turn = call index, agent) keys, each with K members.
    assert Counter(s.tree_key for s in program) == Counter(s.tree_key for s in builtin)
    assert set(Counter(s.tree_key for s in builtin).values()) == {4}
    # The analyst's prompt is the instance's alone: its token ids equal the built-in's.
    for kind in (builtin, program):
        assert all(len(s.generation.prompt_ids) for s in kind)
    prompts = {(s.instance, s.agent): s.generation.prompt_ids for s in builtin if s.agent == "analyst"}
    assert {(s.instance, s.agent): s.generation.prompt_ids for s in program if s.agent == "analyst"} == prompts
    # Both commit the best of the analyst's K formulas (algorithm.commit: greedy) and sample the calculator's
    # group on it (AT-GRPO's commit and continue): each analyst group's committed member has the group's top reward.
    for kind in (builtin, program):
        for instance in {s.instance for s in kind}:
            group = [s for s in kind if (s.instance, s.agent) == (instance, "analyst")]
            assert sum(s.committed for s in group) == 1
            assert next(s for s in group if s.committed).reward == max(s.reward for s in group)
    # The calculator's prompt holds the committed formula of its episode: it is the built-in's prompt for that
    # formula, and each call's reward is the built-in's reward for the same responses.
    formulas = {s.episode: s.generation.text for s in program if s.agent == "analyst" and s.committed}
    assert len(formulas) == len({s.instance for s in program})  # one episode per instance
    for s in program:
        state = builtin_flow.new_state("train", s.instance)
        if s.agent == "analyst":
            assert s.reward == pytest.approx(RewardWeights().combine(builtin_flow.apply("analyst", state, s.generation.text)))
            continue
        builtin_flow.apply("analyst", state, formulas[s.episode])
        assert s.generation.prompt_ids == policy.encode_prompt(builtin_flow.render("calculator", state))
        assert s.reward == pytest.approx(RewardWeights().combine(builtin_flow.apply("calculator", state,
                                                                                     s.generation.text)))


def test_the_scripted_teammates_answer_the_compact_prompts():
    program = _program_module()
    builtin = build_workflow(load_config(BUILTIN))
    state = builtin.new_state("train", 3)
    formula = program.scripted("analyst", [{"role": "user", "content": builtin.render("analyst", state)}])
    builtin.apply("analyst", state, formula)
    value = program.scripted("calculator", [{"role": "user", "content": builtin.render("calculator", state)}])
    # The script's answers are well-formed (right or wrong): a formula in x and y, arithmetic on numbers.
    assert evaluate_formula(formula, 1, 1) is not None and answer_value(value) is not None
