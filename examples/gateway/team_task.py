"""The task the example teams play: add two numbers. Shared by the openai-client and LangGraph teams."""

from __future__ import annotations

import random
import re


def instances(split: str, index: int) -> dict[str, int]:
    """Task instance `index` of `split`: two numbers to add (teamrl's `task.instances`)."""
    rng = random.Random(f"{split}-{index}")
    return {"a": rng.randint(1, 9), "b": rng.randint(1, 9)}


def question(instance: dict[str, int]) -> str:
    return f"What is {instance['a']} + {instance['b']}?"


def score(instance: dict[str, int], plan: str, answer: str) -> dict:
    """Team reward 1 when the solver's last number is the sum; each agent a small shaping reward of its own
    (a number where one belongs, less for every character: short plans and answers)."""
    numbers = re.findall(r"-?\d+", answer)
    correct = bool(numbers) and int(numbers[-1]) == instance["a"] + instance["b"]
    return {"team": float(correct), "success": correct,
            "agents": {"planner": 0.1 * bool(re.search(r"\d", plan)) - 0.002 * len(plan),
                       "solver": 0.1 * bool(numbers) - 0.002 * len(answer)}}


def scripted(agent: str, messages: list[dict[str, str]]) -> str:
    """Scripted teammates (teamrl's `task.script`): their episodes warm the tiny default model up."""
    a, b = map(int, re.findall(r"What is (\d+) \+ (\d+)\?", messages[-1]["content"])[0])
    return f"Add {a} and {b}." if agent == "planner" else str(a + b)
