"""The README's custom workflow example, kept runnable (tests/training/test_examples.py)."""

from dataclasses import dataclass, field
from teamrl.workflows.base import Agent, Outcome

@dataclass
class GuessState:
    target: int
    guesses: list[int] = field(default_factory=list)

class GuessTeam:
    """A proposer guesses a number 0-9, a checker sees it and may correct it."""
    agents = [Agent("proposer", "proposer"), Agent("checker", "checker")]
    parallel = False          # the checker sees the proposer's answer of the same turn
    max_turns = 2

    def new_state(self, split, index):
        return GuessState(target=(index * 7 + (split == "heldout")) % 10)

    def render(self, agent, state):
        return f"{agent}\nhint:{state.target % 2}\nsaid:{state.guesses}\n>"

    def apply(self, agent, state, response):
        digits = [c for c in response if c.isdigit()]
        if not digits:                      # unparseable output: no-op, negative local term
            return Outcome(team=0.0, local=-0.1)
        state.guesses.append(int(digits[0]))
        return Outcome(team=float(state.guesses[-1] == state.target), local=0.1)

    def is_done(self, state):
        return bool(state.guesses) and state.guesses[-1] == state.target

    def success(self, state):
        return self.is_done(state)
