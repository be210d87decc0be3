"""What the four flow workflows share: the base of their construction, outcome terms, parsers.

Outcome terms (stable names, read per role by the diagnostics):

    format_ok        1.0 when the response had the role's expected form, else 0.0 (every agent)
    format           the local format term: +format_bonus when well formed, -format_bonus otherwise
    score            the graded score of the answer the candidate stands for (code: pass ratio)
    correct          1.0 when that answer is correct (score 1.0): an answerer's own answer; the
                     team's final answer for an aggregator / synthesizer; the judged answer for an
                     evaluator
    any_correct      aggregator / synthesizer: 1.0 when at least one answer it chose from was correct
    verdict_correct  evaluator: 1.0 when its verdict matches the truth (Correct on a correct answer,
                     Incorrect on a wrong one); 0.0 also when it gave no verdict
"""

from __future__ import annotations

import re
from typing import Any

from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.flow_domains import SHOWN_CHARS, Answer, Domain

SHORT_TAGS = {"aggregator": "agg", "evaluator": "ev", "orchestrator": "orc", "synthesizer": "syn", "generator": "g"}
_INDEXED_RE = re.compile(r"^([a-z])[a-z]*_(\d+)$")
# Every quantifier below is possessive (or bounded) and every search starts at a word boundary, so
# runs of spaces, newlines or repeated marker words cost one pass: a model's output can be 200k
# characters of anything.
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*+\{([^{}]*+(?:\{[^{}]*+\}[^{}]*+)*+)\}")
_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*+\{([^{}]*+)\}")
# A choice on its own: "1", "#2", "answer: 0", "Choice 1." (compact form, or a boxed content).
_CHOICE_RE = re.compile(r"(?:(?:answer|choice|pick|candidate)\b\s*+)?+(?:\\?#|:)?+\s*+(\d{1,6}+)\.?+", re.IGNORECASE)
# A decision in prose: "I choose answer 0", "my choice is 2", "select #1", "pick candidate 2".
_DECISION_RE = re.compile(
    r"\b(?:choose|chose|select|pick|choice)\w*+\s*+(?:is\b\s*+)?+(?:(?:answer|candidate|number|option)\b\s*+)?+"
    r"(?:\\?#|:)?+\s*+(\d{1,6}+)\b",
    re.IGNORECASE,
)
# A decision followed by another index ("I choose 0 or 1", "pick answer 1/2", "choose 0, 2"): a hedge.
_CHOICE_HEDGE_RE = re.compile(
    r"\s*+(?:,|/|\bor\b|\band\b)\s*+(?:(?:answer|candidate|number|option)\b\s*+)?+(?:\\?#)?+\d", re.IGNORECASE
)
# After a decision, another candidate named ("answer 2", "#0", "(or 0)", "(2 is also fine)", "or 0"): an
# alternative offered unless it is plainly rejected. Bounded repeats only, so 200k characters stay linear.
_MENTION_RE = re.compile(
    r"(?:\b(?:answer|candidate|option|number|choice)\b\s{0,20}+(?:\\?#)?+|\\?#|\(\s{0,20}+(?:or\b\s{0,20}+)?+|\bor\b[^\d.;!?\n]{0,30}+)"
    r"(\d{1,6}+)\b|\b(\d{1,6}+)\s{1,20}+(?=(?:is|are|would|could|works?|also|too)\b)",
    re.IGNORECASE,
)
# "answer 0 is wrong": the one way to name another candidate after a decision without offering it.
_REJECTION_RE = re.compile(r"\s{0,20}+(?:is|was)\s{1,20}+(?:wrong|incorrect)\b", re.IGNORECASE)
# Words that turn a rejection back into an alternative ("not wrong", "wrong but also fine").
_ALTERNATIVE_WORDS = frozenset(
    "also fine good ok okay correct right valid acceptable works work equally either or maybe perhaps "
    "possibly not isn't no but though however could might would plausible possible again".split()
)
_CLAUSE_END_RE = re.compile(r"[.;!?\n]")
_WORD_RE = re.compile(r"[a-z]++(?:'[a-z]++)?+", re.IGNORECASE)
_VERDICT_WORDS = {
    "correct": True,
    "c": True,
    "ok": True,
    "yes": True,
    "right": True,
    "incorrect": False,
    "i": False,
    "wrong": False,
    "no": False,
    "bad": False,
}
# First words that are a verdict even in a sentence ("Correct, the sum checks"); "Right", "No",
# "ok" or "I" open ordinary sentences too, so they count only as the compact reply's first word.
_STRONG_VERDICTS = {"correct": True, "incorrect": False, "wrong": False}
_HEAD_STRIP = ".,:;!*`#\"'"
# "ok/no", "Correct or Incorrect", "yes | no": a verdict and its opposite offered as alternatives.
_HEDGE_RE = re.compile(r"[a-z]++[\s*.,]{0,3}(?:/|\||\bor\b|\\)[\s*.,]{0,3}([a-z]++)", re.IGNORECASE)
_VERDICT_LABEL_RE = re.compile(r"(?:verdict|judgement|judgment|evaluation)\s*+[:=-]\s*+", re.IGNORECASE)
_NUMBERED_RE = re.compile(r"(?:^|\n)[ \t]*+(?:strategy[ \t]*+)?(\d{1,3}+)[ \t]*+[.):][ \t]*+", re.IGNORECASE)


