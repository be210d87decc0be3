"""The code team (coder + tester): every reward term, turn logic, hidden ground truth, sandboxing."""

from __future__ import annotations

import copy

import pytest
from data_sets import SUBSET_DIR

from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp
from teamrl.workflows.code_parsing import parse_program, parse_tests, visible_prompt
from teamrl.workflows.code_runner import CodeRunner
from teamrl.workflows.code_team import CodeTaskConfig, CodeWorkflow
from teamrl.workflows.math_team import ProblemSplits

B = 0.1
REFERENCE = "def f(x):\n    return x*3+1\n"
PROBLEM = CodeProblem("hand/0", 'def f(x):\n    """Return x times 3 plus 1."""\n', REFERENCE,
                      "assert f(0) == 1\nassert f(2) == 7\nassert f(-4) == -11\n", "f", source="hand",
                      metadata={"short": "f(x): x times 3 plus 1"})
GOOD_TESTS = "```python\nassert f(1) == 4\nassert f(5) == 16\n```"
GARBAGE = ["", "   ", "\x00", "((((", "```python\n", "def", "é" * 500, "import os; os._exit(0)", "while True: pass",
           "assert", "raise SystemExit", "[" * 200 + "]" * 200]


@pytest.fixture(scope="module")
def runner():
    runner = CodeRunner(wall_time_s=1.0)
    yield runner
    runner.close()


@pytest.fixture
def wf(runner):
    return CodeWorkflow(ProblemSplits([PROBLEM], [PROBLEM]), max_turns=3, format_bonus=B, runner=runner, n_mutants=3)


def play_turn(wf, state, code, tests):
    """The parallel driver: score candidates on copies of the pre-turn state, then commit in agent order."""
    pre = copy.deepcopy(state)
    scored = {"coder": wf.apply("coder", copy.deepcopy(pre), code),
              "tester": wf.apply("tester", copy.deepcopy(pre), tests)}
    wf.apply("coder", state, code)
    wf.apply("tester", state, tests)
    return scored


def test_coder_reward_is_the_ground_truth_pass_ratio(wf):
    state = wf.new_state("train", 0)
    right = wf.apply("coder", copy.deepcopy(state), f"```python\n{REFERENCE}```")
    assert (right.team, right.local) == (1.0, B) and right.terms == {"gt_pass": 1.0, "format": B}
    partial = wf.apply("coder", copy.deepcopy(state), "def f(x):\n    return 1 if x == 0 else 7")
    assert partial.team == pytest.approx(2 / 3) and partial.local == B
    unnamed = wf.apply("coder", copy.deepcopy(state), "def g(x):\n    return x*3+1")
    assert unnamed.team == 0.0 and unnamed.local == -B


def test_tester_reward_separates_good_trivial_and_wrong_tests(wf):
    state = wf.new_state("train", 0)
    assert len(wf.negatives(PROBLEM)) == 3  # mutants of the reference that the ground truth rejects
    good, trivial, wrong, mixed = wf.apply_many("tester", [copy.deepcopy(state) for _ in range(4)], [
        GOOD_TESTS, "assert True", "assert f(1) == 5", "assert f(1) == 4\nassert f(2) == 0"])
    assert good.terms["separation"] > 0 and good.local == pytest.approx(good.terms["separation"] * (1 + B))
    assert good.info["killed"] >= 1 and good.info["negatives"] == 3
    assert trivial.terms["separation"] == -1.0 and trivial.local == -1.0 - B  # no unit calls f
    assert wrong.terms["separation"] == -1.0 and wrong.local == -1.0  # rejects the reference: no bonus
    assert mixed.terms["separation"] == -0.5  # half the units reject the correct solution
    assert good.team == 0.0  # the shared term: no committed program yet


# Tests that pass every program: none may earn more than nothing.
PASS_EVERYTHING = [
    "assert f(1) == f(1)", "assert f(1) == 4 or True", "try:\n    assert f(1) == 9\nexcept:\n    pass",
    "try:\n    assert f(1) == 9\nexcept AssertionError:\n    pass",
    "from contextlib import suppress\nwith suppress(Exception):\n    assert f(1) == 9",
    "def f(x):\n    return 4\nassert f(1) == 4",  # tests their own f, not the program's
    "assert isinstance(f(1), int)", "assert f(1) is not None or f(1) is None", "x = f(1)\nassert x == x",
    "assert 1 == 1", "import math\nassert math.pi > 3",
]


def test_tests_that_pass_everything_earn_nothing(wf):
    state = wf.new_state("train", 0)
    outcomes = wf.apply_many("tester", [copy.deepcopy(state) for _ in PASS_EVERYTHING], PASS_EVERYTHING)
    for response, out in zip(PASS_EVERYTHING, outcomes):
        assert out.local <= 0.0 and out.terms["separation"] <= 0.0, (response, out)


