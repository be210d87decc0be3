from pathlib import Path

import pytest

from teamrl.config import ConfigError, RunConfig, load_config

CONFIG_DIR = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert isinstance(config, RunConfig)
    assert "teamrl" in path.read_text().split("\n", 3)[1] or "Run:" in path.read_text()


def test_overrides_are_typed_and_nested(tmp_path):
    config = load_config(None, ["algorithm.k=4", "task.size=5", "policy.lr=1e-3", "regime=per_role"])
    assert config.algorithm.k == 4 and config.task_settings().size == 5 and config.regime == "per_role"
    assert config.policy.lr == pytest.approx(1e-3)


@pytest.mark.parametrize("overrides, message", [
    (["algorithm.kk=4"], "unknown key.*algorithm.kk.*valid keys"),
    (["algorithm.k=1"], "algorithm.k = 1 is invalid"),
    (["regime=everyone"], "regime = 'everyone' is invalid: expected shared or per_role"),
    (["task.size=2"], "size must be between 3 and 20"),
    (["task.name=chess"], "unknown task 'chess'.*plan_path"),
    (["task.sizee=5"], "unknown key.*task.sizee"),
    (["train.steps=ten"], "train.steps = 'ten' must be of type int"),
    (["rollout.temperature=0"], "use eval_temperature"),
    (["algorithm.aggregation=sum"], "token-mean"),
    (["oops"], "must look like key.sub=value"),
    (["policy.warmup_sft_steps=0"], "policy.warmup_sft_steps = 0 is invalid: expected an integer >= 1"),
])
def test_bad_values_fail_with_a_clear_message(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("train: 5\n")
    with pytest.raises(ConfigError, match="train must be a mapping"):
        load_config(wrong)


def test_the_warmup_length_reaches_the_warmup_recipe(monkeypatch):
    from teamrl.setup import team

    seen = []
    monkeypatch.setattr(team, "warm_up", lambda recipe: seen.append(recipe) or "/warmed")
    config = load_config(None, ["task.name=sokoban", "policy.warmup_sft_steps=123"])
    assert team.resolve_model_path(config) == "/warmed"
    assert seen[0].steps == 123 and dict(seen[0].task)["name"] == "sokoban"


def test_agentwise_norm_with_team_trajectory_credit_is_refused_with_the_fix():
    from teamrl.config import AlgorithmConfig
    with pytest.raises(ConfigError, match="trajectory_credit=per_agent"):
        AlgorithmConfig(agentwise_norm=True, grouping="trajectory")
    AlgorithmConfig(agentwise_norm=True, grouping="trajectory", trajectory_credit="per_agent")
    with pytest.raises(ConfigError, match=r"^algorithm.agentwise_norm = true does nothing"):
        load_config(None, ["algorithm.agentwise_norm=true", "algorithm.grouping=trajectory"])


@pytest.mark.parametrize("key", ["log_ratio_clamp", "kl_clamp"])
def test_clamps_must_be_positive(key):
    with pytest.raises(ConfigError, match=f"^algorithm.{key} = 0.0 is invalid"):
        load_config(None, [f"algorithm.{key}=0"])
