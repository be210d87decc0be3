"""Word options (`teamrl.config.options`): every `Literal`-typed field of every section refuses a word
outside its set at load time, naming the key and the words; each section validates itself."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from teamrl.algorithms.losses import AGGREGATIONS
from teamrl.config import (
    AlgorithmConfig,
    ConfigError,
    DiagnosticsConfig,
    RunConfig,
    WorkflowConfig,
    load_config,
)
from teamrl.config.options import Aggregation, choices, spoken
from teamrl.config.reference import section_table


def _word_options(cls: type = RunConfig, prefix: str = "") -> list[tuple[str, tuple[str, ...], object]]:
    """(dotted key, its words, its default) of every word option, nested sections included."""
    found = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            found += _word_options(type(default), f"{prefix}{f.name}.")
        elif choices(hints[f.name]):
            found.append((prefix + f.name, choices(hints[f.name]), default))
    return found


OPTIONS = _word_options()


def test_the_word_options_are_the_expected_ones():
    assert {key for key, _, _ in OPTIONS} == {
        "regime", "workflow.prompt_style", "policy.dtype", "policy.cpu_linear", "policy.chat_template",
        "rollout.engine", "rollout.sampler_dtype", "algorithm.objective", "algorithm.grouping", "algorithm.commit", "algorithm.aggregation",
        "algorithm.trajectory_credit", "algorithm.autocast", "algorithm.rollout_correction", "train.schedule", "train.adamw", "diagnostics.level",
        "trainer.backend", "trainer.shard", "trainer.shard_param_dtype", "trainer.rollout_schedule"}


@pytest.mark.parametrize(("key", "words", "default"), OPTIONS, ids=[key for key, _, _ in OPTIONS])
def test_every_word_option_refuses_another_word_and_lists_its_words(key, words, default):
    assert default in words
    with pytest.raises(ConfigError) as refused:
        load_config(None, [f"{key}=nonsense"])
    message = str(refused.value)
    assert message.startswith(f"{key} = 'nonsense' is invalid: expected ")
    assert all(word in message for word in words)
    with pytest.raises(ConfigError, match=f"^{key} = 3 must be of type str$"):
        load_config(None, [f"{key}=3"])


def test_a_section_checks_its_own_fields_when_built_directly():
    with pytest.raises(ConfigError, match="^grouping = 'tribe' is invalid: expected tree or trajectory$"):
        AlgorithmConfig(grouping="tribe")
    with pytest.raises(ConfigError, match="^k = 1 is invalid"):
        AlgorithmConfig(k=1)
    with pytest.raises(ConfigError, match="^level = 'all' is invalid: expected none, cheap or full$"):
        DiagnosticsConfig(level="all")
    with pytest.raises(ConfigError, match="^prompt_style = 'long' is invalid: expected compact or chat$"):
        WorkflowConfig(prompt_style="long")


def test_aggregation_words_are_the_registered_losses():
    assert set(choices(Aggregation)) == set(AGGREGATIONS.names())


def test_the_reference_lists_an_option_s_words_as_its_type():
    assert "| `algorithm.grouping` | `tree` or `trajectory` | `tree` |" in section_table(AlgorithmConfig, "algorithm.")
    assert spoken(("a",)) == "a" and spoken(("a", "b", "c")) == "a, b or c"
