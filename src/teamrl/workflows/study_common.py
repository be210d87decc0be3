"""What the study's four workflows share: the base of their construction, outcome terms, parsers.

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

from teamrl.tasks.parsing import extract_boxed
from teamrl.workflows.base import Agent, Outcome
from teamrl.workflows.study_domains import SHOWN_CHARS, Answer, Domain

SHORT_TAGS = {"aggregator": "agg", "evaluator": "ev", "orchestrator": "orc", "synthesizer": "syn",
              "generator": "g"}
_INDEXED_RE = re.compile(r"^([a-z])[a-z]*_(\d+)$")
_CHOICE_RE = re.compile(r"^\s*(?:answer|choice|pick)?\s*[:#]?\s*(\d+)\s*\.?\s*$", re.IGNORECASE)
_CHOICE_MARKER_RE = re.compile(r"(?:answer|choice|pick|choose|select)\w*\s*(?:is|:|#)?\s*#?(\d+)\b", re.IGNORECASE)
_VERDICT_WORDS = {"correct": True, "c": True, "ok": True, "yes": True, "right": True,
                  "incorrect": False, "i": False, "wrong": False, "no": False, "bad": False}
_NUMBERED_RE = re.compile(r"(?:^|\n)\s*(?:strategy\s*)?(\d+)\s*[.):]\s*", re.IGNORECASE)


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


def parse_choice(text: str, n: int) -> int | None:
    """The index (0..n-1) an aggregator picked: `\\boxed{N}`, a bare `N` (compact form) or "answer N".

    None for anything else, including an index out of range.
    """
    if not isinstance(text, str):
        return None
    boxed = extract_boxed(text)
    candidates = [boxed] if boxed is not None else []
    candidates.append(text.strip().splitlines()[-1] if text.strip() else "")
    for candidate in candidates:
        found = _CHOICE_RE.match(candidate.replace("\\#", "#"))
        if found:
            return int(found.group(1)) if int(found.group(1)) < n else None
    marked = _CHOICE_MARKER_RE.findall(text)
    if marked and int(marked[-1]) < n:
        return int(marked[-1])
    return None


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """(verdict, feedback) of an evaluator: `\\boxed{Correct}` / `\\boxed{Incorrect}` anywhere, or a
    first word such as Correct / Incorrect / C / I / ok / no (compact form). The feedback is the
    text without the verdict; the verdict is None when none is found."""
    if not isinstance(text, str):
        return None, ""
    boxed = extract_boxed(text)
    if boxed is not None:
        verdict = _VERDICT_WORDS.get(boxed.strip().strip(".!").lower())
        if verdict is not None:
            return verdict, re.sub(r"\\boxed\s*\{[^{}]*\}", "", text).strip()
    head, _, rest = text.strip().partition(" ")
    first_line, _, more = head.partition("\n")
    verdict = _VERDICT_WORDS.get(first_line.strip(".,:;!").lower())
    if verdict is None:
        return None, text.strip()
    return verdict, (more + " " + rest).strip()


def parse_strategies(text: str, n: int) -> tuple[list[str], bool]:
    """(n strategies, well formed) of an orchestrator: numbered items ("1. ...", "Strategy 2: ..."),
    else non-empty lines, else words. Missing ones are ''; well formed when n were found."""
    if not isinstance(text, str):
        return [""] * n, False
    parts = [p.strip() for p in _NUMBERED_RE.split(text)]
    if len(parts) >= 3:
        # split() alternates text and the captured item numbers: keep the items' text.
        items = [parts[i + 1] for i in range(1, len(parts) - 1, 2)]
    else:
        items = []
    if len(items) < n:
        items = [line.strip() for line in text.splitlines() if line.strip()]
    if len(items) < n:
        items = [word for word in re.split(r"[\s,;]+", text.strip()) if word]
    found = [item[:200] for item in items if item][:n]
    return found + [""] * (n - len(found)), len(found) == n


class StudyWorkflow:
    """Construction, validation and bookkeeping shared by the study workflows (not a workflow itself)."""

    parallel = False

    def __init__(self, domain: Domain, agents: list[Agent], max_turns: int, prompt_style: str,
                 format_bonus: float) -> None:
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
