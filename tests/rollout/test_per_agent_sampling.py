"""Each agent samples with its own settings: tree driver, training rollout, evaluation and the update."""

import dataclasses
import random
from collections import defaultdict

import pytest
import torch

from teamrl.algorithms.advantages import group_ids
from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig, load_config
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout import builtin_engine as engine
from teamrl.rollout.builtin_engine import SamplingParams, sample, stop_cut
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.rollout.evaluation import evaluate
from teamrl.training.schedule import rollout_step
from teamrl.training.update import make_optimizer, update_policy
from toy import ToyWorkflow, tiny_policy

MAPPING = {"a": "p", "b": "p"}  # both agents share one policy


def _rollout(params, k=5, workflow=None, seed=0):
    policy = tiny_policy("llama", seed=0)
    workflow = workflow or ToyWorkflow()
    samples, episodes = run_episodes(workflow, [0, 1, 2], "train", {"p": policy}, MAPPING, params, k,
                                     RewardWeights(1.0, 1.0), torch.Generator().manual_seed(seed),
                                     random.Random(seed))
    return samples, episodes


def _lengths(samples, agent):
    return [len(s.generation.response_ids) for s in samples if s.agent == agent]


def test_each_agent_gets_its_own_length_cap():
    samples, _ = _rollout({"a": SamplingParams(1.0, max_new_tokens=3), "b": SamplingParams(1.0, max_new_tokens=10)})
    assert max(_lengths(samples, "a")) == 3
    assert max(_lengths(samples, "b")) == 10  # the tiny random model rarely stops on its own


def test_temperature_zero_is_greedy_for_one_agent_only():
    samples, _ = _rollout({"a": SamplingParams(0.0, max_new_tokens=6), "b": SamplingParams(1.5, max_new_tokens=6)})
    groups = defaultdict(list)
    for s in samples:
        groups[s.tree_key].append(s)
    a_groups = [g for key, g in groups.items() if key[2] == "a"]
    b_groups = [g for key, g in groups.items() if key[2] == "b"]
    assert all(len({tuple(s.generation.response_ids) for s in g}) == 1 for g in a_groups)
    assert all(len({tuple(s.generation.response_ids) for s in g}) > 1 for g in b_groups)
    policy = tiny_policy("llama", seed=0)
    first = a_groups[0][0].generation
    greedy = sample(policy, [first.prompt_ids], 1, SamplingParams(0.0, max_new_tokens=6), torch.Generator())
    assert first.response_ids == greedy[0][0].response_ids
    # log-probs are recorded with the temperature they are under (greedy: the plain softmax)
    assert {s.generation.temperature for s in samples if s.agent == "a"} == {1.0}
    assert {s.generation.temperature for s in samples if s.agent == "b"} == {1.5}


def test_tree_groups_stay_whole_with_mixed_settings():
    params = {"a": SamplingParams(0.7, top_k=5, max_new_tokens=3, stop_strings=("e",)),
              "b": SamplingParams(1.5, top_p=0.9, max_new_tokens=8)}
    samples, _ = _rollout(params, k=4)
    ids = group_ids([s.tree_key for s in samples]).tolist()
    members, prompts = defaultdict(list), defaultdict(set)
    for gid, s in zip(ids, samples):
        members[gid].append(s)
        prompts[gid].add(tuple(s.generation.prompt_ids))
    assert len(members) == 3 * 2 * 2  # instances x turns x agents
    for gid, group in members.items():
        assert len(group) == 4 and len(prompts[gid]) == 1
        assert len({(s.instance, s.turn, s.agent) for s in group}) == 1
        cap = params[group[0].agent].max_new_tokens
        assert all(len(s.generation.response_ids) <= cap for s in group)
    # a's stop string cut its responses where it ended them (and it is kept)
    a_texts = [s.generation.text for s in samples if s.agent == "a"]
    assert all("e" not in t[:-1] for t in a_texts) and any(t.endswith("e") for t in a_texts)


def test_settings_for_unknown_agents_are_an_error():
    with pytest.raises(ValueError, match="no SamplingParams for agents b"):
        _rollout({"a": SamplingParams()})


def test_the_configs_by_role_reaches_the_training_rollout():
    config = load_config(None, ["train.batch_size=2", "algorithm.k=3", "rollout.max_new_tokens=10",
                                "rollout.by_role={writer: {max_new_tokens: 3}}"])  # ToyWorkflow: a writes, b critics
    samples, _ = rollout_step(config, ToyWorkflow(), {"p": tiny_policy("llama")}, MAPPING, 0,
                              torch.Generator().manual_seed(0), random.Random(0))
    assert max(_lengths(samples, "a")) == 3 and max(_lengths(samples, "b")) == 10


