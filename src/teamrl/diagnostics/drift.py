"""Each metric against its own start-of-training baseline (the mean of its first few values)."""

from __future__ import annotations

from collections import deque

# Behaviour metrics whose drift from step 0 is logged: a role's length and format adherence.
DRIFTING = ("response_len", "format_ok")


class Baselines:
    """Remembers the mean of the first `steps` values of every metric it is shown."""

    def __init__(self, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"baseline needs at least one step, got {steps}")
        self.steps = steps
        self._seen: dict[str, list[float]] = {}

    def observe(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if value is None:
                continue
            seen = self._seen.setdefault(key, [])
            if len(seen) < self.steps:
                seen.append(float(value))

    def state_dict(self) -> dict[str, dict[str, list[float]]]:
        """The values seen so far (a resumed run continues from them)."""
        return {"seen": {key: list(values) for key, values in self._seen.items()}}

    def load_state_dict(self, state: dict[str, dict[str, list[float]]]) -> None:
        self._seen = {key: list(values) for key, values in state["seen"].items()}

    def get(self, key: str) -> float | None:
        """The baseline of `key`, or None until `steps` values of it were seen."""
        seen = self._seen.get(key, [])
        return sum(seen) / len(seen) if len(seen) == self.steps else None

    def drift(self, metrics: dict[str, float]) -> dict[str, float]:
        """`<key>_drift` = value - baseline for each role/agent length and format metric present."""
        out = {}
        for key, value in metrics.items():
            if key.startswith("diag/") and key.rsplit("/", 1)[-1] in DRIFTING:
                base = self.get(key)
                if base is not None and value is not None:
                    out[key + "_drift"] = value - base
        return out


class Windows:
    """Trailing mean of the last `size` values of each metric."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[str, deque[float]] = {}

    def observe(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if value is not None:
                self._values.setdefault(key, deque(maxlen=self.size)).append(float(value))

    def state_dict(self) -> dict[str, dict[str, list[float]]]:
        """The trailing values (a resumed run continues from them)."""
        return {"values": {key: list(values) for key, values in self._values.items()}}

    def load_state_dict(self, state: dict[str, dict[str, list[float]]]) -> None:
        self._values = {key: deque(values, maxlen=self.size) for key, values in state["values"].items()}

    def mean(self, key: str) -> float | None:
        """Mean of the last `size` values, or None until that many were seen."""
        values = self._values.get(key)
        return sum(values) / len(values) if values and len(values) == self.size else None

    def peak(self, key: str) -> float | None:
        """Largest of the last `size` values, or None until that many were seen."""
        values = self._values.get(key)
        return max(values) if values and len(values) == self.size else None

    def keys(self) -> list[str]:
        """Every metric seen so far (also those absent from the latest step)."""
        return list(self._values)
