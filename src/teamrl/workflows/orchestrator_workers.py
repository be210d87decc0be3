"""Orchestrator-workers: an orchestrator proposes strategies, workers solve with one each, a synthesizer answers.

Agents, in order within one turn: `orchestrator` (role orchestrator), worker_0 .. worker_{n-1}
(role `worker`), `synthesizer` (role synthesizer).
- The orchestrator sees the problem and proposes n strategies: numbered items ("1. ...") or one
  per line; compact: n words such as `l r l`.
- worker_i sees the problem and strategy i only (not the other workers).
- The synthesizer sees the problem and every worker's answer and writes the team's final answer
  (it may copy one or compose its own); it is parsed like any answer.
The episode ends after the synthesizer, so `max_turns` beyond 1 is ignored.

Rewards (trained reward = team_weight * team + local_weight * local; b = format_bonus):

    orchestrator:  team  = 0: a plan has no verifiable outcome when it is written; under
                           `algorithm.grouping: trajectory` it shares the episode's advantage
                   local = +b if it proposed n strategies, else -b
    worker:        team  = score of its own answer;  local = +b for an explicit answer, else -b
    synthesizer:   team  = score of the final answer; local = +b for an explicit answer, else -b

Terms: see `flow_common` (format_ok and format for all; score and correct for workers and the
synthesizer; any_correct for the synthesizer). Success (held-out metric): the final answer is correct.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teamrl.workflows.base import Agent, Outcome
from teamrl.workflows.flow_common import (
    FlowWorkflow,
    answer_outcome,
    chat_answers,
    clean,
    compact_answers,
    compact_tag,
    format_terms,
    parse_strategies,
)
from teamrl.workflows.flow_domains import Answer, Domain

CHAT = {
    "orchestrator": (
        "You are the orchestrator of a team of {n} workers. Do not solve the problem. Propose {n} "
        "different strategies to solve it, numbered 1. to {n}., one line each."
    ),
    "worker": "You are a worker. Solve the problem using the strategy you are given.",
    "synthesizer": (
        "You are the synthesizer. {n} workers solved the problem with different strategies. "
        "Check their solutions and give the team's final answer."
    ),
}


@dataclass
class OrchestratorState:
    """One episode: the strategies, the workers' answers and the final answer."""

    problem: Any
    strategies: list[str] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    final: Answer | None = None
    final_score: float = 0.0
    done: bool = False


class OrchestratorWorkersWorkflow(FlowWorkflow):
    """orchestrator -> n workers (one role) -> synthesizer, in one turn."""

    def __init__(
        self,
        domain: Domain,
        max_turns: int = 1,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        n_workers: int = 3,
    ) -> None:
        if n_workers < 1:
            raise ValueError(f"orchestrator-workers needs at least 1 worker, got {n_workers}")
        self.workers = [f"worker_{i}" for i in range(n_workers)]
        agents = (
            [Agent("orchestrator", "orchestrator")]
            + [Agent(w, "worker") for w in self.workers]
            + [Agent("synthesizer", "synthesizer")]
        )
        super().__init__(domain, agents, max_turns, prompt_style, format_bonus)
        self.max_turns = 1

    def new_state(self, split: str, index: int) -> OrchestratorState:
        return OrchestratorState(self.domain.problem(split, index))

    def strategy(self, agent: str, state: OrchestratorState) -> str:
        """The strategy a worker was given ('' before the orchestrator spoke or when it gave too few)."""
        i = self.workers.index(agent)
        return state.strategies[i] if i < len(state.strategies) else ""

    def render(self, agent: str, state: OrchestratorState) -> str:
        role = self.check_agent(agent).role
        question, n = self.question(state), len(self.workers)
        answers = [state.answers.get(w) for w in self.workers]
        if self.compact:
            lines = [compact_tag(agent), f"q:{question}"]
            if role == "worker":
                lines.append(f"s:{self.strategy(agent, state)[:40]}")
            elif role == "synthesizer":
                lines.append(compact_answers(answers))
            return "\n".join(lines) + "\n>"
        parts = [CHAT[role].format(n=n), f"Problem:\n{question}"]
        if role == "worker":
            parts += [
                f"Your strategy: {self.strategy(agent, state) or '(none given: choose your own)'}",
                self.domain.answer_instruction,
            ]
        elif role == "synthesizer":
            parts += [
                chat_answers("Worker", [state.texts.get(w, "") for w in self.workers], answers),
                self.domain.answer_instruction,
            ]
        return "\n\n".join(parts)

    def apply_many(self, agent: str, states: list[OrchestratorState], responses: list[str]) -> list[Outcome]:
        """Score and record one response per state; answers are graded in one batch."""
        role = self.check_agent(agent).role
        responses = clean(responses)
        if role == "orchestrator":
            outcomes = []
            for state, response in zip(states, responses):
                state.strategies, ok = parse_strategies(response, len(self.workers))
                local, terms = format_terms(ok, self.format_bonus)
                outcomes.append(Outcome(0.0, local, terms, {"strategies": list(state.strategies)}))
            return outcomes
        outcomes = []
        for state, response, (answer, score) in zip(states, responses, self.graded(states, responses)):
            outcome = answer_outcome(score, answer, self.format_bonus)
            if role == "worker":
                state.answers[agent], state.scores[agent], state.texts[agent] = answer, score, response
            else:
                state.final, state.final_score, state.done = answer, score, True
                outcome.terms["any_correct"] = float(any(state.scores.get(w, 0.0) >= 1.0 for w in self.workers))
            outcomes.append(outcome)
        return outcomes

    def is_done(self, state: OrchestratorState) -> bool:
        return state.done

    def success(self, state: OrchestratorState) -> bool:
        return state.final_score >= 1.0