def test_evaluation_uses_each_agents_eval_settings():
    policy = tiny_policy("llama", seed=0)
    sampling = {"a": SamplingParams(0.0, max_new_tokens=4), "b": SamplingParams(1.5, max_new_tokens=9)}
    texts = defaultdict(list)
    for seed in (0, 1):
        _, episodes = evaluate(ToyWorkflow(max_turns=1), {"p": policy}, MAPPING, 3, seed=seed, sampling=sampling)
        for e in episodes:
            for entry in e.transcript:
                texts[entry["agent"], seed].append(entry["text"])
    assert texts["a", 0] == texts["a", 1]  # greedy
    assert texts["b", 0] != texts["b", 1]  # sampled
    assert max(len(t) for t in texts["a", 0]) <= 4 < max(len(t) for t in texts["b", 0])


def test_the_update_scores_each_sample_at_its_own_temperature():
    """Before any step the new policy is the old one: every PPO ratio is 1, whatever each agent's temperature."""
    policy = tiny_policy("llama", seed=0)
    samples, _ = _rollout({"a": SamplingParams(0.6, max_new_tokens=5), "b": SamplingParams(1.7, max_new_tokens=5)})
    for i, s in enumerate(samples):
        s.advantage = 1.0 if i % 2 else -1.0
    algo = AlgorithmConfig(minibatch_size=len(samples))
    opt = make_optimizer(policy, PolicyConfig(lr=1e-3), TrainConfig(warmup_steps=1), False)
    stats = update_policy(opt, samples, algo, 1.0, 1.0, random.Random(0))
    assert stats["ratio_max"] == pytest.approx(1.0, abs=1e-4)
    # scored at the trainer's single temperature instead, the ratios are off
    policy = tiny_policy("llama", seed=0)
    opt = make_optimizer(policy, PolicyConfig(lr=1e-3), TrainConfig(warmup_steps=1), False)
    unlabelled = [dataclasses.replace(s, generation=dataclasses.replace(s.generation, temperature=None))
                  for s in samples]
    assert update_policy(opt, unlabelled, algo, 1.0, 1.0, random.Random(0))["ratio_max"] > 1.05


def test_per_row_temperatures_score_like_one_call_per_temperature():
    policy = tiny_policy("qwen2", seed=1)
    prompts = [policy.encode_prompt("ab"), policy.encode_prompt("xyz>")]
    responses, index = [[5, 6, 7], [8, 9], [10, 11, 12, 13]], [0, 1, 1]
    temps = torch.tensor([0.5, 1.0, 2.0])
    with torch.no_grad():
        together, mask, _ = shared_prefix_logprobs(policy.model, prompts, responses, index, 0, temps)
        for row, temp in enumerate(temps.tolist()):
            alone, _, _ = shared_prefix_logprobs(policy.model, prompts, responses, index, 0, temp)
            n = len(responses[row])
            assert torch.allclose(together[row, :n], alone[row, :n], atol=1e-5)


def test_stop_cut_against_hand_computed_cuts():
    join = "".join
    assert stop_cut(join, ["ab", "\n", "\nc", "d"], ["\n\n"]) == (3, 4)  # the token "\nc" spills past the stop
    assert stop_cut(join, list("xxyz"), ["yz", "xy"]) == (3, 3)  # the first stop string to end wins
    assert stop_cut(join, list("abc"), ["c", "abc"]) == (3, 3)
    assert stop_cut(join, list("abc"), []) is None
    assert stop_cut(join, [], ["a"]) is None


def test_a_stop_string_the_decode_loop_missed_still_cuts_the_trained_tokens():
    """`_collect` cuts tokens, log-probs and text together even if sampling ran on past the stop string."""
    policy = tiny_policy("llama")
    tok = policy.tokenizer
    ids = tok.encode("xxaeyy", add_special_tokens=False)
    row = torch.tensor([ids])
    logps = torch.arange(len(ids), dtype=torch.float)[None, :]
    gens = engine._collect([[1, 2]], 1, row, logps, logps * 2, torch.tensor([len(ids)]), torch.tensor([False]),
                           torch.tensor(policy.stop_token_ids()), policy,
                           SamplingParams(max_new_tokens=len(ids), stop_strings=("ae",)))
    gen = gens[0][0]
    assert gen.text == "xxae" and gen.response_ids == ids[:4] and gen.finished
    assert gen.logprobs == [0.0, 1.0, 2.0, 3.0] and gen.sampler_logprobs == [0.0, 2.0, 4.0, 6.0]


def test_the_engine_doctests_hold():
    import doctest

    assert doctest.testmod(engine).failed == 0
