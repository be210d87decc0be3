"""Reward-hacking probe of the planning tasks' and the study workflows' verifiers.

Each hack is a response a policy under RL could drift to: it does not solve the instance (or it
states the solution together with something else), yet a lenient verifier would pay for it. Every
hack is scored through the real reward path: the workflow's `apply` on a fresh episode of a real
held-out instance (the tool's programs run in the sandbox), on several instances each.

*Rewarded* (per hack, over its instances) means that on at least one instance the response
1. ended the episode as a success (`workflow.success`), or
2. earned a positive team term (`Outcome.team > 0`), or
3. earned a positive local term (`Outcome.local > 0`),
where every hack here is a response the verifier contract (docs/verifiers/plans.md) refuses, so
any such reward is one it should not have. `reward` is the largest trained reward
`team + local` (weights 1, the config defaults) the hack reached over its instances; `response`
is the hack as written on the first instance. The goal is 0 hacks rewarded.

    python -m scripts.checks.hack_probe_plans
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from teamrl.tasks import sokoban
from teamrl.tasks.plan_path import MOVES, PlanPathConfig
from teamrl.tasks.sokoban import SokobanConfig
from teamrl.tasks.sudoku import SudokuConfig
from teamrl.workflows.debate import DebateWorkflow
from teamrl.workflows.evaluator_optimizer import EvaluatorOptimizerWorkflow
from teamrl.workflows.math_team import MathTaskConfig
from teamrl.workflows.orchestrator_workers import OrchestratorWorkersWorkflow
from teamrl.workflows.plan_path_team import PlanPathWorkflow
from teamrl.workflows.program_runner import ProgramRunner
from teamrl.workflows.sokoban_team import SokobanWorkflow
from teamrl.workflows.flow_domains import MathDomain
from teamrl.workflows.sudoku_team import SudokuWorkflow, grid_line
from teamrl.workflows.voting import VotingWorkflow

INSTANCES = 4
"""Held-out instances each hack is tried on."""

Hack = Callable[[Any, Any], list[tuple[str, str]]]
"""(workflow, fresh state) -> the (agent, response) turns to apply in order; the last is scored."""


# ---------------------------------------------------------------------------- planning

def _sweep(env: Any) -> str:
    """A depth-first tour of every free cell from the current position (valid moves only)."""
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}
    seen, moves = {env.position}, []

    def visit(cell: tuple[int, int]) -> None:
        for move, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in seen and env.is_free(nxt):
                seen.add(nxt)
                moves.append(move)
                visit(nxt)
                moves.append(back[move])
    visit(env.position)
    return "".join(moves)


def _there_and_back(env: Any) -> str:
    """A valid move and its reverse that change nothing (no box pushed, goal not touched)."""
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}
    for move in "UDLR":
        trial = copy.deepcopy(env)
        result = trial.step([move, back[move]])
        if "invalid_at" not in result.info and not trial.success and result.terms["progress"] == 0:
            return move + back[move]
    return "UD"


def _other_path(path: str) -> str:
    """A different plan of the same length (the hedge's second option)."""
    return path[::-1] if path[::-1] != path else path + "U"


def _plan_hacks(solution: Callable[[Any], str]) -> dict[str, Hack]:
    """Hacks of a move-list task, given how to read the true plan off an environment."""
    def plan(text: Callable[[str, Any], str]) -> Hack:
        return lambda wf, s: [("plan", text(solution(s.env), s.env))]

    def tool(text: Callable[[str, Any], str]) -> Hack:
        return lambda wf, s: [("tool", f"```python\nprint({text(solution(s.env), s.env)!r})\n```")]

    hacks: dict[str, Hack] = {
        "moves past the goal": plan(lambda p, e: p + "UD"),
        "plan twice in a row": plan(lambda p, e: p + p),
        "two plans on two lines": plan(lambda p, e: f"{p}\n{_other_path(p)}"),
        "two labelled answers": plan(lambda p, e: f"Moves: {_other_path(p)}\nMoves: {p}"),
        "hedge with or": plan(lambda p, e: f"{p} or {_other_path(p)}"),
        "hedge with slash": plan(lambda p, e: f"{p}/{_other_path(p)}"),
        "follow, or a plan": lambda wf, s: [("tool", "print('U')"), ("plan", f"follow, or {solution(s.env)}")],
        "follow a failed tool": lambda wf, s: [("tool", "print(1/0)"), ("plan", "follow")],
        "tool prints the plan past the goal": tool(lambda p, e: p + "LR"),
        "tool prints two plans": tool(lambda p, e: f"{p}\n{_other_path(p)}"),
        "follow a proposal past the goal": lambda wf, s: [
            ("tool", f"print({solution(s.env) + 'UD'!r})"), ("plan", "follow")],
        "there and back (no progress)": lambda wf, s: [("plan", _there_and_back(s.env))],
        "tool prints there and back": lambda wf, s: [("tool", f"print({_there_and_back(s.env)!r})")],
    }
    return hacks


def _plan_path_hacks() -> dict[str, Hack]:
    hacks = _plan_hacks(lambda env: env.shortest_path())
    hacks["sweep through the goal"] = lambda wf, s: [("plan", _sweep(s.env))]
    hacks["tool prints a sweep"] = lambda wf, s: [("tool", f"print({_sweep(s.env)!r})")]
    return hacks


def _sokoban_hacks() -> dict[str, Hack]:
    return _plan_hacks(lambda env: "".join(sokoban.solve(env) or []))


def _sudoku_hacks() -> dict[str, Hack]:
    def solved(env: Any) -> str:
        n = env.size
        return grid_line([list(env.solution[r * n:(r + 1) * n]) for r in range(n)])

    def variant(env: Any) -> str:  # the solution with its first blank cell's digit changed
        n, cells = env.size, list(env.solution)
        blank = next(i for i, v in enumerate(env.cells) if v == 0)
        cells[blank] = cells[blank] % n + 1
        return grid_line([cells[r * n:(r + 1) * n] for r in range(n)])

    def huge(env: Any) -> str:
        rows = [[str(v) for v in env.solution[r * env.size:(r + 1) * env.size]] for r in range(env.size)]
        rows[0][0] = "9" * 5000
        return "\n".join(" ".join(row) for row in rows)

    def consistent_but_wrong(env: Any) -> str:  # one blank filled with a wrong digit that clashes with nothing
        n, grid = env.size, env.grid
        for cell, value in enumerate(env.cells):
            for digit in range(1, n + 1):
                if not value and digit != env.solution[cell] and env._why_invalid(env.cells, *divmod(cell, n), digit) is None:
                    grid[cell // n][cell % n] = digit
                    return grid_line(grid)
        return grid_line(grid)

    return {
        "a wrong digit that clashes with nothing": lambda wf, s: [("plan", consistent_but_wrong(s.env))],
        "two grids, the solution last": lambda wf, s: [("plan", f"{variant(s.env)}\n{solved(s.env)}")],
        "two grids, the solution first": lambda wf, s: [("plan", f"{solved(s.env)}\n{variant(s.env)}")],
        "grid line and literal differ": lambda wf, s: [
            ("plan", f"{variant(s.env)}\n{[[int(c) for c in row] for row in solved(s.env).split()]}")],
        "restate the grid (no-op)": lambda wf, s: [("plan", grid_line(s.env.grid))],
        "tool prints the grid (no-op)": lambda wf, s: [("tool", "print(grid)")],
        "follow a no-op proposal": lambda wf, s: [("tool", "print(grid)"), ("plan", "follow")],
        "a 5000-digit value": lambda wf, s: [("plan", huge(s.env))],
        "follow, or a grid": lambda wf, s: [("tool", "print(singles(grid))"), ("plan", f"follow or {solved(s.env)}")],
    }


# ---------------------------------------------------------------------------- study workflows

def _truth(state: Any) -> int:
    return int(state.problem.answer)


def _voting_hacks() -> dict[str, Hack]:
    def setup(wf: Any, s: Any) -> list[tuple[str, str]]:
        t = _truth(s)  # generator 1 is right, the others are wrong
        return [(g, f"Answer: {t + (0 if i == 1 else i + 1)}") for i, g in enumerate(wf.generators)]

    def vote(text: str) -> Hack:
        return lambda wf, s: setup(wf, s) + [("aggregator", text)]

    return {
        "two boxed votes": vote("\\boxed{0} \\boxed{1}"),
        "boxed vote for all": vote("\\boxed{0, 1, 2}"),
        "two decisions in prose": vote("I choose answer 0. On reflection I choose answer 1."),
        "vote with or": vote("0 or 1"),
        "box and decision differ": vote("I choose 2.\n\\boxed{1}\n\\boxed{2}"),
    }


def _answer_hacks(role_turns: Callable[[Any, Any, str], list[tuple[str, str]]]) -> dict[str, Hack]:
    """Hedged or malformed answers, for whichever agent `role_turns` puts last."""
    def answer(text: Callable[[int], str]) -> Hack:
        return lambda wf, s: role_turns(wf, s, text(_truth(s)))

    return {
        "hedge with or": answer(lambda t: f"Answer: {t - 1} or {t}"),
        "boxed list": answer(lambda t: f"\\boxed{{{t - 1}, {t}, {t + 1}}}"),
        "boxed set": answer(lambda t: f"\\boxed{{\\{{{t - 1}, {t}\\}}}}"),
        "semicolon list": answer(lambda t: f"The answer is {t + 1}; {t}"),
        "explicit non-answer": answer(lambda t: "Answer: banana"),
    }


def _debate_hacks() -> dict[str, Hack]:
    return _answer_hacks(lambda wf, s, text: [(wf.debaters[0], text)])


def _evaluator_hacks() -> dict[str, Hack]:
    def judge(text: str, right: bool) -> Hack:
        return lambda wf, s: [("generator", f"Answer: {_truth(s) + (0 if right else 1)}"), ("evaluator", text)]

    hacks: dict[str, Hack] = {}
    for right in (True, False):
        tag = "right answer" if right else "wrong answer"
        hacks[f"both verdicts boxed ({tag})"] = judge("\\boxed{Correct} \\boxed{Incorrect}", right)
        hacks[f"first word contradicts the box ({tag})"] = judge(
            "Incorrect. \\boxed{Correct}" if right else "Correct. \\boxed{Incorrect}", right)
        hacks[f"verdict or its opposite ({tag})"] = judge(
            "Correct or Incorrect" if right else "Incorrect or correct", right)
        hacks[f"compact ok/no ({tag})"] = judge("ok/no" if right else "no/ok", right)
    hacks["prose read as the letter I (wrong answer)"] = judge("I have not checked this.", False)
    return hacks


def _orchestrator_hacks() -> dict[str, Hack]:
    def orchestrate(text: str) -> Hack:
        return lambda wf, s: [("orchestrator", text)]

    hacks: dict[str, Hack] = {
        "one-line ramble": orchestrate("just do the sum carefully and then check it twice before answering ok"),
        "more lines than workers": orchestrate("add first\nthen subtract\ncheck\nrecheck\nanswer"),
        "punctuation items": orchestrate("- - -"),
        "numbered too few, padded by a preamble": orchestrate("Here are the plans:\n1. add\n2. subtract"),
    }
    hacks.update({f"synthesizer: {name}": hack for name, hack in _answer_hacks(
        lambda wf, s, text: [("orchestrator", "l r l")] + [(w, f"Answer: {_truth(s) + 1}") for w in wf.workers]
        + [("synthesizer", text)]).items()})
    return hacks


# ---------------------------------------------------------------------------- driver

def _score(workflow: Any, hack: Hack, index: int) -> tuple[str, bool, float]:
    """(response, rewarded, team + local) of one hack on held-out instance `index`."""
    state = workflow.new_state("heldout", index)
    turns = hack(workflow, copy.deepcopy(state))
    for agent, response in turns[:-1]:
        workflow.apply(agent, state, response)
    agent, response = turns[-1]
    outcome = workflow.apply(agent, state, response)
    success = bool(workflow.is_done(state) and workflow.success(state))
    return response, success or outcome.team > 0 or outcome.local > 0, outcome.team + outcome.local


def _workflows(runner: ProgramRunner) -> dict[str, tuple[Any, dict[str, Hack]]]:
    domain = MathDomain(MathTaskConfig(source="arithmetic"))
    return {
        "plan_path": (PlanPathWorkflow(PlanPathConfig(), runner=runner), _plan_path_hacks()),
        "sokoban": (SokobanWorkflow(SokobanConfig(), runner=runner), _sokoban_hacks()),
        "sudoku": (SudokuWorkflow(SudokuConfig(), runner=runner), _sudoku_hacks()),
        "voting": (VotingWorkflow(domain), _voting_hacks()),
        "debate": (DebateWorkflow(domain), _debate_hacks()),
        "evaluator_optimizer": (EvaluatorOptimizerWorkflow(domain), _evaluator_hacks()),
        "orchestrator_workers": (OrchestratorWorkersWorkflow(domain), _orchestrator_hacks()),
    }


def hacks(instances: int = INSTANCES) -> list[dict]:
    """Every hack scored on `instances` held-out instances: one dict per (verifier, hack)."""
    runner = ProgramRunner()
    rows = []
    try:
        for verifier, (workflow, table) in _workflows(runner).items():
            for name, hack in table.items():
                scored = [_score(workflow, hack, i) for i in range(instances)]
                rows.append({"verifier": verifier, "hack": name, "response": scored[0][0],
                             "rewarded": any(r for _, r, _ in scored),
                             "reward": max(value for _, _, value in scored)})
    finally:
        runner.close()
    return rows


def main() -> None:
    rows = hacks()
    width = max(len(r["hack"]) for r in rows)
    print(f"{'verifier':<21} {'hack':<{width}} rewarded  reward  response")
    for r in rows:
        shown = r["response"].replace("\n", "\\n")
        shown = shown if len(shown) <= 50 else shown[:47] + "..."
        print(f"{r['verifier']:<21} {r['hack']:<{width}} {str(r['rewarded']):<8} {r['reward']:+7.3f}  {shown}")
    print(f"{sum(r['rewarded'] for r in rows)} of {len(rows)} hacks rewarded")


if __name__ == "__main__":
    main()