def test_passing_tests_end_the_episode(wf):
    state = wf.new_state("train", 0)
    play_turn(wf, state, REFERENCE, GOOD_TESTS)
    assert state.turn == 1 and state.passed and wf.is_done(state) and wf.success(state)


def test_failing_turn_continues_and_feeds_the_next_one(wf):
    state = wf.new_state("train", 0)
    play_turn(wf, state, "def f(x):\n    return x*3+1 if x < 2 else 0", GOOD_TESTS)
    assert not state.passed and not wf.is_done(state) and not wf.success(state)
    for agent in ("coder", "tester"):
        prompt = wf.render(agent, state)
        assert "return x*3+1 if x < 2 else 0" in prompt and "assert f(1) == 4" in prompt
        assert "1/2 passed; first failure: assert f(5) == 16 -> AssertionError" in prompt
    # the team's failed program is now a negative the tester is credited for catching,
    # and the tester's shared term is that program's ground-truth pass ratio
    out = wf.apply("tester", copy.deepcopy(state), GOOD_TESTS)
    assert out.info["negatives"] == 4 and out.team == pytest.approx(2 / 3)
    play_turn(wf, state, REFERENCE, GOOD_TESTS)
    assert state.passed and state.turn == 2 and wf.success(state)


def test_max_turns_end_the_episode(wf):
    state = wf.new_state("train", 0)
    for _ in range(3):
        assert not wf.is_done(state)
        play_turn(wf, state, "def f(x): return 0", "assert f(1) == 4")
    assert wf.is_done(state) and not state.passed and not wf.success(state)


def test_garbage_never_raises(wf):
    states = [wf.new_state("train", 0) for _ in GARBAGE]
    coder = wf.apply_many("coder", [copy.deepcopy(s) for s in states], GARBAGE)
    tester = wf.apply_many("tester", [copy.deepcopy(s) for s in states], GARBAGE)
    # "while True: pass" and friends are well-formed function bodies (+B); the rest is not code
    assert all(o.team == 0.0 for o in coder) and [o.local for o in coder].count(-B) >= 8, coder
    assert all(o.terms["separation"] <= 0 and o.terms["format"] == -B for o in tester), tester
    state = wf.new_state("train", 0)
    play_turn(wf, state, "while True: pass", "import os; os._exit(0)")
    assert wf.render("coder", state).endswith(">") and not wf.success(state)
    with pytest.raises(ValueError, match="unknown agent"):
        wf.apply("reviewer", state, "x")


def test_programs_cannot_forge_test_verdicts(runner):
    steps, _ = parse_tests(GOOD_TESTS, "f")
    forgers = ["import sys\nfor i in range(2): print('0 pass'); print(i, 'pass')\ndef f(x): return 0",
               "import os\nos._exit(0)", "def f(x):\n    import os; os._exit(0)",
               "import sys\nnonce = sys.stdin.readline()\ndef f(x): return 0",
               # Walks up to whatever called it and reuses its reporting (this forged a pass when
               # program and tests shared one process behind a nonce).
               "import sys, os\nframe = sys._getframe()\nwhile frame is not None:\n"
               "    names = frame.f_locals\n    if 'nonce' in names and 'out' in names:\n"
               "        for i in range(20):\n            os.write(names['out'], (names['nonce'] + ' ' + str(i) + ' pass\\n').encode())\n"
               "        os._exit(0)\n    frame = frame.f_back\ndef f(x): return 0"]
    for run in runner.run_units([(program, steps) for program in forgers]):
        assert not run.all_passed, run
    (ok,) = runner.run_units([(REFERENCE, steps)])
    assert ok.all_passed and ok.summary() == "2/2 passed"


def test_ground_truth_never_reaches_the_prompts(wf):
    for style in ("compact", "chat"):
        workflow = CodeWorkflow(wf.problems, prompt_style=style, runner=wf.runner, n_mutants=3)
        state = workflow.new_state("train", 0)
        prompts = [workflow.render(a, state) for a in ("coder", "tester")]
        play_turn(workflow, state, "def f(x): return x", "assert f(9) == 28")
        prompts += [workflow.render(a, state) for a in ("coder", "tester")]
        for prompt in prompts:
            for line in PROBLEM.tests.splitlines():
                assert line not in prompt
                assert line.split("==")[0].strip() not in prompt  # not even the call


def test_parsers():
    steps, ok = parse_tests("import math\ndef check(candidate):\n    assert candidate(1) == 4\n"
                            "    assert candidate(2) == 7\ncheck(f)\n", "f")
    assert ok and [unit for _, unit in steps] == [False, False, True, True] and steps[1][0] == "candidate = f"
    steps, ok = parse_tests("if __name__ == '__main__':\n    assert f(1) == 4\n" + "assert f(0) == 1\n" * 20, "f", 5)
    assert ok and sum(unit for _, unit in steps) == 5
    steps, ok = parse_tests("assert f(1) == 4\nthis is ( not python\nassert f(2) == 7", "f")
    assert not ok and [src for src, _ in steps] == ["assert f(1) == 4", "assert f(2) == 7"]  # salvaged, but -format
    assert parse_tests("def helper():\n    assert True", "f") == ((("def helper():\n    assert True", False),), False)
    body = "    return x*3+1"
    assert parse_program(body, PROBLEM) == (PROBLEM.prompt + body + "\n", True)  # HumanEval-style completion
    assert parse_program("no code here at all!", PROBLEM) == ("", False)


