"""The task the tool-using team plays: arithmetic word problems whose numbers are too large to work out
mentally (a 3-digit by 2-digit product, or the sum of three 3-digit numbers), a `calculate` tool that
evaluates an arithmetic expression safely, and the rewards. Used by tool_team.py (and its test).

The answer is checked against the true value the program computes from the instance, never against
what the tool returned: a solver that calls the tool with the wrong expression gets a wrong result.
"""

from __future__ import annotations

import ast
import json
import operator
import random
import re

CALCULATE = {"type": "function", "function": {
    "name": "calculate",
    "description": "Evaluate an arithmetic expression of integers with + - * / and parentheses",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}

_PRODUCTS = [
    "A warehouse has {a} crates with {b} bottles in each crate. How many bottles are there?",
    "A school orders {b} boxes of {a} pencils each. How many pencils does it order?",
]
_SUMS = [
    "A farm picked {a} apples on Monday, {b} on Tuesday and {c} on Wednesday. How many apples in total?",
    "A library lent {a} books in May, {b} in June and {c} in July. How many books did it lend?",
]


def instances(split: str, index: int) -> dict:
    """Task instance `index` of `split` (teamrl's `task.instances`): a question and its true value."""
    rng = random.Random(f"tool-{split}-{index}")
    if rng.random() < 0.5:
        a, b = rng.randint(101, 999), rng.randint(11, 99)
        return {"question": rng.choice(_PRODUCTS).format(a=a, b=b), "answer": a * b}
    a, b, c = (rng.randint(101, 999) for _ in range(3))
    return {"question": rng.choice(_SUMS).format(a=a, b=b, c=c), "answer": a + b + c}


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> int | float:
    """The tool: an expression of integers with + - * / and parentheses, parsed with `ast` (no eval).

    >>> calculate("386 * 47")
    18142
    >>> calculate("(1 + 2) * 3 - 4 / 2")
    7.0
    >>> calculate("__import__('os')")
    Traceback (most recent call last):
    ValueError: not an arithmetic expression of integers: __import__('os')
    """
    if len(expression) > 200:
        raise ValueError("expression longer than 200 characters")

    def value(node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**12:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = value(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        raise ValueError(f"not an arithmetic expression of integers: {expression}")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return value(tree.body)
    except (SyntaxError, ZeroDivisionError, RecursionError) as err:
        raise ValueError(f"not an arithmetic expression of integers: {expression}") from err


def run_tool(arguments: str) -> tuple[str | None, int | float | None, str]:
    """Execute a `calculate` call from its JSON arguments: (expression, value, the text sent back).
    A call the tool cannot run gets an error text and value None."""
    try:
        expression = json.loads(arguments).get("expression")
        if not isinstance(expression, str):
            return None, None, "error: give the expression as a string"
        result = calculate(expression)
    except (ValueError, AttributeError) as err:  # AttributeError: arguments that are not an object
        return None, None, f"error: {err}"
    shown = int(result) if float(result).is_integer() else round(result, 6)
    return expression, result, str(shown)


def last_number(text: str | None) -> int | None:
    """The last integer in a text (commas between digit groups allowed), or None."""
    numbers = re.findall(r"-?\d[\d,]*", text or "")
    return int(numbers[-1].replace(",", "")) if numbers else None


def verdict(reply: str | None) -> tuple[str, int | None]:
    """The checker's reply: ("correct", n) when it gives a number, else ("accept", None), else ("reject", None)."""
    number = last_number(reply)
    if number is not None:
        return "correct", number
    if "ACCEPT" in (reply or "").upper():
        return "accept", None
    return "reject", None


def score(instance: dict, trace: dict, checker_reply: str | None) -> dict:
    """Team reward 1 when the team's final answer is the true value, else 0.

    The final answer is the checker's: its number when it corrects, the solver's answer when it accepts,
    none when it rejects (or says neither). Local rewards: the solver 0.25 for a call the tool could run and
    0.25 more when its value is the true one; the checker 0.5 for a right judgement (it accepts a right answer,
    or does not accept a wrong one).
    `trace`: {"value": the tool's value or None, "answer": the solver's final number or None}.
    """
    truth = instance["answer"]
    kind, number = verdict(checker_reply)
    final = number if kind == "correct" else trace["answer"] if kind == "accept" else None
    correct = final == truth
    solver_right = trace["answer"] == truth
    judged = (kind == "accept") == solver_right if kind != "correct" else number == truth or not solver_right
    called = trace["value"] is not None
    return {"team": float(correct), "success": correct,
            "agents": {"solver": 0.25 * called + 0.25 * (called and trace["value"] == truth),
                       "checker": 0.5 * judged}}

