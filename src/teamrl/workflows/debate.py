"""Debate (MAPoRL style): n agents answer, then see each other's answers and answer again, for rounds.

Agents: debater_0 .. debater_{n-1}, one role (`debater`), all answering in parallel every turn
(one turn = one round). In round 0 each sees the problem; from round 1 on each also sees every
debater's answer of the previous round (its own included) and may keep or change its answer.
The episode ends after `max_turns` rounds, or as soon as every debater gives the same answer in a
round (`stop_when_unanimous`).

The verifier is the task's grader (math-verify / exact match / ground-truth tests): it scores
every answer of every round. The team's final answer is the majority of the last round's answers
(`final_rule: majority`; ties go to the group holding the lowest-numbered debater) or debater_0's
last answer (`final_rule: first`).

Rewards (trained reward = team_weight * team + local_weight * local; b = format_bonus):

    debater:  team  = the verifier's score of its answer this round
              local = +b for an explicit answer, else -b

Terms: see `flow_common` (format_ok, format, score, correct). Success (held-out metric): the
final answer is correct.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teamrl.workflows.base import Agent, Outcome
from teamrl.workflows.flow_common import FlowWorkflow, answer_outcome, chat_answers, clean, compact_answers, compact_tag
from teamrl.workflows.flow_domains import Answer, Domain

CHAT_FIRST = "You are one of {n} agents debating a problem. Solve it."
CHAT_LATER = (
    "You are one of {n} agents debating a problem. These are every agent's answers from the previous "
    "round (yours is number {me}). Weigh them, then give your own updated solution."
)


@dataclass
class DebateState:
    """One episode: the last finished round's answers, and the round being answered."""

    problem: Any
    round: int = 0
    answers: dict[str, Answer] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    pending: dict[str, tuple[Answer, float, str]] = field(default_factory=dict)
    unanimous: bool = False


class DebateWorkflow(FlowWorkflow):
    """n debaters of one role, in parallel, for up to `max_turns` rounds."""

    parallel = True

    def __init__(
        self,
        domain: Domain,
        max_turns: int = 2,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        n_debaters: int = 3,
        final_rule: str = "majority",
        stop_when_unanimous: bool = True,
    ) -> None:
        if n_debaters < 2:
            raise ValueError(f"a debate needs at least 2 debaters, got {n_debaters}")
        if final_rule not in ("majority", "first"):
            raise ValueError(f"final_rule must be 'majority' or 'first', got {final_rule!r}")
        self.debaters = [f"debater_{i}" for i in range(n_debaters)]
        super().__init__(domain, [Agent(d, "debater") for d in self.debaters], max_turns, prompt_style, format_bonus)
        self.final_rule, self.stop_when_unanimous = final_rule, stop_when_unanimous

    def new_state(self, split: str, index: int) -> DebateState:
        return DebateState(self.domain.problem(split, index))

    def render(self, agent: str, state: DebateState) -> str:
        self.check_agent(agent)
        question, n = self.question(state), len(self.debaters)
        previous = [state.answers.get(d) for d in self.debaters]
        if self.compact:
            lines = [compact_tag(agent), f"q:{question}"] + ([compact_answers(previous)] if state.round else [])
            return "\n".join(lines) + "\n>"
        if not state.round:
            return "\n\n".join([CHAT_FIRST.format(n=n), f"Problem:\n{question}", self.domain.answer_instruction])
        return "\n\n".join(
            [
                CHAT_LATER.format(n=n, me=self.debaters.index(agent)),
                f"Problem:\n{question}",
                chat_answers("Agent", [state.texts.get(d, "") for d in self.debaters], previous),
                self.domain.answer_instruction,
            ]
        )

    def apply_many(self, agent: str, states: list[DebateState], responses: list[str]) -> list[Outcome]:
        """Score one response per state (graded in one batch); a round closes once every debater answered."""
        self.check_agent(agent)
        responses = clean(responses)
        outcomes = []
        for state, response, (answer, score) in zip(states, responses, self.graded(states, responses)):
            outcome = answer_outcome(score, answer, self.format_bonus)
            outcome.info["round"] = state.round
            state.pending[agent] = (answer, score, response)
            if all(d in state.pending for d in self.debaters):
                self._close_round(state)
            outcomes.append(outcome)
        return outcomes

    def _close_round(self, state: DebateState) -> None:
        state.answers = {d: a for d, (a, _, _) in state.pending.items()}
        state.scores = {d: s for d, (_, s, _) in state.pending.items()}
        state.texts = {d: t for d, (_, _, t) in state.pending.items()}
        state.pending = {}
        state.round += 1
        first = state.answers[self.debaters[0]]
        state.unanimous = all(self.domain.same(first, state.answers[d]) for d in self.debaters[1:])

    def final(self, state: DebateState) -> tuple[str | None, float]:
        """(the team's final answer, its score) under `final_rule`; (None, 0.0) before round 1 ends."""
        if not state.answers:
            return None, 0.0
        if self.final_rule == "first":
            winner = self.debaters[0]
        else:
            # Largest group of agreeing answers; the earliest debater breaks ties (max keeps the first).
            present = [d for d in self.debaters if state.answers[d].value is not None] or self.debaters
            winner = max(
                present, key=lambda d: sum(self.domain.same(state.answers[d], state.answers[o]) for o in present)
            )
        return state.answers[winner].value, state.scores[winner]

    def is_done(self, state: DebateState) -> bool:
        return state.round >= self.max_turns or (self.stop_when_unanimous and state.unanimous)

    def success(self, state: DebateState) -> bool:
        return self.final(state)[1] >= 1.0
