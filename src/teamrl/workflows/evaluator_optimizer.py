"""Evaluator-optimizer: a generator answers, an evaluator judges; the generator refines until accepted.

Agents: `generator` (role generator) and `evaluator` (role evaluator), one after the other each
turn. The generator sees the problem and, from the second turn on, its previous answer with the
evaluator's verdict and feedback. The evaluator sees the problem and the generator's latest
response and replies with a verdict, `\\boxed{Correct}` or `\\boxed{Incorrect}` (compact: a first
word `ok` / `no`), followed by feedback. The episode ends when the evaluator says Correct, or after
`max_turns` turns (the refinement cap: 3 for math, 2 for code unless the config says otherwise).

Rewards (trained reward = team_weight * team + local_weight * local; b = format_bonus):

    generator:  team  = score of its answer (the team's answer until it is replaced)
                local = +b if the answer is explicit, else -b
    evaluator:  team  = 1 if its verdict is right (Correct on a correct answer, Incorrect on a wrong
                one): the decision that stops the team on a right answer or sends it back on a
                wrong one; 0 otherwise, or with no verdict
                local = +b if it gave a verdict, else -b

Terms: see `flow_common` (format_ok, format, score, correct for the generator; verdict_correct for
the evaluator). A missing verdict counts as Incorrect (the generator tries again). Success
(held-out metric): the generator's last answer is correct, accepted or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teamrl.workflows.base import Agent, Outcome
from teamrl.workflows.flow_common import (
    SHOWN_CHARS,
    FlowWorkflow,
    answer_outcome,
    clean,
    compact_tag,
    format_terms,
    parse_verdict,
)
from teamrl.workflows.flow_domains import Answer, Domain

COMPACT_CHARS = 60  # of a response, in a compact prompt
CHAT = {
    "generator": "Solve the problem. An evaluator will check your answer.",
    "evaluator": (
        "You are the evaluator. Check the proposed solution carefully. Start your reply with "
        "\\boxed{Correct} or \\boxed{Incorrect}, then give short feedback on what is wrong."
    ),
}


@dataclass
class EvalOptState:
    """One episode: the latest answer, the latest verdict, and how many turns are spent."""

    problem: Any
    turn: int = 0
    answer: Answer | None = None
    score: float = 0.0
    text: str = ""
    verdict: bool | None = None
    feedback: str = ""
    accepted: bool = False


class EvaluatorOptimizerWorkflow(FlowWorkflow):
    """generator -> evaluator, repeated until the evaluator accepts or the cap is reached."""

    def __init__(
        self, domain: Domain, max_turns: int | None = None, prompt_style: str = "compact", format_bonus: float = 0.1
    ) -> None:
        agents = [Agent("generator", "generator"), Agent("evaluator", "evaluator")]
        super().__init__(domain, agents, max_turns or domain.default_turns, prompt_style, format_bonus)

    def new_state(self, split: str, index: int) -> EvalOptState:
        return EvalOptState(self.domain.problem(split, index))

    def render(self, agent: str, state: EvalOptState) -> str:
        self.check_agent(agent)
        question = self.question(state)
        if self.compact:
            lines = [compact_tag(agent), f"q:{question}"]
            if agent == "evaluator":
                lines.append(f"a:{state.text.strip()[-COMPACT_CHARS:]}")
            elif state.answer is not None:
                verdict = {True: "ok", False: "no", None: "?"}[state.verdict]
                lines.append(
                    f"was:{state.answer.shown[:COMPACT_CHARS]} {verdict} {state.feedback[:COMPACT_CHARS]}".rstrip()
                )
            return "\n".join(lines) + "\n>"
        parts = [CHAT[agent], f"Problem:\n{question}"]
        if agent == "evaluator":
            parts.append(f"Proposed solution:\n{state.text.strip()[-SHOWN_CHARS:]}")
        else:
            if state.answer is not None:
                verdict = "Correct" if state.verdict else "Incorrect"
                parts.append(
                    f"Your previous solution:\n{state.text.strip()[-SHOWN_CHARS:]}\n\n"
                    f"The evaluator's verdict: {verdict}. Feedback: {state.feedback[:SHOWN_CHARS] or 'none'}\n"
                    "Revise your solution."
                )
            parts.append(self.domain.answer_instruction)
        return "\n\n".join(parts)

    def apply_many(self, agent: str, states: list[EvalOptState], responses: list[str]) -> list[Outcome]:
        """Score and record one response per state; the generator's answers are graded in one batch."""
        self.check_agent(agent)
        responses = clean(responses)
        if agent == "evaluator":
            return [self._judge(s, r) for s, r in zip(states, responses)]
        graded = self.graded(states, responses)
        for state, response, (answer, score) in zip(states, responses, graded):
            state.answer, state.score, state.text = answer, score, response
        return [answer_outcome(score, answer, self.format_bonus) for answer, score in graded]

    def _judge(self, state: EvalOptState, response: str) -> Outcome:
        verdict, feedback = parse_verdict(response)
        truth = state.score >= 1.0
        right = verdict is not None and verdict == truth
        state.verdict, state.feedback = verdict, feedback[:SHOWN_CHARS]
        state.accepted = verdict is True
        state.turn += 1
        local, terms = format_terms(verdict is not None, self.format_bonus)
        terms |= {"verdict_correct": float(right)}
        return Outcome(float(right), local, terms, {"verdict": verdict, "answer_correct": truth})

    def is_done(self, state: EvalOptState) -> bool:
        return state.accepted or state.turn >= self.max_turns

    def success(self, state: EvalOptState) -> bool:
        return state.score >= 1.0
