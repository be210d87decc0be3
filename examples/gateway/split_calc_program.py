"""Split-Calc's built-in team written as a plain openai-client program (the gateway's side of
scripts/study/gateway_vs_builtin.py; config: examples/gateway/split_calc_program.yaml).

The built-in team (`teamrl.workflows.split_calc_team`, task `teamrl.tasks.split_calc`): the *analyst*
sees the operation's name and writes a formula in x and y; the *calculator* sees x, y and that
formula and writes the value. This program plays the same episode through an OpenAI-compatible
endpoint, so that the two ways of training can be compared on equal terms:

- prompts: the built-in workflow's own `render` (the compact prompts of the tiny default model), sent
  as one user message, which the policy encodes exactly as the built-in encodes its text prompt;
- instances: `instances(split, index)` is the built-in's `new_state(split, index)` item;
- rewards: the task's own term functions, so each call's trained reward equals the built-in's reward
  for the same response (see `episode_result` for how the per-agent team terms are carried).

Nothing but the prompts and the scoring comes from teamrl; the model calls are ordinary client calls.
"""

from __future__ import annotations

import random
import re
from typing import Any

from openai import OpenAI

from teamrl.demos.split_calc import CalcSkill, write_formula, write_value
from teamrl.tasks.split_calc import SplitCalcConfig, analyst_terms, answer_value, calculator_terms, instance
from teamrl.workflows.split_calc_team import SplitCalcState, SplitCalcWorkflow

TASK = SplitCalcConfig()  # src/teamrl/configs/split_calc_team.yaml sets no task keys: the defaults
PROMPTS = SplitCalcWorkflow(TASK, prompt_style="compact")  # used only for its `render`

_client: OpenAI | None = None


def client_for(endpoint: Any) -> OpenAI:
    """One client per process, re-pointed at each episode's endpoint (building an `OpenAI` client costs
    ~34 ms of CPU, more than the tiny model spends on a whole episode; docs/howto/gateway.md, Cost)."""
    global _client
    if _client is None:
        _client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    return _client.with_options(base_url=endpoint.base_url, api_key=endpoint.api_key)


def instances(split: str, index: int) -> dict[str, Any]:
    """Instance `index` of `split` (teamrl's `task.instances`): the built-in's triple, as JSON-able fields."""
    operation, x, y = instance(TASK, split, index)
    return {"operation": operation, "x": x, "y": y}


def ask(client: OpenAI, agent: str, prompt: str) -> str:
    """The agent's answer to a one-message prompt (length and sampling come from the training config)."""
    reply = client.chat.completions.create(model=agent, messages=[{"role": "user", "content": prompt}])
    return reply.choices[0].message.content or ""


def run_episode(item: dict[str, Any], endpoint: Any) -> dict[str, Any]:
    """One episode: the analyst writes a formula, the calculator its value; returns the rewards."""
    client = client_for(endpoint)
    state = SplitCalcState((item["operation"], item["x"], item["y"]))
    formula = ask(client, "analyst", PROMPTS.render("analyst", state))
    state.formula = " ".join(formula.split())[:24]  # what the calculator reads, as the built-in's apply
    value = ask(client, "calculator", PROMPTS.render("calculator", state))
    return episode_result(state, formula, value)


def episode_result(state: SplitCalcState, formula: str, value: str) -> dict[str, Any]:
    """The run's rewards: each call's trained reward (team + the agent's own, at algorithm.team_weight =
    local_weight = 1, the config's) equals the built-in's reward for the same response.

    The built-in scores each turn on its own terms: the analyst's team term is whether its formula is
    the operation, the calculator's whether the value is right. A program reports one team reward per
    run, so `team` is the episode's outcome (the calculator's team term) and the analyst's own reward
    carries the difference between its team term and that one.
    """
    analyst = analyst_terms(TASK, state.item, formula)
    calculator = calculator_terms(TASK, state.item, state.formula, answer_value(value))
    team = calculator["team"]
    return {"team": team, "success": team == 1.0,
            "agents": {"analyst": analyst["team"] - team + analyst["local"] + analyst["format"],
                       "calculator": calculator["local"] + calculator["format"]}}


_script_rng = random.Random(0)


def scripted(agent: str, messages: list[dict[str, str]]) -> str:
    """Scripted teammates (`task.script`) with the built-in warm-up's broad prior (`teamrl.demos.split_calc`):
    `teamrl train examples/gateway/split_calc_program.yaml` warms the tiny default up on them."""
    prompt = messages[-1]["content"]
    if agent == "analyst":
        return write_formula(prompt.split("op:", 1)[1].split("\n", 1)[0], _script_rng, CalcSkill())[1]
    x, y, formula = re.search(r"x=(\d+) y=(\d+)\nf:(.*)\n=>", prompt).groups()  # type: ignore[union-attr]
    return write_value(None if formula == "?" else formula, int(x), int(y), _script_rng, CalcSkill())[1]
