"""Shared pieces of the study-workflow tests: hand-made arithmetic problems and a driver stand-in."""

from __future__ import annotations

import copy
from typing import Any

from teamrl.tasks.math_data import MathProblem
from teamrl.workflows.math_team import ProblemSplits
from teamrl.workflows.flow_domains import MathDomain

B = 0.1  # format bonus used throughout
PROBLEMS = ProblemSplits([MathProblem("t0", "18-6+8", "20"), MathProblem("t1", "7*8", "56")],
                         [MathProblem("h0", "2+2", "4")], "hand")
GARBAGE = ["", "   ", "\x00\x01", "((((", "answer:", "\\boxed{", "\\boxed{}", "é" * 300, "```python\n",
           "9^{9^{9^9}}", "-1", "99999999999999999999999999999999999", "\\boxed{Correct", None, 17]


def math_domain() -> MathDomain:
    return MathDomain(PROBLEMS)


def speak(workflow: Any, agent: str, state: Any, response: Any) -> Any:
    """What the rollout driver does for one candidate: score it on a copy, then commit it.

    Returns the outcome scored on the copy; the committed state is `state` itself.
    """
    scored = workflow.apply(agent, copy.deepcopy(state), response)
    workflow.apply(agent, state, response)
    return scored
