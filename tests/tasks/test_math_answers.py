"""Tests for teamrl.tasks.math_answers (needs math-verify; skipped with a reason without it)."""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

pytest.importorskip("math_verify", reason="math-verify not installed: pip install math-verify")

from teamrl.tasks import math_answers  # noqa: E402
from teamrl.tasks.math_answers import answers_match, math_reward  # noqa: E402


@pytest.mark.parametrize(
    ("prediction", "truth"),
    [
        (r"\boxed{18}", "18"),
        ("18.0", "18"),
        ("$18", "18"),
        (r"\$18", "18"),
        ("The answer is 18.", "18"),
        ("18", "18"),
        ("Janet makes 9 * 2 = $18 per day.\n#### 18", "18"),
        ("**Final Answer:** 18 dollars", "18"),
        ("The answer is 1,000 dollars.", "1000"),
        (r"so it is \boxed{\frac{6}{4}}", "1.5"),
        (r"The answer is $\dfrac{3}{2}$.", r"\frac{3}{2}"),
        ("3/2", r"\frac{3}{2}"),
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
        ("p - q", "p - q"),
        (r"\boxed{90^\circ}", r"90^\circ"),
        ("90", r"90^\circ"),
        ("The answer is Evelyn.", r"\text{Evelyn}"),
        (r"\boxed{\$36}", r"\$36"),
        ("25", "025"),
        ("I got 19 first, then fixed it: the answer is 18.", "18"),
    ],
)
def test_accepts_equivalent_answers(prediction: str, truth: str) -> None:
    assert answers_match(prediction, truth)


@pytest.mark.parametrize(
    ("prediction", "truth"),
    [
        ("The answer is 19.", "18"),
        (r"\boxed{17}", "18"),
        ("18.5", "18"),
        ("I first thought 18 but the answer is 19.", "18"),
        (r"The answer is 18 but \boxed{19}", "18"),
        ("q - p", "p - q"),
        (r"\boxed{\frac{2}{3}}", r"\frac{3}{2}"),
        ("The answer is Navin.", r"\text{Evelyn}"),
        ("", "18"),
        ("I don't know.", "18"),
    ],
)
def test_rejects_wrong_answers(prediction: str, truth: str) -> None:
    assert not answers_match(prediction, truth)


def test_math_reward_and_int_truth() -> None:
    assert math_reward("so 3 + 4 = 7", 7) == 1.0
    assert math_reward("The answer is 8.", 7) == 0.0


def test_bad_arguments_fail_loudly() -> None:
    with pytest.raises(TypeError, match="str"):
        answers_match(None, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        answers_match("1", "  ")
    with pytest.raises(ValueError, match="timeout_seconds"):
        answers_match("1", "1", timeout_seconds=0)


def test_missing_math_verify_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)  # makes `import math_verify` fail
    with pytest.raises(ImportError, match="pip install math-verify"):
        answers_match("1", "1")


# Passes the shape rules (a power tower would not), but SymPy takes seconds on it.
SLOW = r"\boxed{\binom{99999}{49999}}"


def test_hostile_input_times_out_in_main_thread() -> None:
    start = time.monotonic()
    assert not answers_match(r"\boxed{9^{9^{9^{9}}}}", "5", timeout_seconds=1)  # refused before SymPy
    assert not answers_match(SLOW, "5", timeout_seconds=1)
    assert time.monotonic() - start < 10


def test_works_and_times_out_in_worker_thread() -> None:
    results: dict[str, object] = {}

    def work() -> None:
        results["right"] = answers_match(r"The answer is $\frac{1}{2}$.", "0.5")
        results["wrong"] = answers_match("The answer is 3.", "0.5")
        start = time.monotonic()
        results["hostile"] = answers_match(SLOW, "5", timeout_seconds=1)
        results["hostile_s"] = time.monotonic() - start
        results["after"] = answers_match(r"\boxed{7}", "7")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert results["right"] is True and results["wrong"] is False
    assert results["hostile"] is False and results["hostile_s"] < 20  # type: ignore[operator]
    assert results["after"] is True


def test_pending_alarm_of_caller_is_left_alone() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 60)
        assert answers_match(r"\boxed{18}", "18")
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert remaining > 30, "math-verify must not cancel the caller's alarm"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not fired


def test_isolated_checker_recovers_after_kill() -> None:
    checker = math_answers._IsolatedChecker()
    assert checker.check(r"\boxed{2}", "2", 5)
    assert checker._proc is not None
    checker._proc.kill()
    checker._proc.wait()
    assert checker.check(r"\boxed{3}", "3", 5)  # a dead helper is restarted
