"""scripts/study/tool_team.py: tool-call validity, right expressions and the checker's rescues and spoils,
read from hand-written `teamrl eval` transcripts (episodes.jsonl) of the tool-using example team."""

from __future__ import annotations

import json
import math

from scripts.study import tool_team
from tool_task import instances  # examples/gateway, on the path once scripts.study.tool_team is imported


def call(expression):
    arguments = json.dumps({"name": "calculate", "arguments": {"expression": expression}})
    return f"<tool_call>\n{arguments}\n</tool_call>"


def episode(index, success, first, answer=None, verdict="ACCEPT"):
    turns = [{"turn": 0, "agent": "solver", "text": first}]
    if answer is not None:  # the program made a second solver call: the gateway had returned a tool call
        turns.append({"turn": 1, "agent": "solver", "text": answer})
    turns.append({"turn": 0, "agent": "checker", "text": verdict})
    return {"instance": index, "success": success, "transcript": turns}


def test_format_and_skill_are_told_apart(tmp_path):
    truth = [instances("heldout", i)["answer"] for i in range(5)]
    rows = [
        episode(0, True, call(str(truth[0])), f"It is {truth[0]}."),          # a right call, answered right
        episode(1, False, call("1 + 1"), "It is 2."),                          # a valid call, wrong expression
        episode(2, False, "It is about 900."),                                 # no call
        episode(3, False, call("12 * 34").replace("}}", "}")),                 # malformed: no second call
        episode(4, True, call(str(truth[4])), f"{truth[4]} of 12", str(truth[4])),  # miscopied, checker rescues
    ]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = tool_team.tool_metrics(tmp_path / "episodes.jsonl")
    assert got["instances"] == 5 and got["success"] == 2 / 5
    assert got["valid_call"] == 3 / 5 and got["right_expression"] == 2 / 5
    assert got["success_given_valid"] == 2 / 3 and got["success_given_right"] == 1.0
    assert got["solver_right"] == 1 / 5 and got["checker_rescued"] == 1 / 5 and got["checker_spoiled"] == 0
    assert got["checker_accept"] == 4 / 5 and got["checker_number"] == 1 / 5


def test_no_valid_call_leaves_the_conditional_shares_undefined(tmp_path):
    (tmp_path / "episodes.jsonl").write_text(json.dumps(episode(0, False, "no idea")) + "\n")
    got = tool_team.tool_metrics(tmp_path / "episodes.jsonl")
    assert got["valid_call"] == 0 and math.isnan(got["success_given_valid"])
    assert "| - |" in tool_team.table([{"seed": 0, "before": got, "after": got, "wall_s": {"train": 60},
                                        "load_1min_at_start": 1.0, "load_1min_at_end": 1.0}]).replace("- -> -", "-")
