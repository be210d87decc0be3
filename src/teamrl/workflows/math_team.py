"""Math with the paper's two roles, answering in parallel until they agree.

reasoner: solves the problem in natural language and ends with a final answer ("answer: 7",
          "The answer is 7", "\\boxed{7}", or a last line "3+4=7" / "7"), read by the math
          verifier contract (docs/verifiers/math.md): one answer, no hedges.
tool:     writes a Python program; the last line it prints (run in the sandbox) is its answer.

Both agents answer every turn from the same history (`parallel = True`); from the second turn on
each sees both answers of the previous turn. The episode ends as soon as the two answers of a
turn agree (math-verify equivalence), or after `max_turns` turns.

Rewards (`Outcome`): the team term of a candidate is the correctness of its *own* answer against
the ground truth (1.0 or 0.0), so every candidate is judged on its own merit even before the team
converges; the local term is +format_bonus for a well-formed answer (a reasoner response with a
parseable final answer; a program that ran and printed something) and -format_bonus otherwise.

Success (held-out metric): the team's final answer is correct. The final answer is the agreed
answer when the agents agreed, otherwise the last answer of `final_agent` (the reasoner by
default), or of the other agent when that one gave none.

Problems come from a `ProblemSplits` (train and held-out lists): `arithmetic_problems` for tiny
models (procedural, disjoint by content) or `dataset_problems` for GSM8K / MATH-500 / AIME;
`math_problems("arithmetic:1,2")` / `math_problems("gsm8k")` builds either from a short spec;
`MathTaskConfig` holds the same choices as a config section. `single_agent=True` is the
single-agent baseline: the reasoner alone, one turn.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Generic, TypeVar

from teamrl.tasks.code_blocks import extract_code_block
from teamrl.tasks.content_splits import check_heldout_split
from teamrl.tasks.math_answers import answer_equals
from teamrl.tasks.math_data import MathProblem, generate_arithmetic, load_math_dataset
from teamrl.tasks.math_echo import ANSWER_FORMS, ascii_digits, echo_refusal, resolve_answer_form
from teamrl.tasks.math_markup import normalize_markup
from teamrl.tasks.math_parsing import extract_final_answer, locate_final_answer
from teamrl.tasks.math_shape import answer_refusal, hedge_refusal
from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.chat_shots import few_shot
from teamrl.workflows.program_runner import ProgramRunner

T = TypeVar("T")

MAX_ANSWER_CHARS = 128  # longer "answers" are no answer: they are shown to the other agent every turn
# Short enough that Fraction() is instant (a bare "1e999999999" would not be).
_PLAIN_NUMBER_RE = re.compile(r"^-?\d{1,30}(?:\.\d{1,30}|/[1-9]\d{0,29})?$")
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?=\.|$)")
_BARE_ANSWER_RE = re.compile(r"^(?:.*=)?\s*-?\d+(?:\.\d+)?(?:/\d+)?\s*$")


# ----------------------------------------------------------------------------- problem sources


@dataclass
class ProblemSplits(Generic[T]):
    """Disjoint training and held-out problem lists; instance `index` wraps around the list.

    A study needs two held-out splits (pick checkpoints on one, report the other): 'validation' is the
    held-out list's first half and 'test' its second half, so they share no problem. 'heldout' is the
    whole list, or the half `heldout_split` names.
    """

    train: list[T]
    heldout: list[T]
    name: str = ""
    heldout_split: str = ""
    """What 'heldout' means: '' (the whole held-out list), 'validation' or 'test' (one half of it)."""

    def __post_init__(self) -> None:
        for split in ("train", "heldout"):
            if not getattr(self, split):
                raise ValueError(f"problem source {self.name or '?'} has no {split} problems")
        if self.heldout_split:
            check_heldout_split("math", self.heldout_split)
            if len(self.heldout) < 2:
                raise ValueError(f"problem source {self.name or '?'} has too few held-out problems to halve")

    def problems(self, split: str) -> list[T]:
        """The problem list of `split`: train, heldout, validation or test."""
        if split == "heldout" and self.heldout_split:
            split = self.heldout_split
        if split in ("train", "heldout"):
            return self.train if split == "train" else self.heldout
        half = len(self.heldout) // 2
        if split == "validation":
            return self.heldout[:half]
        if split == "test":
            return self.heldout[half:]
        raise ValueError(f"unknown split {split!r}: use 'train', 'heldout', 'validation' or 'test'")

    def get(self, split: str, index: int) -> T:
        """Problem `index` of `split`; indices beyond the list cycle through it."""
        problems = self.problems(split)
        if index < 0:
            raise ValueError(f"instance index must be >= 0, got {index}")
        return problems[index % len(problems)]


def hash_partition(
    items: Sequence[T], key: Callable[[T], str], heldout_fraction: float, seed: int = 0
) -> ProblemSplits[T]:
    """Split one list into train / held-out by a seeded hash of each item's key.

    The hash (not the list order) decides, so adding records to a file does not move others
    between the splits.
    """
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    train: list[T] = []
    heldout: list[T] = []
    for item in items:
        digest = hashlib.sha256(f"teamrl-split:{seed}:{key(item)}".encode()).digest()
        (heldout if int.from_bytes(digest[:8], "big") / 2**64 < heldout_fraction else train).append(item)
    return ProblemSplits(train, heldout)


def arithmetic_problems(
    levels: Sequence[int] = (1, 2), seed: int = 0, train_size: int = 2000, heldout_size: int = 400
) -> ProblemSplits[MathProblem]:
    """Procedural arithmetic (`generate_arithmetic` levels 1-4), levels interleaved.

    The generator keeps the two splits disjoint by question text; repeats within a split are
    dropped, so a small level yields fewer problems than asked (level 1 has about 150).
    """
    if not levels:
        raise ValueError("arithmetic_problems needs at least one level")
    splits = {}
    for split, size in (("train", train_size), ("heldout", heldout_size)):
        per_level = []
        for level in levels:
            drawn = generate_arithmetic(level, size, seed=seed, split=split, unique=False)
            per_level.append(list({p.question: p for p in drawn}.values()))
        longest = max(map(len, per_level))
        splits[split] = [pool[i] for i in range(longest) for pool in per_level if i < len(pool)]
    return ProblemSplits(splits["train"], splits["heldout"], f"arithmetic:{','.join(map(str, levels))}")


def dataset_problems(
    name: str, seed: int = 0, heldout_fraction: float = 0.2, data_dir: str | None = None
) -> ProblemSplits[MathProblem]:
    """A named math set: GSM8K uses its train and test files; MATH-500 / AIME (test only) and
    any file `load_math_dataset` reads are split by `hash_partition` on the problem id."""
    if name.lower().replace("-", "").replace("_", "") == "gsm8k":
        return ProblemSplits(
            load_math_dataset("gsm8k", "train", data_dir), load_math_dataset("gsm8k", "test", data_dir), "gsm8k"
        )
    problems = load_math_dataset(name, "test", data_dir)
    splits = hash_partition(problems, lambda p: p.id, heldout_fraction, seed)
    splits.name = name
    return splits


def math_problems(spec: str, seed: int = 0, data_dir: str | None = None) -> ProblemSplits[MathProblem]:
    """`arithmetic` / `arithmetic:1,3` (levels) or a dataset name (`gsm8k`, `math500`, `aime24`...)."""
    name, _, arg = spec.partition(":")
    if name == "arithmetic":
        try:
            levels = tuple(int(x) for x in arg.split(",")) if arg else (1, 2)
        except ValueError:
            raise ValueError(f"bad arithmetic levels in {spec!r}; write e.g. arithmetic:1,2") from None
        return arithmetic_problems(levels, seed)
    return dataset_problems(spec, seed, data_dir=data_dir)


def task_problems(task: MathTaskConfig) -> ProblemSplits[MathProblem]:
    """The problems of a config's math task, its 'heldout' split resolved by `task.heldout_split`."""
    return replace(math_problems(task.source, task.seed, task.data_dir), heldout_split=task.heldout_split)


