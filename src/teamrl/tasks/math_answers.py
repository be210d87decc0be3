"""Checking a model's math answer against the ground truth, with ``math-verify``.

``math-verify`` (``pip install math-verify``) parses LaTeX and plain expressions into
SymPy and compares them symbolically, so ``\\frac{1}{2}``, ``0.5`` and ``1/2`` agree.
This module applies the math verifier contract (``docs/verifiers/math.md``): the one
answer of a response (:func:`teamrl.tasks.math_parsing.locate_final_answer`), refused when it
hedges or lists candidates (:func:`teamrl.tasks.math_shape.answer_refusal`), then the
whole of it, and nothing else of the response, compared by ``math-verify``. A refusal,
a parse failure, an error and a timeout all count as no match.

Timeouts. SymPy can hang on hostile input such as ``9^{9^{9^9}}``. ``math-verify``
guards against that with ``signal.alarm``, which only works in the main thread of
the main interpreter, and which would silently cancel an alarm the caller had set.
So :func:`answers_match` uses ``math-verify``'s own timeout only in the main thread
when no interval timer is pending; anywhere else (rollout worker threads) it runs the
check in a helper subprocess that is killed and restarted when it overruns.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import math
import os
import re
import select
import subprocess
import sys
import threading
from typing import Any

from teamrl.tasks.math_echo import echo_refusal, resolve_answer_form
from teamrl.tasks.math_shape import answer_refusal, ascii_digits, join_digit_groups, strip_unit_words
from teamrl.tasks.math_parsing import extract_final_answer

__all__ = ["answer_equals", "answers_match", "math_reward"]

logger = logging.getLogger(__name__)

Question = tuple[str, str, str] | None  # (question, source, answer_form): the echo and form rules apply
_INSTALL_HINT = "math answer checking needs math-verify: pip install math-verify (or pip install 'teamrl[math]')"


def _math_verify() -> Any:
    """Import math_verify lazily, so ``import teamrl`` works without the math extra."""
    try:
        import math_verify
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return math_verify


def _latex_form(expr: str) -> str:
    """One answer as one inline-math string for math-verify.

    An escaped dollar (``\\$36``, common in MATH ground truths) and any other ``$`` are
    dropped, whitespace collapsed (math-verify's regexes backtrack on long runs), and
    thousands groups joined (math-verify reads ``1\\,000`` as ``1*0``).
    """
    expr = " ".join(expr.replace("\\$", "").replace("$", " ").split())
    return f"${join_digit_groups(expr)}$"


_PERCENT_RE = re.compile(r"\\?%")
_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")


def _normalize_text(answer: str) -> str:
    """Loose string form for answers SymPy cannot represent, like ``\\text{Evelyn}``."""
    answer = _TEXT_CMD_RE.sub(r"\1", answer)
    answer = re.sub(r"\\[,;:! ]|[\s$]", "", answer)
    return answer.rstrip(".").lower()


def _parse(expr: str, timeout: int | None) -> list[Any]:
    # LaTeX extraction only, on the whole of one answer: math-verify never picks a part of it.
    mv = _math_verify()
    return mv.parse(_latex_form(expr), extraction_config=[mv.LatexExtractionConfig()], parsing_timeout=timeout)


@functools.lru_cache(maxsize=4096)
def _parse_gold(ground_truth: str, timeout: int | None) -> tuple[Any, ...]:
    # Ground truths are reused across the many samples of a group, so cache them.
    return tuple(_parse(ground_truth, timeout))


def _match_in_process(
    prediction: str, ground_truth: str, timeout: int | None, extract: bool = True, question: Question = None
) -> bool:
    answer = extract_final_answer(prediction) if extract else prediction.strip()
    # "４２" is 42 to the workflow's exact comparison; math-verify reads ASCII digits only.
    answer = ascii_digits(answer) if answer else answer
    if not answer or answer_refusal(answer, ground_truth) is not None:
        return False
    if question is not None and echo_refusal(answer, question[0], ground_truth, question[1], question[2]) is not None:
        return False
    if "%" in answer and "%" not in ground_truth:
        # math-verify reads "50\\%" as both 50 and 0.5, so it would match two golds; one reading only.
        answer = _PERCENT_RE.sub("", answer)
    gold = list(_parse_gold(ground_truth, timeout))
    pred = _parse(strip_unit_words(answer, ground_truth), timeout)
    if gold and pred and _math_verify().verify(gold, pred, timeout_seconds=timeout):
        return True
    # Answers SymPy turns into nonsense (names, words) still match by their text.
    gold_text = _normalize_text(ground_truth)
    return bool(gold_text) and _normalize_text(answer) == gold_text


def _signal_timeout_usable() -> bool:
    """Whether math-verify's SIGALRM timeout can run here without side effects."""
    if threading.current_thread() is not threading.main_thread():
        return False
    import signal

    # math-verify cancels any pending alarm when it finishes; never clobber the caller's.
    return signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


class _IsolatedChecker:
    """A helper process that runs checks and can be killed when one hangs.

    Talks JSON lines over pipes to ``python -c`` (not ``multiprocessing``, whose
    spawn mode re-imports the caller's ``__main__`` script). In the child the
    check runs in its main thread, so math-verify's own timeouts also work there;
    the parent's deadline is the backstop for hangs inside C code.
    """

    _STARTUP_TIMEOUT_S = 120.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._owner_pid = os.getpid()

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's helper (its pipes and a lock held at fork)."""
        self._lock = threading.Lock()
        if self._proc is not None:
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            # The helper belongs to the parent; mark it settled so this copy never waits on it.
            self._proc.returncode = -1
        self._proc = None
        self._owner_pid = os.getpid()

    def close(self) -> None:
        """Stop the helper process, if one is running (also done at interpreter exit)."""
        with self._lock:
            if self._proc is not None and self._owner_pid == os.getpid():
                self._kill(self._proc)
            self._proc = None

    def _start(self) -> subprocess.Popen[str]:
        src_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = f"import sys; sys.path.insert(0, {src_root!r}); from teamrl.tasks.math_answers import _worker_main; _worker_main()"
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        reply = self._read(proc, self._STARTUP_TIMEOUT_S)
        if reply is None or reply.get("ready") is not True:
            self._kill(proc)
            error = (reply or {}).get("error", "no reply within the startup timeout")
            if reply is not None and "math-verify" in str(error):
                raise ImportError(error)
            raise RuntimeError(f"math answer checker subprocess failed to start: {error}")
        return proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, Any] | None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = proc.stdout.readline()
        try:
            reply = json.loads(line) if line else None
        except json.JSONDecodeError:
            return None
        return reply if isinstance(reply, dict) else None

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def check(
        self, prediction_text: str, ground_truth: str, timeout_s: float, extract: bool = True, question: Question = None
    ) -> bool:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None
            timeout = max(1, math.ceil(timeout_s))
            try:
                proc.stdin.write(json.dumps([prediction_text, ground_truth, timeout, extract, question]) + "\n")
                proc.stdin.flush()
                # The gold parse, the answer's parse and the verify may each use
                # the child's own timeout before it gives up; allow all of them plus slack.
                reply = self._read(proc, 8 * timeout + 5)
            except (OSError, ValueError):
                reply = None
            if reply is not None and "error" in reply:
                logger.warning("math answer check failed in the helper process: %s", reply["error"])
                return False
            if reply is None or "match" not in reply:
                logger.warning("math answer check overran %ss or crashed; counting it as no match", timeout_s)
                self._kill(proc)
                self._proc = None
                return False
            return bool(reply["match"])