def test_procedural_source_runs_end_to_end(runner):
    wf = CodeWorkflow("procedural", runner=runner, n_mutants=3)
    state = wf.new_state("heldout", 0)
    assert state.problem.metadata["split"] == "heldout"
    assert wf.render("coder", state) == f"coder\n{state.problem.metadata['short']}\n>"
    out = play_turn(wf, state, state.problem.reference_solution, state.problem.tests)  # tester copying the truth
    assert out["coder"].team == 1.0 and out["tester"].terms["separation"] == 1.0 and wf.success(state)


def test_benchmark_prompts_hide_the_ground_truth(runner):
    # The records shipped under tests/data: HumanEval/0-2 and these MBPP problems among others.
    problems = (load_humaneval(SUBSET_DIR / "HumanEval.jsonl.gz")
                + [p for p in load_mbpp(SUBSET_DIR / "mbpp.jsonl") if p.id in ("mbpp/2", "mbpp/11", "mbpp/601")])
    assert len(problems) == 6
    for problem in problems:
        shown = visible_prompt(problem)
        assert problem.entry_point in shown
        for line in problem.tests.splitlines():
            if line.strip().startswith("assert"):
                assert line.strip() not in shown, (problem.id, line)
    wf = CodeWorkflow(CodeTaskConfig(source="mbpp", data_dir=str(SUBSET_DIR)), runner=runner)  # no full data needed
    assert wf.problems.heldout[0].id == "mbpp/11" and all(not 11 <= int(p.id[5:]) <= 510 for p in wf.problems.train)
    assert "Write it as: def remove_Occ(" in wf.render("coder", wf.new_state("heldout", 0))


def test_runs_under_the_rollout_driver(runner):
    import random

    import torch
    from toy import tiny_policy

    from teamrl.rollout.builtin_engine import SamplingParams
    from teamrl.rollout.tree import RewardWeights, run_episodes

    wf = CodeWorkflow("procedural", max_turns=2, runner=runner, n_mutants=2)
    samples, episodes = run_episodes(
        wf, [0], "train", {"p": tiny_policy()}, {"coder": "p", "tester": "p"},
        SamplingParams(temperature=1.0, max_new_tokens=4), 2, RewardWeights(1.0, 1.0),
        torch.Generator().manual_seed(0), random.Random(0))
    assert {s.agent for s in samples} == {"coder", "tester"} and episodes[0].turns >= 1


def test_settings_object_and_single_agent_baseline(runner):
    from teamrl.workflows.code_team import CodeTaskConfig

    wf = CodeWorkflow(CodeTaskConfig(source="procedural:add", n_mutants=2), runner=runner, single_agent=True)
    assert [a.name for a in wf.agents] == ["coder"] and wf.max_turns == 1 and wf.n_mutants == 2
    state = wf.new_state("train", 0)
    assert state.problem.metadata["family"] == "add"
    assert wf.apply("coder", state, state.problem.reference_solution).team == 1.0
    assert state.turn == 1 and wf.is_done(state) and wf.success(state)
    with pytest.raises(ValueError, match="unknown agent"):
        wf.apply("tester", state, "assert True")
    with pytest.raises(ValueError, match="n_mutants"):
        CodeTaskConfig(n_mutants=-1)


def test_heldout_split_halves_the_held_out_problems_with_none_in_both():
    """`task.heldout_split`: validation and test are halves of the held-out set that share no problem (a
    study picks checkpoints on one and reports the other); procedural instances are halved by content."""
    def keys(split: str, source: str, n: int) -> list[tuple[str, str]]:
        wf = CodeWorkflow(CodeTaskConfig(source=source, heldout_split=split, data_dir=str(SUBSET_DIR)))
        return [(p.prompt, p.tests) for p in (wf.new_state("heldout", i).problem for i in range(n))]

    validation, test = keys("validation", "procedural:lists", 60), keys("test", "procedural:lists", 60)
    assert len(set(validation)) > 40 and len(set(test)) > 40 and not set(validation) & set(test)
    whole = keys("", "procedural:lists", 130)
    assert set(validation) | set(test) <= set(whole)  # the halves are drawn from the held-out stream itself
    validation, test = keys("validation", "mbpp_sanitized", 3), keys("test", "mbpp_sanitized", 3)
    assert not set(validation) & set(test)
    with pytest.raises(ValueError, match="code.heldout_split"):
        CodeTaskConfig(heldout_split="train")
