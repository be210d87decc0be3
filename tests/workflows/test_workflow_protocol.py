"""The workflow protocol: every registered workflow satisfies it, and its optional hooks' defaults do
what `teamrl.workflows.base` documents."""

from __future__ import annotations

import random

import pytest
import torch
from toy import ToyState, ToyWorkflow, tiny_policy

import teamrl.gateway  # noqa: F401 (registers the `program` task)
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.workflows.base import (
    OPTIONAL_HOOKS,
    Agent,
    Outcome,
    Workflow,
    apply_many,
    with_hook_defaults,
)
from teamrl.config.tasks import TASKS

SETTINGS = {"program": {"command": "python -c pass", "agents": ["a", "b"]}}
"""Keys a task needs beyond its defaults to build at all."""


def _registered() -> list[tuple[str, str]]:
    """(task, workflow kind) of every workflow the shipped registry builds."""
    kinds = []
    for name, entry in sorted(TASKS.items()):
        kinds += [(name, kind) for kind in ["team", *(["single"] if entry.single else []), *sorted(entry.workflows)]]
    return kinds


@pytest.mark.parametrize(("task", "kind"), _registered())
def test_every_registered_workflow_subclasses_the_protocol_and_has_every_member(task, kind):
    entry = TASKS[task]
    workflow = entry.build(kind, entry.settings(**SETTINGS.get(task, {})))
    try:
        assert Workflow in type(workflow).__mro__, f"{type(workflow).__name__} does not subclass Workflow"
        assert isinstance(workflow, Workflow)  # structurally too: every required member and hook is there
        assert workflow.agents and workflow.max_turns >= 1 and isinstance(workflow.parallel, bool)
        assert isinstance(workflow.metrics(), dict) and isinstance(workflow.pass_word, str)
    finally:
        workflow.close()


def test_the_program_task_is_among_the_checked_ones():
    assert ("program", "team") in _registered() and ("calc_flows", "debate") in _registered()


class Minimal(Workflow):
    """Only the required members: every hook keeps its default."""

    parallel = False
    max_turns = 2

    def __init__(self):
        self.agents = [Agent("a", "writer")]

    def new_state(self, split, index):
        return []

    def render(self, agent, state):
        return "|".join(state) + ">"

    def apply(self, agent, state, response):
        state.append(response)
        return Outcome(team=float(len(state)), local=0.0)

    def is_done(self, state):
        return False

    def success(self, state):
        return bool(state)


def _check_defaults(workflow):
    states, answers = [[], ["x"], []], ["p", "q", "r"]
    outcomes = workflow.apply_many("a", states, answers)  # `apply` on each, in order
    assert states == [["p"], ["x", "q"], ["r"]] and [o.team for o in outcomes] == [1.0, 2.0, 1.0]
    assert workflow.may_pass("a", []) is False and workflow.pass_word == ""  # never passes
    state = ["kept"]
    passed = workflow.on_pass("a", state)  # no change, zero rewards
    assert state == ["kept"] and (passed.team, passed.local, passed.terms, passed.info) == (0.0, 0.0, {}, {})
    assert workflow.play_episodes([0], "train", {}, {}, {}, 2, None, None, None) is None  # the driver plays
    assert workflow.metrics() == {}
    assert workflow.close() is None


def test_the_defaults_do_what_the_protocol_documents():
    _check_defaults(Minimal())
    # an empty response is applied, not passed: the default never lets anyone pass
    state = []
    outcome = apply_many(Minimal(), "a", [state], [""])[0]
    assert state == [""] and "passed" not in outcome.info


def test_a_subclass_missing_a_required_method_cannot_be_built_and_names_it():
    class NoRender(Workflow):
        agents, parallel, max_turns = [Agent("a", "a")], False, 1

        def new_state(self, split, index):
            return []

        def apply(self, agent, state, response):
            return Outcome(0.0, 0.0)

        def is_done(self, state):
            return True

        def success(self, state):
            return False

    with pytest.raises(TypeError, match="render"):
        NoRender()


class Plain:
    """A plain class with the required members only (the protocol does not ask for a base class)."""

    parallel = False
    max_turns = 2
    __init__ = Minimal.__init__
    new_state, render, apply = Minimal.new_state, Minimal.render, Minimal.apply
    is_done, success = Minimal.is_done, Minimal.success


def test_a_plain_class_gets_the_defaults_it_lacks_and_keeps_its_own_hooks():
    plain = Plain()
    assert not isinstance(plain, Workflow)
    assert with_hook_defaults(plain) is plain and isinstance(plain, Workflow)
    _check_defaults(plain)

    class OwnMetrics(Plain):
        def metrics(self):
            return {"mine": 1.0}

    own = with_hook_defaults(OwnMetrics())
    assert own.metrics() == {"mine": 1.0} and own.play_episodes([], "train", {}, {}, {}, 1, None, None, None) is None
    assert set(OPTIONAL_HOOKS) == {"apply_many", "may_pass", "on_pass", "play_episodes", "metrics", "close"}


def test_the_driver_plays_a_plain_class_turn_by_turn():
    class PlainToy:
        agents, parallel, max_turns = ToyWorkflow().agents, False, 2
        new_state, render, apply = ToyWorkflow.new_state, ToyWorkflow.render, ToyWorkflow.apply
        is_done, success = ToyWorkflow.is_done, ToyWorkflow.success

        def __init__(self):
            self.prompts = []

    policy = tiny_policy("llama", seed=0)
    samples, episodes = run_episodes(PlainToy(), [0], "train", {"p": policy}, {"a": "p", "b": "p"},
                                     SamplingParams(1.0, max_new_tokens=3), 2, RewardWeights(1.0, 1.0),
                                     torch.Generator().manual_seed(0), random.Random(0))
    assert len(episodes) == 1 and isinstance(episodes[0].state, ToyState)
    assert len(samples) == 2 * 2 * 2  # 2 turns x 2 agents x 2 candidates
