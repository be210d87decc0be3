"""Passing a turn: the workflow hooks (may_pass, pass_word, on_pass) and what the tree driver makes of a pass."""

import random
from collections import defaultdict

import torch

from teamrl.algorithms.advantages import group_ids, group_normalized_advantages
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.workflows.base import Outcome, apply_many, is_pass
from toy import ToyState, ToyWorkflow, tiny_policy

PASS_MARK = "<passed>"


class PassingToy(ToyWorkflow):
    """ToyWorkflow where the critic b may pass (empty or "pass"); a pass is written into the history."""

    pass_word = "pass"

    def may_pass(self, agent: str, state: ToyState) -> bool:
        return agent == "b"

    def on_pass(self, agent: str, state: ToyState) -> Outcome:
        state.history.append((len(state.history) // 2, agent, PASS_MARK))
        return Outcome(team=0.0, local=0.25, terms={"pass": 0.25})


def test_only_an_allowed_agent_passes_and_apply_never_sees_it():
    wf = PassingToy()
    states = [ToyState() for _ in range(5)]
    outcomes = apply_many(wf, "b", states, ["", "  \n", "pass", "pass it", "x"])
    assert [o.info.get("passed", False) for o in outcomes] == [True, True, True, False, False]
    assert [s.history[0][2] for s in states] == [PASS_MARK] * 3 + ["pass it", "x"]
    assert outcomes[0].local == 0.25 and outcomes[4].team == 1.0
    # agent a may not pass: its empty response is applied as an (empty) answer
    empty = ToyState()
    assert not apply_many(wf, "a", [empty], [""])[0].info and empty.history == [(0, "a", "")]
    assert not is_pass(wf, "b", ToyState(), "Pass")  # the pass word is matched exactly


def test_a_workflow_without_hooks_never_passes_and_the_default_pass_changes_nothing():
    assert not is_pass(ToyWorkflow(), "b", ToyState(), "")

    class BarePass(ToyWorkflow):
        def may_pass(self, agent, state):
            return True

    state = ToyState()
    outcome = apply_many(BarePass(), "a", [state], [""])[0]
    assert (outcome.team, outcome.local, outcome.info) == (0.0, 0.0, {"passed": True}) and state.history == []


def _rollout(workflow, k=6):
    """A shared tiny policy whose stop tokens are half the vocabulary: about half the responses are empty."""
    policy = tiny_policy("llama", seed=0)
    policy.stop_token_ids = lambda: list(range(0, len(policy.tokenizer), 2))
    return run_episodes(workflow, [0, 1, 2], "train", {"p": policy}, {"a": "p", "b": "p"},
                        SamplingParams(1.0, max_new_tokens=4), k, RewardWeights(1.0, 1.0),
                        torch.Generator().manual_seed(0), random.Random(0))


def test_passing_candidates_stay_in_their_group_and_get_the_pass_reward():
    samples, episodes = _rollout(PassingToy())
    passed = [s for s in samples if s.passed]
    assert passed and all(s.agent == "b" for s in passed)
    assert all(s.generation.text == "" and len(s.generation.response_ids) == 1 for s in passed)  # the stop token
    assert all(s.reward == 0.25 and s.outcome.terms == {"pass": 0.25} for s in passed)
    assert any(s.agent == "a" and s.generation.text == "" for s in samples)  # a's empty answers are not passes
    groups = defaultdict(list)
    for s in samples:
        groups[s.tree_key].append(s)
    assert all(len(g) == 6 and len({tuple(s.generation.prompt_ids) for s in g}) == 1 for g in groups.values())
    mixed = [g for g in groups.values() if 0 < sum(s.passed for s in g) < len(g)]
    assert mixed  # passing competes with answering inside one group
    rewards = torch.tensor([s.reward for s in samples])
    adv, _ = group_normalized_advantages(rewards, group_ids([s.tree_key for s in samples]))
    by_sample = dict(zip(map(id, samples), adv.tolist()))
    assert any(by_sample[id(s)] != 0 for g in mixed for s in g if s.passed)


def test_a_committed_pass_is_what_the_others_see_and_the_transcript_says():
    for parallel in (False, True):
        samples, episodes = _rollout(PassingToy(parallel=parallel, max_turns=2))
        for e, episode in enumerate(episodes):
            committed = [s for s in samples if s.episode == e and s.committed]
            expected = [(s.turn, s.agent, PASS_MARK if s.passed else s.generation.text) for s in committed]
            assert episode.state.history == expected
            assert [bool(t.get("passed")) for t in episode.transcript] == [s.passed for s in committed]
        assert any(s.passed and s.committed for s in samples), parallel
