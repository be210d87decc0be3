"""Each policy regime trains, and each update changes exactly the parameters it should."""

import pytest

from team_kit import CountTeam, owned, save_tiny_model, team_config, train_steps
from teamrl.workflows.base import Agent

WRITER_CRITIC = [Agent("a", "writer"), Agent("b", "critic")]
VOTERS = [Agent("voter_0", "voter"), Agent("voter_1", "voter"), Agent("voter_2", "voter"), Agent("judge", "judge")]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("base") / "llama")


def _base_names(policy):
    return {n for n, _ in policy.network.named_parameters() if ".lora_" not in n}


def test_shared_regime_trains_one_model_from_every_agent(base):
    team = CountTeam(WRITER_CRITIC, rewarded={"a", "b"})
    policies, mapping, [step] = train_steps(team_config("regime=shared", f"policy.model={base}"), team)
    assert mapping == {"a": "shared", "b": "shared"} and list(policies) == ["shared"]
    assert {s.agent for s in step.trained["shared"]} == {"a", "b"}
    shared = policies["shared"]
    assert step.changes["shared"] and step.changes["shared"] <= owned(shared)
    # a full policy: its embeddings and attention weights move, not only an adapter
    names = {name for _, name in step.changes["shared"]}
    assert any("self_attn" in n for n in names) and any("mlp" in n for n in names)


def test_per_role_full_copies_change_only_the_role_with_signal(base):
    team = CountTeam(WRITER_CRITIC, rewarded={"a"})
    policies, mapping, [step] = train_steps(team_config("regime=per_role", f"policy.model={base}"), team)
    assert mapping == {"a": "writer", "b": "critic"}
    writer, critic = policies["writer"], policies["critic"]
    assert writer.network is not critic.network and writer.adapter is None
    assert step.trained["writer"] and not step.trained["critic"]  # the critic's reward is constant
    assert step.changes["writer"] and step.changes["writer"] <= owned(writer)
    assert step.changes["critic"] == set()


def test_per_role_lora_changes_only_the_adapter_of_the_role_with_signal(base):
    team = CountTeam(WRITER_CRITIC, rewarded={"a"})
    config = team_config("regime=per_role", f"policy.model={base}", "policy.lora={r: 4, alpha: 8}")
    policies, mapping, steps = train_steps(config, team, steps=2)
    writer, critic = policies["writer"], policies["critic"]
    assert writer.network is critic.network  # one base in memory, two adapters
    assert (writer.adapter, critic.adapter) == ("writer", "critic")
    for step in steps:
        assert step.trained["writer"] and not step.trained["critic"]
        assert step.changes["writer"] == owned(writer)  # every tensor of its adapter, nothing else
        assert step.changes["critic"] == set()
    frozen = _base_names(writer)
    assert frozen and not any(name in frozen for _, name in steps[0].changes["writer"])


def test_per_agent_lora_gives_duplicated_agents_their_own_adapters(base):
    team = CountTeam(VOTERS, rewarded={a.name for a in VOTERS})
    config = team_config("regime=per_agent", f"policy.model={base}", "policy.lora={r: 2}")
    policies, mapping, [step] = train_steps(config, team, k=4, instances=3)
    assert mapping == {a.name: a.name for a in VOTERS}
    assert len({id(p.network) for p in policies.values()}) == 1
    for agent in VOTERS:
        policy = policies[agent.name]
        assert {s.agent for s in step.trained[agent.name]} == {agent.name}
        assert step.changes[agent.name] == owned(policy), agent.name
    # no two agents share an adapter tensor
    all_owned = [owned(policies[a.name]) for a in VOTERS]
    assert sum(map(len, all_owned)) == len(set().union(*all_owned))


def test_roles_mapping_mixes_per_agent_entries_and_full_models(base):
    """voter_0 alone on a full copy; voter_1/2 share one adapter; the judge has another adapter."""
    team = CountTeam(VOTERS, rewarded={"voter_0", "voter_1", "voter_2"})
    config = team_config(f"policy.model={base}",
                         "policies={lone: {lr: 0.001}, voters: {lora: {r: 4}}, judge: {lora: {r: 2}}}",
                         "roles={voter: voters, voter_0: lone, judge: judge}")
    policies, mapping, [step] = train_steps(config, team, instances=3)
    assert mapping == {"voter_0": "lone", "voter_1": "voters", "voter_2": "voters", "judge": "judge"}
    assert policies["lone"].adapter is None and policies["voters"].network is policies["judge"].network
    assert {s.agent for s in step.trained["voters"]} == {"voter_1", "voter_2"}
    assert step.changes["voters"] == owned(policies["voters"])
    assert step.changes["lone"] and step.changes["lone"] <= owned(policies["lone"])
    assert step.changes["judge"] == set() and not step.trained["judge"]
    assert policies["lone"].network.config.vocab_size == policies["voters"].network.config.vocab_size


def test_wrapping_a_model_in_lora_adapters_raises_no_deprecation_warning():
    """transformers deprecates the attribute PEFT reads when wrapping (`is_gradient_checkpointing`): no
    FutureWarning reaches the user's terminal for it."""
    import warnings

    from teamrl.config import LoraConfig
    from teamrl.policies.lora import attach_adapters
    from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model

    model = build_tiny_model(build_char_tokenizer(), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        attach_adapters(model, {"a": LoraConfig(r=2, target_modules=["q_proj", "v_proj"])})
