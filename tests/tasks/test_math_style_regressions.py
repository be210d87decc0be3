"""Answer styles and echoes each of the math graders must judge right: examples written for these tests
(questions in MATH-500's and GSM8K's manner, not taken from the probes' data), one per family.

Graders: the math team's reasoner and tool (team term), the study workflows' math grader, and
`answers_match` (given the question for the echoes, which only the question can expose).
"""

from __future__ import annotations

import pytest

from teamrl.tasks.math_answers import answers_match
from teamrl.tasks.math_data import MathProblem
from teamrl.workflows.math_team import MathWorkflow, ProblemSplits
from teamrl.workflows.flow_domains import MathDomain

pytest.importorskip("math_verify")


class _Printed:
    """The tool's sandbox stand-in: each program is `print(<text>)` and printed its text."""

    def __init__(self, printed: str) -> None:
        self.printed = printed

    def run(self, sources: list[str]) -> list[tuple[str, bool]]:
        return [(self.printed + "\n", True) for _ in sources]

    def close(self) -> None:
        pass


def _verdicts(question: str, gold: str, source: str, response: str, printed: str, echo: bool) -> dict[str, bool]:
    problem = MathProblem("r", question, gold, source=source)
    splits = ProblemSplits([problem], [problem], "regression")
    workflow = MathWorkflow(splits, runner=_Printed(printed))  # type: ignore[arg-type]
    try:
        reasoner = workflow.apply("reasoner", workflow.new_state("train", 0), response).team == 1.0
        tool = workflow.apply("tool", workflow.new_state("train", 0), "```python\nprint(0)\n```").team == 1.0
    finally:
        workflow.close()
    study = MathDomain(splits)
    studied = study.grade([problem], [study.parse(response, problem)])[0] == 1.0
    matched = (answers_match(response, gold, question=question, source=source) if echo
               else answers_match(response, gold))
    return {"reasoner": reasoner, "tool": tool, "study": studied, "answers_match": matched}


CORRECT = [  # (family, question, gold, source, response, what the tool prints)
    ("markdown bold", "How many edges does a cube have?", "12", "math500",
     "A cube has 12 edges.\n\nThe answer is __12__.", "__12__"),
    ("bold symbol", "How many vertices does a cube have?", "8", "math500",
     "A cube has 8 vertices.\n\nThe answer is $\\boldsymbol{8}$.", "$\\boldsymbol{8}$"),
    ("mathbf", "The interior angles of a quadrilateral add up to how many degrees, divided by 10?", "36", "gsm8k-test",
     "The angles sum to 360.\n\nThe answer is $\\mathbf{36}$.", "$\\mathbf{36}$"),
    ("textbf", "How many primes are less than 20?", "8", "gsm8k-test",
     "2, 3, 5, 7, 11, 13, 17, 19.\n\nFinal answer: \\textbf{8}", "\\textbf{8}"),
    ("inline code", "A baker has 6 trays of 9 rolls. How many rolls?", "54", "gsm8k-style",
     "6 * 9 = 54\n\nAnswer: `54`", "`54`"),
    ("code block", "A crate holds 7 rows of 8 bottles. How many bottles?", "56", "gsm8k-style",
     "7 * 8 = 56\n\n**Final Answer**\n```\n56\n```", "```\n56\n```"),
    ("cjk punctuation", "How many sides does a hexagon have?", "6", "math500",
     "A hexagon has six sides.\n\nAnswer: 6。", "6。"),
    ("exclamation", "How many minutes are in 3 hours?", "180", "gsm8k-style",
     "3 * 60 = 180\n\nThe answer is 180!", "180!"),
    ("full-width exclamation", "How many legs do 4 spiders have?", "32", "gsm8k-style",
     "4 * 8 = 32\n\nAnswer: ３２！", "３２！"),
    ("spelled first", "How many days are in 5 weeks?", "35", "gsm8k-style",
     "5 * 7 = 35\n\nAnswer: thirty-five (35)", "thirty-five (35)"),
    ("justification aside", "A pack holds 12 pencils. How many pencils are in 3 packs?", "36", "gsm8k-style",
     "Answer: 36 (since 12 + 12 + 12 = 36)", "36 (since 12 + 12 + 12 = 36)"),
    ("unicode minus", "A thermometer reads 4 degrees and drops 11. What does it read?", "-7", "gsm8k-test",
     "4 - 11 = -7\n\nAnswer: \u22127", "\u22127"),
    ("degree sign", "Two angles of a triangle are $35^\\circ$ and $65^\\circ$. What is the third angle, in degrees?",
     "80", "math500", "180 - 35 - 65 = 80\n\nAnswer: 80°", "80°"),
    ("parenthesised negative", "A diver at -9 meters rises 6 meters. At what height is she?", "-3", "gsm8k-test",
     "-9 + 6 = -3\n\nAnswer: (-3)", "(-3)"),
    ("percent of", "Of 60 students, 15 walk to school. What percent of the students walk?", "25", "gsm8k-style",
     "15 / 60 = 0.25\n\nAnswer: 25% of the students", "25% of the students"),
    ("prose ending in the number", "A farmer has 9 pens with 7 sheep each. How many sheep are there?", "63",
     "gsm8k-style", "9 * 7 = 63\n\nAfter counting all 9 pens of 7 sheep, the farmer has 63.", "The farmer has 63."),
]