@dataclass(frozen=True)
class MathTaskConfig:
    """The `task:` settings of the math team (a config's `task: {name: math, source: gsm8k}`)."""

    source: str = "arithmetic:1,2"
    """`arithmetic[:levels]` or a dataset name (gsm8k, math500, aime24, aime25) or file."""
    seed: int = 0
    """Seeds the arithmetic stream and the train/held-out partition of test-only sets."""
    final_agent: str = "reasoner"
    """Whose last answer counts when the agents never agree: reasoner or tool."""
    data_dir: str | None = None
    """Where the dataset files are (default: $TEAMRL_DATA_DIR, else ../shared/datasets)."""
    answer_form: str = "auto"
    """`value`: a number is asked for wherever the gold is one (`(16-3-4)*2` is no answer);
    `expression`: any single-valued expression equal to the gold counts; `auto`: value for
    arithmetic, GSM8K and AIME, expression for MATH-500 and other sets. Either way an answer that
    restates the question's expression is no answer (`teamrl.tasks.math_echo`)."""
    worked_examples: bool = False
    """Chat prompts show two solved problems (`CHAT_EXAMPLES`, not from any split) as earlier turns before the
    agent's problem. A base model without a chat template (Gemma-3-270M) needs them: told only the
    instruction, it continues the problem's text ("1+4" -> "+12+16+18...") instead of answering it."""
    heldout_split: str = ""
    """What the held-out split is: '' the whole held-out list (as `teamrl train` and `eval` use it), or
    'validation' / 'test', its two disjoint halves (a study picks checkpoints on one, reports the other)."""

    def __post_init__(self) -> None:
        if self.final_agent not in ("reasoner", "tool"):
            raise ValueError(f"math.final_agent must be 'reasoner' or 'tool', got {self.final_agent!r}")
        if self.answer_form not in ANSWER_FORMS:
            raise ValueError(f"math.answer_form must be one of {', '.join(ANSWER_FORMS)}, got {self.answer_form!r}")
        if not self.source:
            raise ValueError("math.source is empty")
        if self.heldout_split:
            check_heldout_split("math", self.heldout_split)


