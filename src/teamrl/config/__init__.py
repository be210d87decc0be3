"""Typed run configuration: YAML file + dotted overrides -> validated dataclasses.

Every field carries its help text once, beside it (`sections.py`, `training_sections.py`, `run.py`); a
setting that takes one of a few words is typed with a `Literal` of `options.py`. Each section checks its
own fields in its `__post_init__`, `cross_checks.py` those across sections. Unknown keys and bad values
fail at load time with a message that says which key and how to fix it (`building.py`).
"""

from teamrl.config.checks import ConfigError
from teamrl.config.run import REGIMES, RunConfig, config_to_dict, load_config
from teamrl.config.sections import (
    AlgorithmConfig,
    DiagnosticsConfig,
    LoraConfig,
    PolicyConfig,
    RolloutConfig,
    TrainConfig,
    TrainerConfig,
    WorkflowConfig,
)

__all__ = [
    "REGIMES",
    "AlgorithmConfig",
    "ConfigError",
    "DiagnosticsConfig",
    "LoraConfig",
    "PolicyConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainConfig",
    "TrainerConfig",
    "WorkflowConfig",
    "config_to_dict",
    "load_config",
]
