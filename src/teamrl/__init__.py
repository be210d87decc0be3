"""teamrl: train teams of LLM agents together with on-policy multi-agent RL.

The Python API (`teamrl.api`): `load_config`, `train`, `evaluate`, `Team`, `TrainResult`,
`EvalResult`, `RunConfig`, `ConfigError`. They load on first use, so `import teamrl` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "EvalResult",
    "RunConfig",
    "Team",
    "TrainResult",
    "__version__",
    "evaluate",
    "load_config",
    "train",
]

if TYPE_CHECKING:
    from teamrl.api import EvalResult, Team, TrainResult, evaluate, load_config, train
    from teamrl.config import ConfigError, RunConfig


def __getattr__(name: str) -> Any:
    """The API's names, imported when first used (PEP 562)."""
    if name in ("ConfigError", "RunConfig"):
        from teamrl import config

        return getattr(config, name)
    if name in __all__:
        from teamrl import api

        return getattr(api, name)
    raise AttributeError(f"module 'teamrl' has no attribute {name!r}")