# ----------------------------------------------------------------------------- answers


def reasoner_answer(text: str) -> tuple[str | None, bool]:
    """(final answer, well formed) of a reasoner response, by the math verifier contract
    (`docs/verifiers/math.md`, `locate_final_answer`).

    Well formed: an explicit answer (agreeing boxes / "answer:" / "The answer is" / "####"), or a
    last line that is a number or ends in "= number". A last line that ends with an answer in
    another way ("the total is $\\frac{14}{3}$") still counts for correctness, with a negative
    format term. No answer (None, False): none stated, a hedged one ("17 or 18", "not 18"), or one
    longer than `MAX_ANSWER_CHARS` (whitespace collapsed).
    """
    if not isinstance(text, str):
        return None, False
    answer, how = locate_final_answer(text)
    if answer is None or hedge_refusal(answer) is not None or len(answer) > MAX_ANSWER_CHARS:
        return None, False
    if how != "last line":
        return answer, True
    lines = text.strip().splitlines()
    last = lines[-1] if lines else ""
    return answer, len(last) <= MAX_ANSWER_CHARS and _BARE_ANSWER_RE.match(last) is not None


def _plain_numbers_equal(a: str, b: str) -> bool | None:
    """Exact comparison when both answers are plain numbers (most arithmetic and GSM8K answers),
    sparing a math-verify call; None when either is anything else."""
    a, b = (_THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), x.strip()) for x in (a, b))
    if a == b:
        return True
    if _PLAIN_NUMBER_RE.match(a) and _PLAIN_NUMBER_RE.match(b):
        return Fraction(a) == Fraction(b)
    return None


def answers_agree(answer: str, truth: str, timeout_s: float = 1.0) -> bool:
    """Whether an extracted answer equals `truth` (the ground truth, or the other agent's answer):
    plain numbers exactly, anything else by `answer_equals` (shape rules, then math-verify).
    An empty or unparseable `truth` agrees with nothing."""
    quick = _plain_numbers_equal(answer, truth)
    if quick is not None:
        return quick
    try:
        return answer_equals(answer, truth, timeout_seconds=timeout_s)
    except ValueError:  # an empty "truth" (the other agent's answer)
        return False


def program_answer(stdout: str) -> str | None:
    """The tool's answer: its last printed line (or the value after an answer marker in it);
    None for a hedged line or one longer than `MAX_ANSWER_CHARS`."""
    lines = [line.strip() for line in normalize_markup(stdout).splitlines() if line.strip()]
    if not lines:
        return None
    answer = extract_final_answer(lines[-1])
    if answer is None or hedge_refusal(answer) is not None or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


# ----------------------------------------------------------------------------- workflow

# Short and concrete: a 135M instruct model follows these; mentioning "a two-agent team" made SmolLM2 talk
# about teams instead of solving the problem.
CHAT_INSTRUCTIONS = {
    "reasoner": "Solve the math problem. Think briefly, then give the final line as 'Answer: <number>'.",
    "tool": (
        "Write a short Python program that computes the answer to the math problem and prints it. Reply with "
        "only the code in a ```python block."
    ),
}


