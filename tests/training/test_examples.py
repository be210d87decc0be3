"""The docs' custom-workflow example (docs/howto/own-workflow.md) runs through the real rollout driver and update."""

import importlib.util
import random
import re
from pathlib import Path

import torch

from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.training.credit import assign_advantages
from teamrl.training.update import make_optimizer, update_policy
from teamrl.workflows.base import Workflow, with_hook_defaults
from toy import tiny_policy

ROOT = Path(__file__).resolve().parents[2]


def _load_example():
    spec = importlib.util.spec_from_file_location("guess_team", ROOT / "examples" / "guess_team.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_example_is_the_example_file():
    page = (ROOT / "docs" / "howto" / "own-workflow.md").read_text()
    docs_code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert docs_code in (ROOT / "examples" / "guess_team.py").read_text()


def test_custom_workflow_trains_one_step():
    team = _load_example().GuessTeam()
    assert not isinstance(team, Workflow)  # a plain class: the optional hooks are Workflow's defaults ...
    assert with_hook_defaults(team) is team and isinstance(team, Workflow)  # ... which the driver gives it
    team = _load_example().GuessTeam()  # run_episodes takes the plain class as it is
    policy = tiny_policy("qwen2")
    samples, episodes = run_episodes(team, [0, 1, 2, 3], "train", {"p": policy},
                                     {"proposer": "p", "checker": "p"}, SamplingParams(max_new_tokens=3), 4,
                                     RewardWeights(), torch.Generator().manual_seed(0), random.Random(0))
    assert {s.agent for s in samples} == {"proposer", "checker"}
    algo = AlgorithmConfig(k=4)
    assign_advantages(samples, episodes, algo)
    opt = make_optimizer(policy, PolicyConfig(), TrainConfig(), with_reference=False)
    stats = update_policy(opt, samples, algo, 1.0, 1.0, random.Random(0))
    assert stats["samples"] == len(samples)
