"""Program episodes: K runs per instance, grouping by (instance, agent, call index), batching, the
recorded tokens and log-probs, dropped runs and the determinism check."""

from __future__ import annotations

import math
import random
import time

import openai
import pytest
import torch

from teamrl.gateway import ProgramSettings, ProgramWorkflow
from teamrl.gateway import batching
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout import engine_routing
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes

HERE = __file__
PARAMS = SamplingParams(temperature=1.0, max_new_tokens=6)


def two_calls(instance, endpoint):
    """planner, then solver twice; team reward = length of the last answer (varies between runs)."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    plan = client.chat.completions.create(model="planner", messages=[
        {"role": "user", "content": f"task {instance['index']}"}]).choices[0].message.content
    answer = ""
    for _ in range(2):
        answer = client.chat.completions.create(model="solver", messages=[
            {"role": "user", "content": f"task {instance['index']} plan {plan}"}]).choices[0].message.content
    return {"team": float(len(answer)), "agents": {"planner": 0.5}}


def flaky(instance, endpoint):
    """Index 0 crashes, 1 hangs past the time limit, 2 reports nothing, 3 plays."""
    kind = instance["index"]
    if kind == 0:
        raise RuntimeError("the program broke")
    if kind == 1:
        time.sleep(60)  # a daemon thread: abandoned at the time limit
    if kind == 2:
        return None
    return two_calls(instance, endpoint)


BAD_REWARDS = [float("nan"), float("inf"), 1e308, {"team": 1.0, "agents": {"planner": float("-inf")}}]


def bad_rewards(instance, endpoint):
    """Plays, then reports an invalid reward for indexes 0-3 (NaN, inf, 1e308, an agent's -inf); 4 is fine."""
    result = two_calls(instance, endpoint)
    return BAD_REWARDS[instance["index"]] if instance["index"] < len(BAD_REWARDS) else result


def clocked(instance, endpoint):
    """Reads a random number into its prompt: not deterministic given its responses."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    client.chat.completions.create(model="planner", messages=[
        {"role": "user", "content": f"seed {random.random():.6f}"}])
    return 1.0


def workflow(entry: str, **kw) -> ProgramWorkflow:
    return ProgramWorkflow(ProgramSettings(entry=f"{HERE}:{entry}", agents=["planner", "solver"], **kw),
                           max_turns=4)


def play(wf, policies, mapping, instances, k, split="train"):
    """run_episodes over the program workflow `wf` (closed afterwards: its server stops)."""
    try:
        return run_episodes(wf, instances, split, policies, mapping, PARAMS, k, RewardWeights(),
                            torch.Generator().manual_seed(0), random.Random(0))
    finally:
        wf.close()


@pytest.fixture
def per_role():
    return {"planner": "planner", "solver": "solver"}


def test_k_runs_group_by_instance_agent_and_call_index(two_policies, per_role):
    wf = workflow("two_calls", branching="independent")
    samples, episodes = play(wf, two_policies, per_role, [0, 1], k=3)
    assert len(episodes) == 6 and len(samples) == 6 * 3
    keys = sorted({s.tree_key for s in samples})
    assert keys == sorted((i, t, a) for i in (0, 1) for a, calls in (("planner", 1), ("solver", 2))
                          for t in range(calls))
    assert all(sum(s.tree_key == key for s in samples) == 3 for key in keys)
    for s in samples:
        assert s.policy == s.agent  # per_role: each agent's own policy
        assert s.reward == episodes[s.episode].team_return + (0.5 if s.agent == "planner" else 0.0)
    metrics = wf.metrics()
    assert metrics["gateway/planner/groups"] == 2 and metrics["gateway/solver/groups"] == 4
    assert metrics["gateway/planner/singleton_groups"] == 0
    assert metrics["gateway/nondeterministic_runs"] == 0 and metrics["gateway/replayed_runs"] == 2


def test_shared_regime_routes_every_agent_to_one_policy(two_policies, monkeypatch):
    used = []
    original = engine_routing.sample
    monkeypatch.setattr(batching.engine_routing, "sample", lambda p, *a: used.append(p.name) or original(p, *a))
    wf = workflow("two_calls", check_determinism=False)
    samples, _ = play(wf, {"shared": two_policies["planner"]}, {"planner": "shared", "solver": "shared"}, [0], 2)
    assert {s.policy for s in samples} == {"shared"} and set(used) == {"planner"}  # the shared policy object


def test_k_concurrent_runs_cost_one_engine_call_per_turn(two_policies, per_role, monkeypatch):
    sizes = []
    original = engine_routing.sample
    monkeypatch.setattr(batching.engine_routing, "sample", lambda p, prompts, *a: sizes.append(len(prompts)) or
                        original(p, prompts, *a))
    wf = workflow("two_calls", batch_straggler_ms=10_000, branching="independent")  # only "all K asked" flushes
    play(wf, two_policies, per_role, [5], k=4)
    assert sizes == [4, 4, 4]  # planner, solver, solver: one batched call each; the replay samples nothing
    assert wf.metrics()["gateway/engine_calls"] == 3 and wf.metrics()["gateway/mean_batch"] == 4


def test_tree_levels_share_the_committed_prefix(two_policies, per_role):
    wf = workflow("two_calls")
    samples, episodes = play(wf, two_policies, per_role, [0, 1], k=3)
    metrics = wf.metrics()
    assert len(episodes) == 2 and metrics["gateway/runs"] == 2 * 3  # level 0: K free runs per instance
    assert metrics["gateway/levels"] == 3  # planner, solver, solver: one level per call
    assert metrics["gateway/branch_runs"] == 2 * 2 * 3  # levels 1 and 2: K replaying runs per instance
    assert metrics["gateway/fallback_instances"] == 0 and metrics["gateway/nondeterministic_runs"] == 0
    groups: dict = {}
    for s in samples:
        groups.setdefault(s.tree_key, []).append(s)
    assert len(groups) == 6 and all(len(g) == 3 for g in groups.values())
    for group in groups.values():
        assert sum(s.committed for s in group) == 1
        # the level's runs replayed the committed calls before it: every member saw the same prompt
        assert len({tuple(s.generation.prompt_ids) for s in group}) == 1
    # ...and sampled anew at the level's call (6 random tokens twice alike: next to impossible)
    assert all(len({s.generation.text for s in group}) > 1 for group in groups.values())


def _score(text: str) -> float:
    """A reward that differs between almost any two texts (so the best candidate is unique)."""
    return sum(map(ord, text)) % 101 / 101


def scored_chain(instance, endpoint):
    """planner, then solver twice; each prompt holds the earlier answers; every reward depends on the text."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)

    def ask(agent: str, content: str) -> str:
        return client.chat.completions.create(model=agent, messages=[
            {"role": "user", "content": content}]).choices[0].message.content

    plan = ask("planner", f"task {instance['index']}")
    first = ask("solver", f"plan {plan}")
    second = ask("solver", f"plan {plan} first {first}")
    return {"team": _score(second), "agents": {"planner": _score(plan), "solver": _score(first)}}


def constant(instance, endpoint):
    """planner, then solver; every run scores the same: each commit is a tie."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    plan = client.chat.completions.create(model="planner", messages=[
        {"role": "user", "content": f"task {instance['index']}"}]).choices[0].message.content
    client.chat.completions.create(model="solver", messages=[{"role": "user", "content": f"plan {plan}"}])
    return 1.0


def test_tree_commits_the_best_candidate_and_continues_from_it(two_policies, per_role):
    """AT-GRPO's commit-and-continue: the later calls are sampled after the best earlier candidate, not
    after whichever run happened to be sampled first."""
    k = 4
    samples, episodes = play(workflow("scored_chain"), two_policies, per_role, [0, 1, 2], k=k)
    groups: dict = {}
    for s in samples:
        groups.setdefault(s.tree_key, []).append(s)
    assert sorted(groups) == sorted((i, t, a) for i in (0, 1, 2) for t, a in ((0, "planner"), (0, "solver"),
                                                                            (1, "solver")))
    assert all(len(g) == k for g in groups.values())  # K per level, every candidate a training sample
    best = {}
    for key, group in groups.items():
        (chosen,) = [s for s in group if s.committed]
        assert chosen.reward == max(s.reward for s in group)  # rewards differ: the argmax is unique
        best[key] = chosen.generation.text
    solver = two_policies["solver"]
    for i in (0, 1, 2):
        plan, first = best[(i, 0, "planner")], best[(i, 0, "solver")]
        # The solver's K first calls all read the best plan; its K second calls the best plan and first answer.
        for key, content in (((i, 0, "solver"), f"plan {plan}"), ((i, 1, "solver"), f"plan {plan} first {first}")):
            expected = solver.encode_prompt([{"role": "user", "content": content}])
            assert all(s.generation.prompt_ids == expected for s in groups[key])
        # The recorded episode is the committed path, and each sample names its episode.
        (episode,) = [e for e in episodes if e.instance == i]
        assert [t["text"] for t in episode.transcript] == [plan, first, best[(i, 1, "solver")]]
        assert {s.episode for t, group in groups.items() if t[0] == i for s in group} == {episodes.index(episode)}


def test_tree_ties_are_broken_by_the_seeded_rng(two_policies, per_role):
    k = 3
    samples, _ = play(workflow("constant"), two_policies, per_role, [0, 1, 2, 3], k=k)
    groups: dict = {}
    for s in samples:
        groups.setdefault(s.tree_key, []).append(s)
    chosen = [[s.committed for s in group].index(True) for group in groups.values()]  # in commit order
    rng = random.Random(0)  # the rng `play` hands to run_episodes
    assert chosen == [rng.choice(range(k)) for _ in groups] and len(set(chosen)) > 1


def test_a_nondeterministic_instance_falls_back_to_independent_runs(two_policies, per_role, caplog):
    wf = workflow("clocked")
    samples, episodes = play(wf, two_policies, per_role, [0], k=3)
    metrics = wf.metrics()
    assert metrics["gateway/fallback_instances"] == 1 and metrics["gateway/branch_runs"] == 0
    assert len(episodes) == 3 and len(samples) == 3  # its K level-0 runs as independent ones, one call each
    assert "trained on K independent runs" in caplog.text


def test_recorded_tokens_and_logprobs_are_what_the_update_scores(two_policies, per_role):
    wf = workflow("two_calls", check_determinism=False)
    samples, _ = play(wf, two_policies, per_role, [0], k=2)
    for s in samples:
        policy = two_policies[s.policy]
        g = s.generation
        batch = pack_responses([g.prompt_ids], [g.response_ids], policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp, _ = response_logprobs(policy.model, batch, temperature=g.temperature)
        rescored = logp[0, : len(g.response_ids)]
        assert len(g.response_ids) >= 1
        assert torch.allclose(rescored, torch.tensor(g.logprobs), atol=1e-5)


def test_chat_template_renders_the_requests_messages(two_policies, per_role):
    wf = workflow("two_calls", check_determinism=False)
    samples, _ = play(wf, two_policies, per_role, [7], k=1)
    planner = next(s for s in samples if s.agent == "planner")
    expected = two_policies["planner"].encode_prompt([{"role": "user", "content": "task 7"}])
    assert planner.generation.prompt_ids == expected
    assert two_policies["planner"].tokenizer.decode(expected).startswith("<user>task 7")


def test_crashed_hung_and_silent_runs_are_dropped(two_policies, per_role, caplog):
    wf = workflow("flaky", timeout_s=5, check_determinism=False)
    samples, episodes = play(wf, two_policies, per_role, [0, 1, 2, 3], k=1)
    assert [e.instance for e in episodes] == [3]
    assert {s.instance for s in samples} == {3}
    metrics = wf.metrics()
    assert metrics["gateway/dropped_runs"] == 3
    assert metrics["gateway/dropped/crashed"] == metrics["gateway/dropped/timeout"] == 1
    assert metrics["gateway/dropped/no_reward"] == 1
    assert "the program broke" in caplog.text


@pytest.mark.parametrize("branching", ["replay", "independent"])
def test_non_finite_or_absurd_rewards_drop_the_run(two_policies, per_role, caplog, branching):
    wf = workflow("bad_rewards", branching=branching)
    samples, episodes = play(wf, two_policies, per_role, [0, 1, 2, 3, 4], k=2)
    assert {e.instance for e in episodes} == {4} and {s.instance for s in samples} == {4}
    assert all(math.isfinite(s.reward) for s in samples)
    metrics = wf.metrics()
    assert metrics["gateway/dropped/invalid_reward"] == 4 * 2 and metrics["gateway/dropped_runs"] == 4 * 2
    assert "invalid_reward" in caplog.text and "nan" in caplog.text and "1e+308" in caplog.text


def test_a_program_reading_random_numbers_is_reported_nondeterministic(two_policies, per_role, caplog):
    wf = workflow("clocked", branching="independent")
    samples, _ = play(wf, two_policies, per_role, [0, 1], k=2)
    assert len(samples) == 4  # trained at trajectory level all the same
    assert wf.metrics()["gateway/nondeterministic_runs"] == 2
    assert "not deterministic given its responses" in caplog.text


def test_evaluation_plays_one_run_per_instance(two_policies, per_role):
    wf = workflow("two_calls")
    _, episodes = play(wf, two_policies, per_role, [0, 1, 2], k=1, split="heldout")
    assert [e.instance for e in episodes] == [0, 1, 2]
    assert [e.turns for e in episodes] == [len(e.transcript) for e in episodes]  # a program's turn is a call
    assert all(len(e.transcript) >= 2 for e in episodes)
    assert "gateway/replayed_runs" not in wf.metrics()  # the determinism check is for training steps


def test_calls_past_the_limit_and_after_the_episode_are_refused(two_policies, per_role):
    wf = workflow("two_calls", check_determinism=False)
    wf.max_turns = 1  # the solver's second call is one too many: the run crashes and is dropped
    _, episodes = play(wf, two_policies, per_role, [0], k=1)
    assert episodes == [] and wf.metrics()["gateway/dropped/crashed"] == 1


def test_lora_per_role_samples_each_agent_with_its_own_adapter(per_role):
    from teamrl.config.sections import LoraConfig
    from teamrl.policies.loading import Policy
    from teamrl.policies.lora import attach_adapters

    from gateway_template import CHAT_TEMPLATE
    from toy import tiny_policy

    base = tiny_policy(seed=4, chat_template=CHAT_TEMPLATE)
    network = attach_adapters(base.network, {"planner": LoraConfig(r=4, alpha=8), "solver": LoraConfig(r=4, alpha=8)})
    torch.manual_seed(9)
    with torch.no_grad():  # fresh adapters are the base (B = 0): make the two differ
        for name, param in network.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    policies = {role: Policy(role, network, base.tokenizer, True, adapter=role) for role in ("planner", "solver")}
    samples, _ = play(workflow("two_calls", branching="independent", check_determinism=False),
                      policies, per_role, [0], k=2)
    for s in samples:
        g = s.generation
        batch = pack_responses([g.prompt_ids], [g.response_ids], base.tokenizer.pad_token_id)
        scores = {}
        for role, policy in policies.items():
            with torch.no_grad():
                scores[role] = response_logprobs(policy.model, batch, temperature=g.temperature)[0][0, :len(g.logprobs)]
        assert torch.allclose(scores[s.policy], torch.tensor(g.logprobs), atol=1e-5)
        other = "solver" if s.policy == "planner" else "planner"
        assert not torch.allclose(scores[other], torch.tensor(g.logprobs), atol=1e-3)  # the other adapter differs


def command_program_source() -> str:
    return (
        "import json, os, sys\n"
        "from openai import OpenAI\n"
        "instance = json.load(sys.stdin)\n"
        "client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from teamrl\n"
        "text = client.chat.completions.create(model='planner', messages=[{'role': 'user', 'content': "
        "'go %d' % instance['index']}]).choices[0].message.content\n"
        "print('noise')\n"
        "print(json.dumps({'team': len(text), 'agents': {'planner': 1}}))\n")


def test_a_command_line_program_plays_through_the_gateway(two_policies, per_role, tmp_path):
    script = tmp_path / "team.py"
    script.write_text(command_program_source())
    import sys as _sys

    wf = ProgramWorkflow(ProgramSettings(command=f"{_sys.executable} {script}", agents=["planner", "solver"],
                                         branching="independent", check_determinism=False), max_turns=2)
    samples, episodes = play(wf, two_policies, per_role, [3], k=2)
    assert len(episodes) == 2 and [s.agent for s in samples] == ["planner", "planner"]
    assert all(e.team_return == len(s.generation.text) for e, s in zip(episodes, samples))
    expected = two_policies["planner"].encode_prompt([{"role": "user", "content": "go 3"}])
    assert all(s.generation.prompt_ids == expected for s in samples)


def test_program_results_are_read_or_refused():
    import doctest

    from teamrl.gateway import grouping

    assert doctest.testmod(grouping).failed == 0
    assert grouping.parse_result((1, {"a": 2})).agents == {"a": 2.0}
    assert grouping.parse_result({"team": 0, "success": True}).success is True
    for bad in (None, True, "1", {"agents": {}}, [1]):
        with pytest.raises(ValueError):
            grouping.parse_result(bad)
    assert grouping.parse_result(-grouping.MAX_ABS_REWARD).team == -grouping.MAX_ABS_REWARD
    for bad in (float("nan"), float("inf"), 1e308, 10 ** 400, {"team": 0, "agents": {"a": float("nan")}},
                grouping.EpisodeResult(float("nan"))):
        with pytest.raises(grouping.InvalidReward):
            grouping.parse_result(bad)


@pytest.mark.parametrize("settings, message", [
    ({}, "task.entry"), ({"entry": "a:b", "command": "x"}, "exactly one"),
    ({"entry": "a:b", "agents": []}, "task.agents"), ({"entry": "a:b", "roles": {"x": "y"}}, "task.roles"),
    ({"entry": "a:b", "branching": "tree"}, "task.branching"),
    ({"entry": "a:b", "tool_parser": "mistral_v9"}, "task.tool_parser"),
])
def test_bad_program_settings_say_which_key(settings, message):
    with pytest.raises(ValueError, match=message):
        ProgramSettings(**{"agents": ["planner"], **settings})


SHARED_CLIENT = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="unused", max_retries=0)


def three_calls(instance, endpoint, new_client_per_call: bool = False):
    """planner, solver, solver: one client re-pointed per episode, or (as LangGraph nodes often do) a new
    `OpenAI(...)` per call, each after a random pause up to 0.15 s, several 20 ms batching windows."""
    pause = random.Random()  # unseeded: the arrival times differ from run to run
    shared = SHARED_CLIENT.with_options(base_url=endpoint.base_url, api_key=endpoint.api_key)
    text = ""
    for agent in ("planner", "solver", "solver"):
        client = shared
        if new_client_per_call:
            time.sleep(pause.uniform(0, 0.15))
            client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
        text = client.chat.completions.create(model=agent, messages=[
            {"role": "user", "content": f"task {instance['index']} {text}"}]).choices[0].message.content
    return float(len(text))


def three_calls_new_clients(instance, endpoint):
    return three_calls(instance, endpoint, new_client_per_call=True)


def test_batches_do_not_depend_on_how_the_program_makes_its_client(two_policies, per_role):
    """A step's requests are sampled once every running run asked, in a fixed row order: a client per call
    arriving at random times gives the engine calls (count, sizes) and the samples of a shared client."""
    played = {}
    for entry in ("three_calls", "three_calls_new_clients"):
        wf = workflow(entry, branching="independent", check_determinism=False)
        try:
            samples, episodes = run_episodes(wf, [0, 1, 2, 3], "train", two_policies, per_role, PARAMS, 4,
                                             RewardWeights(), torch.Generator().manual_seed(0), random.Random(0))
            played[entry] = (list(wf.gateway.worker.batch_sizes), samples, episodes)
        finally:
            wf.close()
    (sizes, samples, episodes), (other_sizes, other_samples, other_episodes) = played.values()
    assert sizes == other_sizes == [16, 16, 16]  # one engine call per turn of the 16 runs
    assert [(s.tree_key, s.generation.response_ids, s.generation.logprobs, s.reward) for s in samples] == [
        (s.tree_key, s.generation.response_ids, s.generation.logprobs, s.reward) for s in other_samples]
    assert [e.team_return for e in episodes] == [e.team_return for e in other_episodes]