# Two-digit operands: outside the arithmetic levels' question spaces (tested), so no example hands over an answer.
# Each question ends with a cue line: after a bare "Problem:\n1+4" Gemma-3-270M went on writing the sum ("+10+15").
CHAT_CUES = {"reasoner": "Solution:", "tool": "Program:"}
CHAT_EXAMPLES = {
    "reasoner": [
        ("Problem: 57+26\nSolution:", "57+26 = 83.\nAnswer: 83"),
        ("Problem: 63-28+14\nSolution:", "63-28 = 35, and 35+14 = 49.\nAnswer: 49"),
    ],
    "tool": [
        ("Problem: 57+26\nProgram:", "```python\nprint(57 + 26)\n```"),
        ("Problem: 63-28+14\nProgram:", "```python\nprint(63 - 28 + 14)\n```"),
    ],
}


CHAT_SECOND_TURN = {
    "reasoner": (
        "A program computes exactly what it is written to compute, which may not be the problem. Check "
        "both answers against the problem and give the right one as 'Answer: <number>'."
    ),
    "tool": "Check the problem again and write a program that prints the right answer.",
}


@dataclass
class MathState:
    """One episode. `answers` holds the last finished turn; `pending` the turn being answered."""

    problem: MathProblem
    turn: int = 0
    answers: dict[str, str | None] = field(default_factory=dict)
    correct: dict[str, bool] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)  # each agent's last output, as others see it
    pending: dict[str, tuple[str | None, bool, str]] = field(default_factory=dict)
    agreed: bool = False
    transcript: list[tuple[str, str]] = field(default_factory=list)


