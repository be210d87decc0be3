"""`rollout.by_role`: per-role / per-agent sampling settings, resolved into each agent's SamplingParams."""

import pytest

from teamrl.config import ConfigError, RolloutConfig, load_config
from teamrl.config.sections import overridable_rollout_fields
from teamrl.rollout.agent_params import agent_sampling, sampling_params
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.workflows.base import Agent

# Three voters of one role and a judge: agents may be named one by one or through their role.
AGENTS = [Agent("voter_0", "voter"), Agent("voter_1", "voter"), Agent("voter_2", "voter"), Agent("judge", "judge")]


def _rollout(*overrides: str) -> RolloutConfig:
    return load_config(None, list(overrides)).rollout


def test_without_overrides_every_agent_samples_as_before():
    """The settings the loop and evaluation built from the global fields before by_role existed."""
    rollout = RolloutConfig()
    train = agent_sampling(rollout, AGENTS, "train")
    evaluation = agent_sampling(rollout, AGENTS, "eval")
    assert set(train.values()) == {SamplingParams(1.0, 1.0, 0, 40)}
    assert set(evaluation.values()) == {SamplingParams(temperature=0.0, max_new_tokens=40)}


def test_an_agents_entry_wins_over_its_roles_field_by_field():
    rollout = _rollout("rollout.max_new_tokens=20",
                       'rollout.by_role={voter: {max_new_tokens: 3, temperature: 0.7, stop: ["\\n"]}, '
                       'voter_1: {temperature: 1.3, eval_temperature: 0.5}, judge: {top_k: 5, eval_top_p: 0.9}}')
    train = agent_sampling(rollout, AGENTS, "train")
    assert train["voter_0"] == SamplingParams(0.7, 1.0, 0, 3, ("\n",))
    assert train["voter_2"] == train["voter_0"]
    assert train["voter_1"] == SamplingParams(1.3, 1.0, 0, 3, ("\n",))  # its own temperature, the role's cap
    assert train["judge"] == SamplingParams(1.0, 1.0, 5, 20)
    evaluation = agent_sampling(rollout, AGENTS, "eval")
    assert evaluation["voter_1"] == SamplingParams(0.5, 1.0, 0, 3, ("\n",))
    assert evaluation["voter_0"] == SamplingParams(0.0, 1.0, 0, 3, ("\n",))
    assert evaluation["judge"] == SamplingParams(0.0, 0.9, 0, 20)


def test_a_yaml_file_with_by_role_loads(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("rollout:\n  temperature: 1.0\n  max_new_tokens: 40\n  by_role:\n"
                    "    tool: {max_new_tokens: 64, stop: [\"\\n\\n\"]}\n"
                    "    plan: {temperature: 0.7, eval_temperature: 0.0}\n")
    rollout = load_config(path).rollout
    tool = rollout.for_agent("tool", "tool")
    assert (tool.max_new_tokens, tool.stop, tool.temperature) == (64, ["\n\n"], 1.0)
    assert rollout.for_agent("plan", "plan").temperature == 0.7


def test_the_override_keys_are_the_rollout_fields():
    assert overridable_rollout_fields() == ["temperature", "top_p", "top_k", "max_new_tokens", "stop",
                                            "eval_temperature", "eval_top_p", "eval_top_k"]


@pytest.mark.parametrize("overrides, message", [
    (["rollout.by_role={voter: {temprature: 0.5}}"],
     r"rollout.by_role.voter: unknown key\(s\) temprature; .* may set: temperature, top_p, top_k, max_new_tokens, stop"),
    (["rollout.by_role={voter: {by_role: {}}}"], r"rollout.by_role.voter: unknown key\(s\) by_role"),
    (["rollout.by_role={voter: {temperature: 0}}"], "rollout.by_role.voter.temperature = 0.0 is invalid.*eval_temperature"),
    (["rollout.by_role={voter: {max_new_tokens: many}}"], "rollout.by_role.voter.max_new_tokens = 'many' must be of type int"),
    (["rollout.by_role={voter: {top_p: 1.5}}"], "rollout.by_role.voter.top_p = 1.5 is invalid"),
    (["rollout.by_role={voter: 3}"], "rollout.by_role.voter must be a mapping"),
    (["rollout.by_role={voter: {stop: [\"\"]}}"], "rollout.by_role.voter.stop = .* non-empty strings"),
    (["rollout.stop=STOP"], "rollout.stop = 'STOP' must be of type list"),
    (["rollout.eval_top_k=-1"], "rollout.eval_top_k = -1 is invalid"),
])
def test_bad_entries_fail_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_unknown_names_fail_with_the_roles_and_agents_listed():
    rollout = _rollout("rollout.by_role={voters: {max_new_tokens: 3}}")
    with pytest.raises(ConfigError, match="'voters' is neither a role nor an agent of this workflow; roles: voter, "
                                          "judge; agents: voter_0, voter_1, voter_2, judge"):
        agent_sampling(rollout, AGENTS)


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="train, eval"):
        sampling_params(RolloutConfig(), "test")


def test_training_stops_on_an_unknown_name_before_loading_any_model(tmp_path, monkeypatch):
    from teamrl.training import loop

    def no_models(*args, **kwargs):
        raise AssertionError("policies were built before the by_role names were checked")

    monkeypatch.setattr(loop, "build_policies", no_models)
    config = load_config(None, [f"output_dir={tmp_path}", "rollout.by_role={planner: {top_k: 4}}"])
    with pytest.raises(ConfigError, match="'planner' is neither a role nor an agent.*roles: tool, plan"):
        loop.train(config, progress=False)