ECHOES = [  # (family, question, gold, echo): equal to the gold in value, not the final form asked for
    ("inverse notation", "Let $p(x) = 4x - 1$. What is $p^{-1}(19)$?", "5", "\\frac{19+1}{4}"),
    ("inverse notation", "If $q(x) = x^5$, find $q^{-1}(32)$.", "2", "\\sqrt[5]{32}"),
    ("operator respelled", "Compute $19 \\times 21$.", "399", "19 \\cdot 21"),
    ("operator respelled", "Compute $1 + 3 + 5 + 7 + 9$.", "25", "\\sum_{k=1}^{5} (2k-1)"),
    ("factored or expanded", "Compute $31^2 - 29^2$.", "120", "(31 - 29)(31 + 29)"),
    ("factored or expanded", "Evaluate $7 \\cdot 13 + 7 \\cdot 7$.", "140", "7(13 + 7)"),
    ("fraction for a decimal", "Express $\\frac{9}{16}$ as a decimal.", "0.5625", "\\frac{9}{16}"),
    ("root restated", "Compute $\\sqrt{49 \\cdot 4}$.", "14", "\\sqrt{196}"),
    ("floor restated", "Evaluate $\\lfloor \\sqrt{50} \\rfloor$.", "7", "\\lfloor 7.07 \\rfloor"),
]


@pytest.mark.parametrize("family, question, gold, source, response, printed", CORRECT, ids=[c[0] for c in CORRECT])
def test_correct_answers_in_model_styles_are_rewarded(family: str, question: str, gold: str, source: str,
                                                      response: str, printed: str) -> None:
    verdicts = _verdicts(question, gold, source, response, printed, echo=False)
    assert [g for g, ok in verdicts.items() if not ok] == []


@pytest.mark.parametrize("family, question, gold, echo", ECHOES, ids=[f"{e[0]}-{i}" for i, e in enumerate(ECHOES)])
def test_echoes_in_equal_value_are_not_rewarded(family: str, question: str, gold: str, echo: str) -> None:
    verdicts = _verdicts(question, gold, "math500", f"The answer is $\\boxed{{{echo}}}$.", echo, echo=True)
    assert [g for g, ok in verdicts.items() if ok] == []


@pytest.mark.parametrize("family, question, gold, source, response, printed", CORRECT, ids=[c[0] for c in CORRECT])
def test_the_same_styles_with_a_wrong_value_are_not_rewarded(family: str, question: str, gold: str, source: str,
                                                             response: str, printed: str) -> None:
    wrong = str(int(gold) + 1)
    verdicts = _verdicts(question, wrong, source, response, printed, echo=False)
    assert [g for g, ok in verdicts.items() if ok] == []