def _worker_main() -> None:
    """Entry point of the helper process: one JSON request per line on stdin."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the reply channel
    try:
        _math_verify()
    except ImportError as exc:
        out.write(json.dumps({"error": str(exc)}) + "\n")
        return
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            prediction_text, ground_truth, timeout, extract, question = json.loads(line)
            match = _match_in_process(
                prediction_text, ground_truth, timeout, bool(extract), None if question is None else tuple(question)
            )
        except Exception as exc:  # a bad request must not take the worker down
            out.write(json.dumps({"error": repr(exc)}) + "\n")
            continue
        out.write(json.dumps({"match": match}) + "\n")


_ISOLATED = _IsolatedChecker()
atexit.register(_ISOLATED.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ISOLATED.forget_after_fork)


def _check(
    prediction: str, ground_truth: str | int, timeout_seconds: float | None, extract: bool, question: Question = None
) -> bool:
    if isinstance(ground_truth, int) and not isinstance(ground_truth, bool):
        ground_truth = str(ground_truth)
    if not isinstance(prediction, str) or not isinstance(ground_truth, str):
        raise TypeError(
            f"math answer checks need str inputs, got {type(prediction).__name__} and {type(ground_truth).__name__}"
        )
    _math_verify()  # fail with the install hint before doing any work
    if not ground_truth.strip():
        raise ValueError("ground_truth is empty")
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ValueError(f"timeout_seconds must be positive or None, got {timeout_seconds}")
    if not prediction.strip():
        return False
    if question is not None and not isinstance(question[0], str):
        raise TypeError(f"question must be a str, got {type(question[0]).__name__}")
    if timeout_seconds is None:
        return _match_in_process(prediction, ground_truth, None, extract, question)
    if _signal_timeout_usable():
        return _match_in_process(prediction, ground_truth, max(1, math.ceil(timeout_seconds)), extract, question)
    return _ISOLATED.check(prediction, ground_truth, timeout_seconds, extract, question)


def answers_match(
    prediction_text: str,
    ground_truth: str | int,
    timeout_seconds: float | None = 5.0,
    question: str | None = None,
    source: str = "",
    answer_form: str = "auto",
) -> bool:
    """Whether the one final answer of the response ``prediction_text`` equals ``ground_truth``.

    The contract is ``docs/verifiers/math.md``: the answer is found by
    :func:`teamrl.tasks.math_parsing.locate_final_answer` (agreeing boxes, else the last
    answer line, else a last line that is an answer); hedges, candidate lists, negations,
    ranges and the like are refused by :func:`teamrl.tasks.math_shape.answer_refusal`
    (the gold decides which shapes are expected); then math-verify compares the whole
    answer with the gold symbolically (fractions, LaTeX, ``18.0``, ``$18``, percentages,
    degrees, units dropped), and answers SymPy cannot model (``\\text{Evelyn}``) match by
    normalized text.

    ``timeout_seconds`` bounds each parse and comparison, and a check that overruns is
    no match; ``None`` disables the bound (only for trusted input). Outside the main
    thread the check runs in a helper subprocess so that it can still be bounded.
    Raises ``ImportError`` if math-verify is not installed and ``TypeError`` for
    non-string input.

    With ``question`` (and the ``source`` it comes from), the answer must also be in the final form
    the question asks for (:func:`teamrl.tasks.math_echo.echo_refusal`): not the question's own
    expression however respelled, a number where the gold is one (``answer_form``), a decimal where
    a decimal is asked, and none of the question's operations (a floor, a root...) left undone.
    Without it only the value is compared.

    >>> answers_match("so the total is \\\\boxed{\\\\frac{6}{4}}", "1.5")
    True
    >>> answers_match("The answer is 18.", "18"), answers_match("$18.00", "18")
    (True, True)
    >>> answers_match("The answer is 19.", "18"), answers_match("The answer is 17 (or maybe 18).", "18")
    (False, False)
    >>> answers_match("The answer is $\\sqrt{81}$.", "9"), answers_match("The answer is $\\sqrt{81}$.", "9", question="Compute $\\sqrt{81}$.")
    (True, False)
    """
    resolve_answer_form(answer_form)  # raises on an unknown form
    asked = None if question is None else (question, source, answer_form)
    return _check(prediction_text, ground_truth, timeout_seconds, extract=True, question=asked)


def answer_equals(answer: str, ground_truth: str | int, timeout_seconds: float | None = 5.0) -> bool:
    """Like :func:`answers_match` for an answer already taken out of its response
    (``reasoner_answer``'s): the shape rules and the comparison, without the search.

    >>> answer_equals("x = 5", "5"), answer_equals("5, 6", "5")
    (True, False)
    """
    return _check(answer, ground_truth, timeout_seconds, extract=False)


def math_reward(text: str, truth: str | int, timeout_seconds: float | None = 5.0) -> float:
    """1.0 if the response's final answer matches ``truth``, else 0.0.

    >>> math_reward("4 + 3 = 7, so the answer is 7.", 7)
    1.0
    """
    return 1.0 if answers_match(text, truth, timeout_seconds=timeout_seconds) else 0.0