def compact_tag(agent: str) -> str:
    """The short name a compact prompt starts with: generator_1 -> g1, aggregator -> agg."""
    indexed = _INDEXED_RE.match(agent)
    return f"{indexed.group(1)}{indexed.group(2)}" if indexed else SHORT_TAGS.get(agent, agent)


def format_terms(ok: bool, bonus: float) -> tuple[float, dict[str, float]]:
    """(local format term, its terms) of a response that is well formed or not."""
    local = bonus if ok else -bonus
    return local, {"format_ok": float(ok), "format": local}


def answer_outcome(score: float, answer: Answer, bonus: float) -> Outcome:
    """An answerer's candidate: team = its answer's score, local = the format term."""
    local, terms = format_terms(answer.well_formed, bonus)
    terms |= {"score": score, "correct": float(score >= 1.0)}
    return Outcome(score, local, terms, {"answer": (answer.value or "")[:200]})


def _boxed(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}`` / ``\\fbox{...}`` (one nested brace level), ``\\text{}`` unwrapped."""
    return [_TEXT_CMD_RE.sub(r"\1", m.group(1)).strip() for m in _BOXED_RE.finditer(text)]


def _one(values: list[int], n: int) -> int | None:
    """The single index all `values` name, if it is in range; None for none, several or out of range."""
    if not values or any(v != values[0] for v in values):
        return None
    return values[0] if values[0] < n else None


def _choice(candidate: str) -> int | None:
    found = _CHOICE_RE.fullmatch(candidate.strip())
    return int(found.group(1)) if found else None


def parse_choice(text: str, n: int) -> int | None:
    """The index (0..n-1) an aggregator picked, or None.

    One vote per response, stated one way, tried in order: `\\boxed{N}` (every box of the response
    must name the same N: two boxes naming different candidates are no vote); else a last line that
    is only the choice (`N`, `#N`, `answer: N`: the compact form; other lines that are only a choice
    must name the same N); else decisions in prose ("I choose answer 0", "my choice is 2"), which
    must all name the same N and none be followed by another index ("I choose 0 or 1"), nor by another
    candidate named after it unless plainly rejected ("I pick 0, but answer 2 is also fine", "my choice is
    2 (or 0)" are hedges; "I choose answer 1, and answer 0 is wrong" is a vote). "The answer is 2" is not a
    choice (it reads as an answer's value). None also for an index out of range; never raises.

    >>> parse_choice("Answer 0 and answer 2 disagree.\\n\\\\boxed{1}", 3), parse_choice("\\\\boxed{0} \\\\boxed{1}", 3)
    (1, None)
    """
    if not isinstance(text, str):
        return None
    boxed = _boxed(text)
    if boxed:
        picks = [_choice(b) for b in boxed]
        return None if None in picks else _one(picks, n)  # type: ignore[arg-type]
    lines = text.strip().splitlines()
    last = _choice(lines[-1]) if lines else None
    if last is not None:  # every line that is only a choice must name the same one ("0\n1" is a hedge)
        return _one([c for c in map(_choice, lines) if c is not None], n)
    decisions = list(_DECISION_RE.finditer(text))
    if any(_CHOICE_HEDGE_RE.match(text, m.end()) for m in decisions):
        return None
    picked = _one([int(m.group(1)) for m in decisions], n)
    if picked is not None and _offers_another(text, decisions[0].end(), picked):
        return None
    return picked


def _offers_another(text: str, start: int, picked: int) -> bool:
    """Whether text after a prose decision names another candidate without plainly rejecting it.

    "I pick 0, but answer 2 is also fine" and "my choice is 2 (or 0)" offer a second vote; "I choose
    answer 1, and answer 0 is wrong" does not. Each clause (up to . ; ! ? or a newline) is read once.
    """
    for clause in _CLAUSE_END_RE.split(text[start:]):
        others = [m for m in _MENTION_RE.finditer(clause) if int(m.group(1) or m.group(2)) != picked]
        if not others:
            continue
        if any(_REJECTION_RE.match(clause, m.end()) is None for m in others):
            return True
        if {w.lower() for w in _WORD_RE.findall(clause)} & _ALTERNATIVE_WORDS:
            return True
    return False


def _head_verdict(text: str) -> tuple[bool | None, str, bool]:
    """(verdict, rest, strong) of a response's first word; strong: a word that is a verdict in any sentence."""
    stripped = text.strip()
    label = _VERDICT_LABEL_RE.match(stripped)
    first_line, _, more = stripped[label.end() if label else 0 :].partition("\n")
    head, _, rest = first_line.strip().partition(" ")
    word = head.strip(_HEAD_STRIP).lower()
    verdict = _VERDICT_WORDS.get(word)
    if len(word) == 1 and rest.strip():
        verdict = None  # "I think it is fine": a sentence, not the compact verdict I
    if verdict is None:
        return None, text.strip(), False
    hedge = _HEDGE_RE.match(first_line.strip()[:100])
    if hedge and _VERDICT_WORDS.get(hedge.group(1).lower()) is (not verdict):
        return None, text.strip(), False  # "ok/no", "Correct or Incorrect"
    return verdict, (rest + "\n" + more).strip(), word in _STRONG_VERDICTS


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """(verdict, feedback) of an evaluator; the verdict is None when there is none or it says both.

    One verdict per response, stated one way: `\\boxed{Correct}` / `\\boxed{Incorrect}` anywhere
    (every boxed verdict must agree, and a first word "Correct"/"Incorrect" must not contradict
    it), else the first word of the reply (compact form: Correct / Incorrect / ok / no / yes /
    wrong / C / I, optionally after "Verdict:"; the single letters only as the whole first line).
    A first word offered with its opposite ("ok/no", "Correct or Incorrect") is no verdict. The
    feedback is the text without the verdict. Never raises.

    >>> parse_verdict("no 18-6 is 12"), parse_verdict("Correct or Incorrect")[0]
    ((False, '18-6 is 12'), None)
    """
    if not isinstance(text, str):
        return None, ""
    boxed = [_VERDICT_WORDS.get(b.strip(".!").lower()) for b in _boxed(text)]
    stated = [v for v in boxed if v is not None]
    if stated:
        head, _, strong = _head_verdict(text)
        if any(v != stated[0] for v in stated) or (strong and head is not stated[0]):
            return None, text.strip()
        return stated[0], _BOXED_RE.sub("", text).strip()
    verdict, feedback, _ = _head_verdict(text)
    return verdict, feedback


def _items(parts: list[str]) -> list[str]:
    return [p.strip()[:200] for p in parts if any(ch.isalnum() for ch in p)]


def parse_strategies(text: str, n: int) -> tuple[list[str], bool]:
    """(n strategies, well formed) of an orchestrator.

    The strategies are numbered items ("1. ...", "Strategy 2: ...") when the text numbers any;
    else its non-empty lines when it has several; else the words of its one line (compact form,
    `l r l`). Items without a letter or digit do not count. Well formed when exactly n were found
    (more is not a plan for n workers: a long ramble is not n strategies); the first n are used
    either way, missing ones are ''.

    >>> parse_strategies("l r l", 3), parse_strategies("l r l r", 3)[1]
    ((['l', 'r', 'l'], True), False)
    """
    if not isinstance(text, str):
        return [""] * n, False
    parts = _NUMBERED_RE.split(text)
    lines = _items(text.splitlines())
    if len(parts) >= 3:
        # split() alternates text and the captured item numbers: keep the items' text.
        items = _items([parts[i + 1] for i in range(1, len(parts) - 1, 2)])
    elif len(lines) > 1:
        items = lines
    else:
        items = _items(re.split(r"[\s,;]+", text.strip()))
    found = items[:n]
    return found + [""] * (n - len(found)), len(items) == n


class FlowWorkflow(Workflow):
    """Construction, validation and bookkeeping shared by the flow workflows (not a workflow itself)."""

    parallel = False

    def __init__(
        self, domain: Domain, agents: list[Agent], max_turns: int, prompt_style: str, format_bonus: float
    ) -> None:
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if format_bonus < 0:
            raise ValueError(f"format_bonus must be >= 0, got {format_bonus}")
        self.domain, self.agents, self.max_turns = domain, agents, max_turns
        self.prompt_style, self.format_bonus = prompt_style, format_bonus

    @property
    def compact(self) -> bool:
        return self.prompt_style == "compact"

    def question(self, state: Any) -> str:
        return self.domain.question(state.problem, self.prompt_style)

    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        return self.apply_many(agent, [state], [response])[0]

    def apply_many(self, agent: str, states: list[Any], responses: list[str]) -> list[Outcome]:
        raise NotImplementedError

    def graded(self, states: list[Any], responses: list[str]) -> list[tuple[Answer, float]]:
        """(answer, score) of each response on its state's problem, graded in one domain call."""
        answers = [self.domain.parse(r, s.problem) for s, r in zip(states, responses)]
        return list(zip(answers, self.domain.grade([s.problem for s in states], answers)))

    def check_agent(self, agent: str) -> Agent:
        for a in self.agents:
            if a.name == agent:
                return a
        names = ", ".join(a.name for a in self.agents)
        raise ValueError(f"unknown agent {agent!r}; this {type(self).__name__}'s agents are {names}")

    def close(self) -> None:
        """Stop the domain's sandbox workers."""
        self.domain.close()


def clean(responses: list[Any]) -> list[str]:
    """Responses as strings (anything else reads as an empty response)."""
    return [r if isinstance(r, str) else "" for r in responses]


def compact_answers(answers: list[Answer | None]) -> str:
    """`0:20 1:4 2:?`: numbered answers on one line, for compact prompts."""
    return " ".join(f"{i}:{a.shown if a is not None else '?'}" for i, a in enumerate(answers))


def chat_answers(label: str, texts: list[str], answers: list[Answer | None]) -> str:
    """Numbered responses with their parsed answers, for chat prompts."""
    blocks = []
    for i, (text, answer) in enumerate(zip(texts, answers)):
        final = answer.value if answer is not None and answer.value is not None else "none found"
        # A program is the response itself; a short final answer is worth repeating after its working.
        tail = f"\n(its final answer: {final})" if len(final) <= 80 else ""
        blocks.append(f"{label} {i}:\n{text.strip()[-SHOWN_CHARS:]}{tail}")
    return "\n\n".join(blocks)
