"""The math verifier contract (docs/verifiers/math.md), style by style, on both reward paths:
``answers_match`` (``math_reward``) and the math workflow's ``reasoner_answer`` + ``answers_agree``.
Needs math-verify; skipped with a reason without it."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("math_verify", reason="math-verify not installed: pip install math-verify")

from teamrl.tasks.math_answers import answers_match  # noqa: E402
from teamrl.tasks.math_shape import answer_refusal  # noqa: E402
from teamrl.tasks.math_parsing import extract_boxed, locate_final_answer  # noqa: E402
from teamrl.workflows.math_team import answers_agree, program_answer, reasoner_answer  # noqa: E402

SMALL = settings(max_examples=40, deadline=None)


def workflow_accepts(text: str, truth: str) -> bool:
    answer, _ = reasoner_answer(text)
    return answer is not None and answers_agree(answer, truth, timeout_s=5.0)


ACCEPTED = [
    # boxes
    (r"so the total is \boxed{18}.", "18"),
    (r"Therefore, the final answer is: $\boxed{18}$. I hope it is correct.", "18"),
    (r"\boxed{18} from the first method, and again \boxed{ 18 }.", "18"),  # repeated, same answer
    (r"\boxed{\dfrac{14}{3}}", r"\frac{14}{3}"),
    (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
    (r"\boxed{\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}}", r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}"),
    (r"\boxed{18} dollars.", "18"),
    # the Minerva / Llama evaluation format, numeric and not
    ("Final Answer: The final answer is $18$. I hope it is correct.", "18"),
    ("Final Answer: The final answer is $(3,4]$. I hope it is correct.", "(3,4]"),
    ("Final Answer: The final answer is $p - q$. I hope it is correct.", "p - q"),
    (r"Final Answer: The final answer is $\text{Evelyn}$. I hope it is correct.", r"\text{Evelyn}"),
    (r"Final Answer: The final answer is $1 \pm \sqrt{19}$. I hope it is correct.", r"1 \pm \sqrt{19}"),
    (r"Final Answer: The final answer is $\$36$. I hope it is correct.", r"\$36"),
    # marker lines
    ("The answer is 18.", "18"),
    ("the answer is: 18", "18"),
    ("Answer: 18", "18"),
    ("**Final Answer:** 18 dollars", "18"),
    ("**Final Answer**\n\n18", "18"),
    ("Janet makes 9 * 2 = $18 per day.\n#### 18", "18"),
    ("#### 1,000", "1000"),
    ("The answer is 1,000 dollars.", "1000"),
    (r"The answer is \(\frac{14}{3}\).", r"\frac{14}{3}"),
    ("The answer is 90 degrees.", r"90^\circ"),
    ("The answer is 50%.", "50"),
    ("The answer is (C).", r"\text{(C)}"),
    ("The answer is 0.5.", r"\frac{1}{2}"),
    ("I got 19 first, then fixed it: the answer is 18.", "18"),
    ("<think>Maybe it is 17.\n\\boxed{17}</think>\nThe answer is 18.", "18"),
    # what the gold allows
    ("The answer is x = 5.", "5"),
    ("The answer is 5.", "x=5"),
    ("The answer is y = 2x + 3.", "y = 2x + 3"),
    ("The answer is -2, 1.", "1,-2"),
    ("The answer is 3, 5, 7.", "3, 5, 7"),
    ("The answer is 10,080.", r"10,\!080"),
    (r"The answer is $1\,000$.", "1000"),
    (r"The answer is $137 \frac{1}{2}$.", r"137 \frac{1}{2}"),
    # last lines without a marker
    ("18", "18"),
    ("$18", "18"),
    ("so 3 + 4 = 7", "7"),
    ("x = 4\n7", "7"),
    (r"Redoing it, the total is $\frac{14}{3}$", r"\frac{14}{3}"),
    ("-50", "-50"),
    (r"\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}", r"\begin{pmatrix} -7 \\ 16 \\ 5 \end{pmatrix}"),
    (r"\text{Evelyn}", r"\text{Evelyn}"),
]

REFUSED = [
    # a bracketed set or tuple of candidates for a one-value gold
    ("The answer is $\\{17, 18\\}$.", "18"),
    ("The answer is \\boxed{(17, 18)}.", "18"),
    # hedges, alternatives, corrections
    ("The answer is 17 (or maybe 18).", "18"),
    ("The answer is 17 or 18.", "18"),
    ("The answer is either 17 or 18.", "18"),
    ("The answer is 17, no wait, 18.", "18"),
    ("The answer is probably 18.", "18"),
    ("The answer is approximately 18.", "18"),
    ("The answer is 18?", "18"),
    (r"\boxed{18} (or maybe 17)", "18"),
    (r"Either 17 or \boxed{18}", "18"),
    ("\\boxed{17}\nWait, actually it is 18.", "18"),
    ("Answer: 17. Hmm, the answer is 18.", "18"),
    ("Final Answer: The final answer is $17$ or $18$. I hope it is correct.", "18"),
    # candidate lists where one value is expected
    ("The answer is 17, 18.", "18"),
    ("Final answer: 17; 18", "18"),
    (r"\boxed{17, 18}", "18"),
    (r"\boxed{\{17, 18\}}", "18"),
    (r"\boxed{17 \text{ or } 18}", "18"),
    (r"\boxed{17 \lor 18}", "18"),
    (r"\boxed{17 \pm 1}", "18"),
    ("The answer is 1 or -2.", "1,-2"),
    # several boxes with different answers
    (r"\boxed{17} \boxed{18}", "18"),
    ("So \\boxed{17}.\nOn second thought, \\boxed{18}.", "18"),
    (r"\fbox{17} and \boxed{18}", "18"),
    # negations, ranges, conditions
    ("The answer is not 18.", "18"),
    ("The answer isn't 18.", "18"),
    ("The answer is 18, not 17.", "18"),  # strict: a negation on the answer line
    (r"\boxed{x \neq 18}", "18"),
    ("The answer is between 17 and 18.", "18"),
    ("The answer is from 17 to 18.", "18"),
    (r"\boxed{x \geq 18}", "18"),
    ("If x > 0 the answer is 18, otherwise 17.", "18"),
    # parts of a formula, runs of numbers
    (r"Thus the ratio is $\frac{14}{3}$", "3"),
    (r"We get $x^2 + 17x + 18$", "18"),
    (r"\boxed{2^{18}}", "18"),
    (r"\boxed{x_{18}}", "18"),
    (r"\boxed{17 = 18}", "18"),
    (r"\boxed{9 9}", "18"),
    (r"\boxed{9\,9}", "18"),
    (r"\boxed{9 \text{ } 9}", "18"),
    (r"\boxed{9\phantom{0}9}", "18"),
    (r"\boxed{1800\%}", "18"),
    ("Some work.\n17 18", "18"),
    ("The answer is 18 because 9 * 2 = 18.", "18"),
    # no answer at all
    ("<think>The answer is \\boxed{18}", "18"),
    ("<think>\\boxed{18}</think>\nThe answer is 17.", "18"),
    (r"\boxed{}", "18"),
    ("I think it is 18 or so", "18"),
    ("\\boxed{18" + "0" * 60 + "}", "18" + "0" * 60 + "1"),
]


@pytest.mark.parametrize(("text", "truth"), ACCEPTED)
def test_accepted_styles(text: str, truth: str) -> None:
    assert answers_match(text, truth)
    assert workflow_accepts(text, truth)


@pytest.mark.parametrize(("text", "truth"), REFUSED)
def test_refused_styles(text: str, truth: str) -> None:
    assert not answers_match(text, truth)
    assert not workflow_accepts(text, truth)


@pytest.mark.parametrize(
    ("text", "how"),
    [
        (r"\boxed{18}", "boxed"),
        ("The answer is 18.", "marker"),
        ("so 3 + 4 = 7", "last line"),
        (r"\boxed{17} or \boxed{18}", "2 boxes with different answers"),
        (r"\boxed{}", "only empty boxes"),
        ("<think>17", "the response never finished thinking"),
        ("\\boxed{17}\nWait, that is wrong.", "revised after the answer ('wait')"),
        ("The answer is 17. It is 2 more than 15.", "another number after the answer"),
    ],
)
def test_locate_says_how_or_why_not(text: str, how: str) -> None:
    assert locate_final_answer(text)[1] == how


def test_gold_decides_the_shape() -> None:
    assert answer_refusal(r"1 \pm \sqrt{19}", r"1 \pm \sqrt{19}") is None
    assert answer_refusal(r"1 \pm \sqrt{19}", "18") == r"relation or set symbol '\\pm'"
    assert answer_refusal("1, -2", "1,-2") is None and answer_refusal("1, -2", "1") == "several values (2)"
    assert answer_refusal("5x - 7y + 11z + 4 = 0", "5x - 7y + 11z + 4 = 0") is None
    assert answer_refusal(r"\text{not possible}", r"\text{not possible}") is None
    assert answer_refusal(r"\text{not possible}", r"\text{possible}") == "hedge word 'not'"


def test_huge_integers_never_raise() -> None:
    # Python refuses int(str) over 4,300 digits; the parsers and checker must not pass that on.
    huge = "9" * 5000
    for text in (rf"\boxed{{{huge}}}", f"The answer is {huge}.", huge, f"x = {huge}"):
        assert not answers_match(text, "9")
        assert reasoner_answer(text)[0] is None or not answers_agree(reasoner_answer(text)[0], "9")
        assert program_answer(text) is None or not answers_agree(program_answer(text), "9")


# Adversarial inputs far beyond the longest configured response (48 tokens, ~400 characters).
_LONG = 200_000
LONG_INPUTS = {
    **{f"run-{ord(c)}": c * _LONG for c in " \n\t9{}\\$=,-*#.^"},
    "marker-repeated": "The answer is " * (_LONG // 14),
    "answer-then-spaces": "answer" + " " * _LONG + "x",
    "boxes-unclosed": "\\boxed{" * (_LONG // 7),
    "boxes-nested": "\\boxed{" * (_LONG // 14) + "1" + "}" * (_LONG // 14),
    "boxes-repeated": "\\boxed{1}" * (_LONG // 9),
    "bare-boxes": "\\boxed 5 " * (_LONG // 9),
    "answer-lines": "Answer: 1\n" * (_LONG // 10),
    "headings": "**Final Answer**\n" * (_LONG // 17),
    "escaped-dollars": "\\$" * (_LONG // 2) + "$",
    "equations": "=1" * (_LONG // 2),
    "hedged-lines": "\\boxed{1} or \\boxed{2}\nThe answer is 3, maybe 4.\n" * (_LONG // 50),
    # the markup normaliser's patterns (teamrl.tasks.math_markup)
    "format-commands-unclosed": "\\textbf{" * (_LONG // 8),
    "format-commands-nested": "\\mathbf{" * (_LONG // 16) + "1" + "}" * (_LONG // 16),
    "emphasis": "**a" * (_LONG // 3),
    "code-spans": "`1" * (_LONG // 2),
    "fences": "```\n1\n" * (_LONG // 6),
    "html": "<b>1" * (_LONG // 4),
    "math-numbers": "$1" * (_LONG // 2),
    "cjk-tails": ",中" * (_LONG // 2),
    "bangs": "1!" * (_LONG // 2),
    "spelled-words": "twenty " * (_LONG // 7) + "(20)",
    "asides": "1 (since 1" * (_LONG // 10),
    "emoji": "🎉" * _LONG,
}


@pytest.mark.parametrize("name", sorted(LONG_INPUTS))
def test_parsers_are_linear_on_adversarial_input(name: str) -> None:
    # A quadratic regex takes minutes on 200k characters; linear parsers take well under a second.
    text = LONG_INPUTS[name]
    start = time.perf_counter()
    locate_final_answer(text)
    extract_boxed(text)
    reasoner_answer(text)
    program_answer(text)
    answer_refusal(text, "1")
    assert time.perf_counter() - start < 5.0


_hedge = st.sampled_from(["{w} or {t}", "either {w} or {t}", "{w}, no wait, {t}", "{w}, {t}", "not {t}",
                          "between {w} and {t}", "from {w} to {t}", "{w} (or maybe {t})", "maybe {t}"])
_marker = st.sampled_from(["The answer is {}.", "Answer: {}", "#### {}", "\\boxed{{{}}}",
                           "Final Answer: The final answer is ${}$. I hope it is correct."])


@SMALL
@given(st.integers(-10**6, 10**6), st.integers(1, 50), _hedge, _marker)
def test_hedged_answers_never_match(t: int, delta: int, hedge: str, marker: str) -> None:
    value = hedge.format(w=t + delta, t=t)
    assert not answers_match(marker.format(value), str(t))


@SMALL
@given(st.integers(-10**12, 10**12), _marker)
def test_clean_answers_match(t: int, marker: str) -> None:
    assert answers_match("Some work: 1 + 2 = 3.\n" + marker.format(t), str(t))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(" \n\\{}$=,.-019x") + ["\\boxed{", "answer is ", "</think>", "or "])).map("".join))
def test_location_never_raises(text: str) -> None:
    answer, how = locate_final_answer(text)
    assert (answer is None or (isinstance(answer, str) and answer)) and isinstance(how, str)
    assert answer_refusal(text, "1") is None or isinstance(answer_refusal(text, "1"), str)


@pytest.mark.parametrize(("answer", "gold"), [("\\{19, 20\\}", "20"), ("(19, 20)", "20"), ("[19; 20]", "20")])
def test_a_bracketed_list_is_several_values_for_a_one_value_gold(answer: str, gold: str) -> None:
    from teamrl.tasks.math_shape import answer_refusal

    assert answer_refusal(answer, gold) == "several values in brackets"
    assert answer_refusal(answer, answer) is None  # a gold that is itself such a list allows the shape
