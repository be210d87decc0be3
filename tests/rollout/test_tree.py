"""The reference implementation's pitfalls, each as a test of the rollout driver."""

import random
from collections import defaultdict

import torch

from teamrl.algorithms.advantages import group_ids, group_normalized_advantages
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from toy import ToyWorkflow, tiny_policy

PARAMS = SamplingParams(temperature=1.5, max_new_tokens=6)


def _rollout(workflow, k=6, instances=(0, 1, 2), seed=0):
    policy = tiny_policy("llama", seed=seed)
    return run_episodes(workflow, list(instances), "train", {"p": policy}, {"a": "p", "b": "p"},
                        PARAMS, k, RewardWeights(1.0, 1.0), torch.Generator().manual_seed(seed),
                        random.Random(seed))


def test_later_agents_get_their_own_candidates_and_nonzero_advantages():
    samples, _ = _rollout(ToyWorkflow())
    later = [s for s in samples if s.agent == "b"]
    by_group = defaultdict(list)
    for s in later:
        by_group[s.tree_key].append(s)
    assert all(len(g) == 6 for g in by_group.values())
    # the K candidates of the second agent differ and are scored on their own
    assert any(len({s.generation.text for s in g}) > 1 for g in by_group.values())
    assert any(len({s.reward for s in g}) > 1 for g in by_group.values())
    rewards = torch.tensor([s.reward for s in samples])
    adv, _ = group_normalized_advantages(rewards, group_ids([s.tree_key for s in samples]))
    later_adv = [a for a, s in zip(adv.tolist(), samples) if s.agent == "b"]
    assert any(abs(a) > 0 for a in later_adv)


def test_groups_never_mix_instances_turns_or_agents():
    samples, _ = _rollout(ToyWorkflow())
    ids = group_ids([s.tree_key for s in samples]).tolist()
    members = defaultdict(set)
    prompts = defaultdict(set)
    for gid, s in zip(ids, samples):
        members[gid].add((s.instance, s.turn, s.agent))
        prompts[gid].add(tuple(s.generation.prompt_ids))
    assert all(len(m) == 1 for m in members.values())
    # one group = one prompt: the K candidates answer the same committed history
    assert all(len(p) == 1 for p in prompts.values())
    assert len(members) == 3 * 2 * 2  # instances x turns x agents


def test_the_stepped_state_is_the_observed_and_rewarded_state():
    samples, episodes = _rollout(ToyWorkflow())
    for e, episode in enumerate(episodes):
        committed = [s for s in samples if s.episode == e and s.committed]
        # exactly the committed candidates were applied, in order, and nothing else
        assert [(s.turn, s.agent, s.generation.text) for s in committed] == episode.state.history
        # the next prompt was rendered from that same state
        for prev, nxt in zip(committed, committed[1:]):
            prompt_text = nxt.generation.prompt_ids
            assert prev.generation.text in _decode(prompt_text)


def test_committed_candidate_is_the_best_with_seeded_ties():
    samples, _ = _rollout(ToyWorkflow())
    by_group = defaultdict(list)
    for s in samples:
        by_group[s.tree_key].append(s)
    for group in by_group.values():
        chosen = [s for s in group if s.committed]
        assert len(chosen) == 1
        assert chosen[0].reward == max(s.reward for s in group)
    again, _ = _rollout(ToyWorkflow())
    assert [s.committed for s in samples] == [s.committed for s in again]


def test_sequential_really_is_sequential_and_parallel_is_not():
    seq = ToyWorkflow(parallel=False, max_turns=1)
    samples, _ = _rollout(seq, instances=(0,))
    a_commit = next(s for s in samples if s.agent == "a" and s.committed).generation.text
    b_prompt = next(p for agent, p in seq.prompts if agent == "b")
    assert b_prompt == f"b|{a_commit}>"

    par = ToyWorkflow(parallel=True, max_turns=2)
    samples, episodes = _rollout(par, instances=(0,))
    b_prompts = [p for agent, p in par.prompts if agent == "b"]
    assert b_prompts[0] == "b|>"  # b did not see a's answer of the same turn
    first_turn = [s.generation.text for s in samples if s.turn == 0 and s.committed]
    assert b_prompts[1] == "b|" + "|".join(first_turn) + ">"  # but sees both next turn
    assert len(episodes[0].state.history) == 4


def _decode(ids):
    from teamrl.policies.tiny_model import build_char_tokenizer
    return build_char_tokenizer().decode(ids)


def test_parallel_agents_on_one_policy_share_one_sample_call(monkeypatch):
    """Same policy and settings: one call per turn for both agents; each agent gets its own prompts' groups."""
    from teamrl.rollout import engine_routing

    calls = []
    real = engine_routing.sample  # a parallel phase's requests go through engine_routing.sample_many

    def counting(policy, prompts, k, params, generator):
        calls.append((len(prompts), params))
        return real(policy, prompts, k, params, generator)

    monkeypatch.setattr(engine_routing, "sample", counting)
    par = ToyWorkflow(parallel=True, max_turns=2)
    samples, _ = _rollout(par, k=3, instances=(0, 1))
    assert calls == [(4, PARAMS), (4, PARAMS)]  # 2 agents x 2 episodes, one call per turn
    policy = tiny_policy("llama")
    for s in samples:  # every candidate was drawn from its own agent's prompt of its turn and episode
        assert policy.tokenizer.decode(s.generation.prompt_ids).startswith(f"{s.agent}|")
    assert len({(s.agent, s.turn, s.episode) for s in samples}) == 8 and len(samples) == 24

    calls.clear()  # different settings per agent: one call each, every row with its agent's settings
    other = SamplingParams(temperature=0.7, max_new_tokens=4)
    run_episodes(ToyWorkflow(parallel=True, max_turns=1), [0, 1], "train", {"p": policy}, {"a": "p", "b": "p"},
                 {"a": PARAMS, "b": other}, 3, RewardWeights(), torch.Generator().manual_seed(0), random.Random(0))
    assert calls == [(2, PARAMS), (2, other)]
