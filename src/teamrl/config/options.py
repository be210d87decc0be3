"""The settings that take one of a fixed set of words, each typed once as a `Literal`.

A section field annotated with one of these is checked by its section's `__post_init__` with
`check_choice` (a test checks that every such field refuses a word outside its set). `choices` gives
the words to code that needs them as a tuple (the registry of valid regimes, a CLI's choices).
"""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

from teamrl.config.checks import require

Regime = Literal["shared", "per_role", "per_agent"]
DType = Literal["float32", "bfloat16", "float16"]
CpuLinear = Literal["auto", "onednn", "torch", "measured"]
SamplerDType = Literal["float32", "bfloat16", "auto"]
ChatTemplate = Literal["auto", "on", "off"]
PromptStyle = Literal["compact", "chat"]
RolloutEngine = Literal["builtin", "vllm"]
Objective = Literal["grpo", "rft"]
Grouping = Literal["tree", "trajectory"]
Commit = Literal["greedy", "sample"]
Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]
TrajectoryCredit = Literal["team", "per_agent", "own"]
Autocast = Literal["off", "bf16"]
# none, then the corrections registered in teamrl.algorithms.rollout_correction (a test checks they agree)
RolloutCorrection = Literal["none", "tis", "mis", "seq_tis", "seq_mis"]
Schedule = Literal["constant", "cosine"]
AdamWImpl = Literal["fused", "foreach", "for-loop"]
DiagnosticsLevel = Literal["none", "cheap", "full"]
TrainerBackend = Literal["local", "ray"]
Shard = Literal["none", "fsdp"]
ShardParamDType = Literal["float32", "bfloat16"]
RolloutSchedule = Literal["serial", "pipelined"]
Threads = int | Literal["auto"]


def choices(option: Any) -> tuple[str, ...]:
    """The words a `Literal` option takes, in declaration order; () for any other type."""
    return tuple(get_args(option)) if get_origin(option) is Literal else ()


def spoken(words: tuple[str, ...]) -> str:
    """'a, b or c': the words as a message lists them.

    >>> spoken(("tree", "trajectory")), spoken(("auto", "on", "off"))
    ('tree or trajectory', 'auto, on or off')
    """
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def check_choice(value: Any, key: str, option: Any, expected: str = "") -> None:
    """ConfigError `key = value is invalid: expected a, b or c` unless `value` is one of `option`'s words
    (`expected`, when given, words the list itself)."""
    words = choices(option)
    require(value in words, key, value, expected or spoken(words))