class MathWorkflow(Workflow):
    """reasoner + tool, in parallel, until their answers agree or `max_turns` turns are spent."""

    parallel = True

    def __init__(
        self,
        problems: ProblemSplits[MathProblem] | MathTaskConfig | str = "arithmetic:1,2",
        max_turns: int = 4,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: ProgramRunner | None = None,
        final_agent: str = "reasoner",
        seed: int = 0,
        match_timeout_s: float = 1.0,
        single_agent: bool = False,
        answer_form: str = "auto",
        worked_examples: bool = False,
    ) -> None:
        """`problems`: splits, a source spec (see `math_problems`) or a `MathTaskConfig` (whose
        seed, final_agent, answer_form and worked_examples then apply). `single_agent`: the reasoner alone, for one turn (with
        no partner there is no feedback, so further turns would repeat the same prompt)."""
        if isinstance(problems, MathTaskConfig):
            final_agent, seed, answer_form = problems.final_agent, problems.seed, problems.answer_form
            worked_examples = problems.worked_examples
            problems = task_problems(problems)
        resolve_answer_form(answer_form)  # raises on an unknown form
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        if final_agent not in ("reasoner", "tool"):
            raise ValueError(f"final_agent must be 'reasoner' or 'tool', got {final_agent!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.problems = math_problems(problems, seed) if isinstance(problems, str) else problems
        self.single_agent = single_agent
        self.max_turns = 1 if single_agent else max_turns
        self.prompt_style = prompt_style
        self.format_bonus = format_bonus
        self.final_agent = final_agent
        self.answer_form = answer_form
        self.worked_examples = worked_examples
        # Bounds each math-verify parse; hostile answers like 9^{9^{9^9}} cost up to ~3 timeouts once.
        self.match_timeout_s = match_timeout_s
        self.agents = (
            [Agent("reasoner", "reasoner")] if single_agent else [Agent("reasoner", "reasoner"), Agent("tool", "tool")]
        )
        self.runner = runner or ProgramRunner()
        # K candidates often give the same answer: math-verify is asked once per (answer, truth).
        self._match_cache: OrderedDict[tuple[str, str], bool] = OrderedDict()

    def new_state(self, split: str, index: int) -> MathState:
        return MathState(self.problems.get(split, index))

    # ------------------------------------------------------------------ prompts

    def render(self, agent: str, state: MathState) -> str | list[dict[str, str]]:
        self._check_agent(agent)
        question = state.problem.question
        if self.prompt_style == "compact":
            lines = [agent, f"q:{question}"]
            if state.turn:
                lines.append(f"r:{state.answers.get('reasoner') or '?'} t:{state.answers.get('tool') or '?'}")
            return "\n".join(lines) + "\n>"
        parts = [CHAT_INSTRUCTIONS[agent], f"Problem:\n{question}"]
        if state.turn:
            # Only the two answers, not the earlier texts: shown its own long reasoning again, SmolLM2's
            # reasoner talked itself out of right answers (a second turn made the untrained team worse).
            parts.append(
                "Your team's earlier answers disagree or one is missing:\n"
                f"- the Python program printed: {state.answers.get('tool') or 'nothing usable'}\n"
                f"- the reasoning agent answered: {state.answers.get('reasoner') or 'nothing'}"
            )
            parts.append(CHAT_SECOND_TURN[agent])
        if self.worked_examples:
            asked = "\n\n".join([f"Problem: {question}", *parts[2:]]) + f"\n{CHAT_CUES[agent]}"
            return few_shot(parts[0], CHAT_EXAMPLES[agent], asked)
        return "\n\n".join(parts)

    # ------------------------------------------------------------------ applying answers

    def apply(self, agent: str, state: MathState, response: str) -> Outcome:
        return self.apply_many(agent, [state], [response])[0]

    def apply_many(self, agent: str, states: list[MathState], responses: list[str]) -> list[Outcome]:
        """Score (and record) one response per state; the tool's programs run in one sandbox call."""
        self._check_agent(agent)
        responses = [r if isinstance(r, str) else "" for r in responses]
        if agent == "reasoner":
            parsed = [(*reasoner_answer(r), r.strip()[-400:]) for r in responses]
        else:
            programs = [extract_code_block(r) or "" for r in responses]
            ran = self.runner.run([p for p in programs if p.strip()])
            results = iter(ran)
            parsed = []
            for program in programs:
                stdout, ok = next(results) if program.strip() else ("", False)
                answer = program_answer(stdout) if ok else None
                shown = (
                    f"{program.strip()[-400:]}\n# printed: {stdout.strip()[-100:] if ok else 'error'}"
                    if program.strip()
                    else "(no program found)"
                )
                parsed.append((answer, answer is not None, shown))
        return [self._record(agent, s, r, p) for s, r, p in zip(states, responses, parsed)]

    def _record(self, agent: str, state: MathState, response: str, parsed: tuple[str | None, bool, str]) -> Outcome:
        answer, well_formed, shown = parsed
        problem = state.problem
        # An answer that hands the question back has the gold's value with no work done, and one that
        # states several values is no answer: neither is correct nor earns the format bonus
        # (teamrl.tasks.math_echo; the reward-hacking probe, docs/verifiers/reward-hacking.md).
        if answer is not None and (
            echo_refusal(answer, problem.question, problem.answer, problem.source, self.answer_form)
            or answer_refusal(ascii_digits(answer), problem.answer)
        ):
            answer, well_formed = None, False
        correct = answer is not None and self._match(answer, problem.answer)
        state.pending[agent] = (answer, correct, shown)
        state.transcript.append((agent, response))
        if all(a.name in state.pending for a in self.agents):
            self._close_turn(state)
        local = self.format_bonus if well_formed else -self.format_bonus
        team = 1.0 if correct else 0.0
        return Outcome(team, local, {"correct": team, "format": local}, {"answer": answer})

    def _close_turn(self, state: MathState) -> None:
        """Every agent has answered this turn: publish the answers and check agreement."""
        state.answers = {name: ans for name, (ans, _, _) in state.pending.items()}
        state.correct = {name: ok for name, (_, ok, _) in state.pending.items()}
        state.shown = {name: shown for name, (_, _, shown) in state.pending.items()}
        state.pending = {}
        state.turn += 1
        first, second = state.answers.get("reasoner"), state.answers.get("tool")
        state.agreed = first is not None and second is not None and self._match(first, second)

    def _match(self, answer: str, truth: str) -> bool:
        key = (answer, truth)
        if key not in self._match_cache:
            self._match_cache[key] = answers_agree(answer, truth, self.match_timeout_s)
            while len(self._match_cache) > 50_000:
                self._match_cache.popitem(last=False)
        return self._match_cache[key]

    # ------------------------------------------------------------------ end of episode

    def final_answer(self, state: MathState) -> tuple[str | None, bool]:
        """(the team's answer, whether it is correct): the agreed one, else `final_agent`'s."""
        order = [self.final_agent] + [a.name for a in self.agents if a.name != self.final_agent]
        for name in order:
            if state.answers.get(name) is not None:
                return state.answers[name], state.correct.get(name, False)
        return None, False

    def is_done(self, state: MathState) -> bool:
        return state.agreed or state.turn >= self.max_turns

    def success(self, state: MathState) -> bool:
        return self.final_answer(state)[1]

    def _check_agent(self, agent: str) -> None:
        names = [a.name for a in self.agents]
        if agent not in names:
            raise ValueError(f"unknown agent {agent!r}; this math workflow's agents are {' and '.join(names)}")

    def close(self) -> None:
        """Stop the sandbox workers."""
        self.runner.close()
