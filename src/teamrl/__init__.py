"""teamrl: train teams of LLM agents together with on-policy multi-agent RL."""

__version__ = "0.1.0"
