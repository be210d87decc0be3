"""Agent -> policy mapping: presets, `roles:`, and the errors of bad `policies:`/`roles:` settings."""

import pytest

from team_kit import CountTeam, save_tiny_model, team_config
from teamrl.config import ConfigError, load_config
from teamrl.policies.mapping import agent_policy_mapping
from teamrl.setup.team import build_policies
from teamrl.workflows.base import Agent

TEAM = [Agent("voter_0", "voter"), Agent("voter_1", "voter"), Agent("judge", "judge")]


@pytest.mark.parametrize("regime, expected", [
    ("shared", {"voter_0": "shared", "voter_1": "shared", "judge": "shared"}),
    ("per_role", {"voter_0": "voter", "voter_1": "voter", "judge": "judge"}),
    ("per_agent", {"voter_0": "voter_0", "voter_1": "voter_1", "judge": "judge"}),
])
def test_presets(regime, expected):
    assert agent_policy_mapping(regime, {}, [], TEAM) == expected


def test_presets_accept_policies_named_as_they_name_them():
    assert agent_policy_mapping("per_role", {}, ["voter"], TEAM)["voter_1"] == "voter"


def test_an_agent_entry_wins_over_its_role():
    mapping = agent_policy_mapping("shared", {"voter": "v", "voter_1": "solo", "judge": "v"}, [], TEAM)
    assert mapping == {"voter_0": "v", "voter_1": "solo", "judge": "v"}


@pytest.mark.parametrize("regime, roles, defined, message", [
    ("per_role", {}, ["coder"], r"policies coder serve no agent: regime 'per_role' creates the policies voter, judge"),
    ("shared", {"voter": "a", "critic": "a"}, [], r"'critic' is neither a role nor an agent.*roles: voter, judge"),
    ("shared", {"voter": "a"}, [], r"agent 'judge' \(role 'judge'\) has no policy: add `roles.judge"),
    ("shared", {"voter": "a", "judge": "a"}, ["a", "b"], r"policies b serve no agent"),
    ("shared", {"voter": "a", "voter_0": "b", "voter_1": "b", "judge": "a"}, [],
     r"roles.voter is never used: every agent of that role has its own entry"),
])
def test_mapping_errors_say_what_to_fix(regime, roles, defined, message):
    with pytest.raises(ConfigError, match=message):
        agent_policy_mapping(regime, roles, defined, TEAM)


@pytest.mark.parametrize("overrides, message", [
    (["regime=per_team"], "regime = 'per_team' is invalid: expected shared or per_role or per_agent"),
    (["policies={coder: {lr: 0}}"], r"policies.coder.lr = 0.0 is invalid: expected > 0"),
    (["policies={coder: {lora: {r: 0}}}"], r"policies.coder.lora.r = 0 is invalid"),
    (["policies={coder: {lora: {target_modules: []}}}"], r"policies.coder.lora.target_modules = \[\] is invalid"),
    (["policies={coder: {temperature: 1}}"], r"unknown key\(s\) policies.coder.temperature"),
    (["policies={coder: {lr: 0.1}}", "roles={coder: codr}"], r"roles.coder = 'codr' is not defined under `policies`"),
    (["policies={my-policy: {}}"], r"policy name 'my-policy' must be an identifier"),
    (["roles={coder: 3}"], r"roles.coder = 3 must be a policy name"),
])
def test_config_errors_at_load_time(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_named_policies_inherit_and_override_policy_defaults():
    config = load_config(None, ["policy.lr=0.001", "policy.lora={r: 8, alpha: 32}",
                                "policies={a: {lora: {r: 4}}, b: {lora: null, lr: 0.01}}"])
    a, b, other = config.policy_config("a"), config.policy_config("b"), config.policy_config("c")
    assert (a.lr, a.lora.r, a.lora.alpha) == (0.001, 4, 32.0)
    assert (b.lr, b.lora) == (0.01, None)
    assert other == config.policy


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("base") / "llama")


@pytest.mark.parametrize("extra, message", [
    (["policies={voter: {lora: {r: 4}}, judge: {lora: {r: 2}, dtype: bfloat16}}", "roles={voter: voter, judge: judge}"],
     r"voter and judge are LoRA adapters on one base .* share its dtype, but set 'float32' and 'bfloat16'"),
    (["policy.lora={target_modules: [q_proj, c_attn]}"],
     r"policies.shared.lora.target_modules: c_attn not found in .*linear layers are named .*q_proj"),
    (["regime=per_role", "policies={coder: {lr: 0.1}}"], r"policies coder serve no agent"),
])
def test_build_time_errors(base, extra, message):
    with pytest.raises(ConfigError, match=message):
        build_policies(team_config(f"policy.model={base}", *extra), CountTeam(TEAM, set()))
