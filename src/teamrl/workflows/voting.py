"""Voting: three generators solve the task independently, an aggregator picks one of their answers.

Agents: generator_0 .. generator_{n-1} (role `generator`) and `aggregator` (role `aggregator`).
One turn, in order: each generator sees only the problem (never another generator's answer, so
the generators are parallel in what they see even though the driver samples them one after the
other); the aggregator sees the problem and every generator's answer and replies with the index of
the one it picks: `\\boxed{N}` (chat) or a bare `N` (compact). The episode ends after the
aggregator, so `max_turns` beyond 1 is ignored.

Rewards (trained reward = team_weight * team + local_weight * local; b = format_bonus):

    generator:   team  = score of its own answer   (the answer it puts up for the vote)
                 local = +b if the answer is explicit (boxed / "answer:" / last line "...=N"), else -b
    aggregator:  team  = score of the answer it picked (the team's final answer; 0 if it picked none)
                 local = +b for a valid index, else -b

Rewards are immediate (AT-GRPO scores each candidate when it is applied), so a generator cannot be
credited with the vote's outcome, which does not exist yet; `algorithm.grouping: trajectory` gives
every agent of an episode the same advantage, computed from the episode's return (the paper's
"every role gets the outcome reward"). Terms: see `flow_common` (format_ok, format, score,
correct, any_correct). Success (held-out metric): the picked answer is correct.
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
    parse_choice,
)
from teamrl.workflows.flow_domains import Answer, Domain

CHAT = {
    "generator": "You are one of {n} independent solvers. Solve the problem on your own.",
    "aggregator": (
        "You are the aggregator of a team of {n} independent solvers. Read their answers, decide "
        "which one is right, and reply with its number as \\boxed{{N}} (N from 0 to {last})."
    ),
}


@dataclass
class VotingState:
    """One episode: the generators' answers so far and the aggregator's pick."""

    problem: Any
    answers: dict[str, Answer] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    choice: int | None = None
    final_score: float = 0.0
    done: bool = False


class VotingWorkflow(FlowWorkflow):
    """n generators (one role), then one aggregator that picks an answer."""

    def __init__(
        self,
        domain: Domain,
        max_turns: int = 1,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        n_generators: int = 3,
    ) -> None:
        if n_generators < 2:
            raise ValueError(f"voting needs at least 2 generators, got {n_generators}")
        self.generators = [f"generator_{i}" for i in range(n_generators)]
        agents = [Agent(name, "generator") for name in self.generators] + [Agent("aggregator", "aggregator")]
        super().__init__(domain, agents, max_turns, prompt_style, format_bonus)
        self.max_turns = 1  # generators, then the aggregator: one turn

    def new_state(self, split: str, index: int) -> VotingState:
        return VotingState(self.domain.problem(split, index))

    def candidates(self, state: VotingState) -> list[Answer | None]:
        """The generators' answers in generator order (None where one has not answered)."""
        return [state.answers.get(name) for name in self.generators]

    def render(self, agent: str, state: VotingState) -> str:
        role = self.check_agent(agent).role
        question, n = self.question(state), len(self.generators)
        if self.compact:
            lines = [compact_tag(agent), f"q:{question}"]
            if role == "aggregator":
                lines.append(compact_answers(self.candidates(state)))
            return "\n".join(lines) + "\n>"
        parts = [CHAT[role].format(n=n, last=n - 1), f"Problem:\n{question}"]
        if role == "aggregator":
            parts.append(
                chat_answers("Answer", [state.texts.get(g, "") for g in self.generators], self.candidates(state))
            )
        else:
            parts.append(self.domain.answer_instruction)
        return "\n\n".join(parts)

    def apply_many(self, agent: str, states: list[VotingState], responses: list[str]) -> list[Outcome]:
        """Score and record one response per state; a generator's answers are graded in one batch."""
        role = self.check_agent(agent).role
        responses = clean(responses)
        if role == "aggregator":
            return [self._aggregate(s, r) for s, r in zip(states, responses)]
        graded = self.graded(states, responses)
        for state, response, (answer, score) in zip(states, responses, graded):
            state.answers[agent], state.scores[agent], state.texts[agent] = answer, score, response
        return [answer_outcome(score, answer, self.format_bonus) for answer, score in graded]

    def _aggregate(self, state: VotingState, response: str) -> Outcome:
        choice = parse_choice(response, len(self.generators))
        picked = self.generators[choice] if choice is not None else None
        score = state.scores.get(picked, 0.0) if picked else 0.0
        state.choice, state.final_score, state.done = choice, score, True
        local, terms = format_terms(choice is not None, self.format_bonus)
        any_correct = any(state.scores.get(g, 0.0) >= 1.0 for g in self.generators)
        terms |= {"score": score, "correct": float(score >= 1.0), "any_correct": float(any_correct)}
        return Outcome(score, local, terms, {"choice": choice})

    def is_done(self, state: VotingState) -> bool:
        return state.done

    def success(self, state: VotingState) -> bool:
        return state.final_score >= 1.0
