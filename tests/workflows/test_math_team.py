"""The math team (reasoner + tool): rewards, agreement, turn logic, problem sources."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("math_verify")

from teamrl.tasks.math_data import MathProblem, default_data_dir  # noqa: E402
from teamrl.workflows.math_team import (  # noqa: E402
    MathWorkflow, ProblemSplits, _plain_numbers_equal, arithmetic_problems, hash_partition, math_problems,
    program_answer, reasoner_answer,
)
from teamrl.workflows.program_runner import ProgramRunner  # noqa: E402

B = 0.1
PROBLEMS = ProblemSplits([MathProblem("t0", "12-5+3", "10"), MathProblem("t1", "7*8", "56")],
                         [MathProblem("h0", "2+2", "4")], "hand")
GARBAGE = ["", "   ", "\x00\x01", "((((", "answer:", "```python\n", "\\boxed{", "é" * 300, "import os; os._exit(3)",
           "while True: pass", "print('x' * 10**8)", "9^{9^{9^9}}"]


@pytest.fixture(scope="module")
def runner():
    runner = ProgramRunner(wall_time_s=1.0)
    yield runner
    runner.close()


@pytest.fixture
def wf(runner):
    return MathWorkflow(PROBLEMS, max_turns=3, format_bonus=B, runner=runner)


def play_turn(wf, state, reasoner, tool):
    """The parallel driver: score candidates on copies of the pre-turn state, then commit in agent order."""
    pre = copy.deepcopy(state)
    scored = {"reasoner": wf.apply("reasoner", copy.deepcopy(pre), reasoner),
              "tool": wf.apply("tool", copy.deepcopy(pre), tool)}
    wf.apply("reasoner", state, reasoner)
    wf.apply("tool", state, tool)
    return scored


def test_agreement_on_the_right_answer_ends_the_episode(wf):
    state = wf.new_state("train", 0)
    out = play_turn(wf, state, "12-5=7, 7+3=10\nanswer: 10", "```python\nprint(12-5+3)\n```")
    for o in out.values():
        assert (o.team, o.local) == (1.0, B) and o.terms == {"correct": 1.0, "format": B}
    assert state.turn == 1 and state.agreed and wf.is_done(state) and wf.success(state)


def test_equivalent_answers_agree(wf):
    state = MathWorkflow(ProblemSplits([MathProblem("f", "1/2", "1/2")], [MathProblem("g", "1", "1")]),
                         runner=wf.runner).new_state("train", 0)
    wf.apply("reasoner", state, "The answer is \\frac{1}{2}.")
    wf.apply("tool", state, "print(1/2)")
    assert state.agreed and wf.success(state)


def test_disagreement_continues_and_both_see_both_answers(wf):
    state = wf.new_state("train", 0)
    out = play_turn(wf, state, "answer: 9", "print(12-5+3)")
    assert out["reasoner"].team == 0.0 and out["reasoner"].local == B
    assert out["tool"].team == 1.0
    assert not state.agreed and not wf.is_done(state)
    for agent in ("reasoner", "tool"):
        prompt = wf.render(agent, state)
        assert prompt == f"{agent}\nq:12-5+3\nr:9 t:10\n>"
    # the episode's answer, without agreement, is the reasoner's: wrong here
    assert not wf.success(state)
    play_turn(wf, state, "answer: 10", "print(10)")
    assert state.agreed and wf.success(state) and state.turn == 2


def test_max_turns_end_the_episode_and_final_agent_decides(runner):
    for final_agent, expected in (("reasoner", False), ("tool", True)):
        wf = MathWorkflow(PROBLEMS, max_turns=2, runner=runner, final_agent=final_agent)
        state = wf.new_state("train", 1)
        for _ in range(2):
            assert not wf.is_done(state)
            play_turn(wf, state, "7*8=54", "print(7*8)")
        assert wf.is_done(state) and not state.agreed and wf.success(state) is expected


def test_format_terms(wf):
    state = wf.new_state("train", 0)
    # a last line ending with the answer counts for correctness, but is not well formed
    prose = wf.apply("reasoner", copy.deepcopy(state), "so the total is 10")
    assert prose.terms == {"correct": 1.0, "format": -B}
    # a hedged answer is no answer (the old last-number fallback took the 10)
    hedged = wf.apply("reasoner", copy.deepcopy(state), "I think it is 10 or so ok")
    assert hedged.terms == {"correct": 0.0, "format": -B}
    assert wf.apply("reasoner", copy.deepcopy(state), "3+7=10").local == B
    # a program that ran but printed nothing, or crashed, is badly formed
    assert wf.apply("tool", copy.deepcopy(state), "x = 10").terms == {"correct": 0.0, "format": -B}
    assert wf.apply("tool", copy.deepcopy(state), "print(1/0)").local == -B


def test_garbage_never_raises(wf):
    states = [wf.new_state("train", 0) for _ in GARBAGE]
    for agent in ("reasoner", "tool"):
        outcomes = wf.apply_many(agent, [copy.deepcopy(s) for s in states], GARBAGE)
        assert all(o.team == 0.0 and o.local == -B for o in outcomes), outcomes
    for text in GARBAGE[:4]:
        state = wf.new_state("train", 0)
        play_turn(wf, state, text, text)
        assert wf.render("tool", state).endswith(">") and not wf.success(state)
    with pytest.raises(ValueError, match="unknown agent"):
        wf.apply("planner", wf.new_state("train", 0), "1")


def test_plain_numbers_skip_math_verify():
    assert _plain_numbers_equal("18.00", "18") and _plain_numbers_equal("1,000", "1000")
    assert _plain_numbers_equal("2/4", "0.5") and _plain_numbers_equal("7", "8") is False
    assert _plain_numbers_equal("1,2", "12") is None and _plain_numbers_equal("-12,345.5", "-12345.50")
    assert _plain_numbers_equal("1e999999999", "1") is None and _plain_numbers_equal("1.5/2", "1") is None


def test_parsers():
    assert reasoner_answer("so \\boxed{3}") == ("3", True)
    assert reasoner_answer("x = 4\n7") == ("7", True)
    assert reasoner_answer("maybe 4 apples") == (None, False)
    assert reasoner_answer("the total is $\\frac{14}{3}$") == ("\\frac{14}{3}", False)  # never "3"
    assert reasoner_answer("\\boxed{17} or \\boxed{18}") == (None, False)
    assert reasoner_answer("answer: " + "1" * 200) == (None, False)  # too long to show, so no answer
    assert reasoner_answer("no numbers") == (None, False)
    assert program_answer("debug 1\n42\n\n") == "42"
    assert program_answer("Answer: 5") == "5"
    assert program_answer("  \n") is None
    assert program_answer("17 or 18") is None


def test_chat_prompts_explain_the_roles(wf):
    chat = MathWorkflow(PROBLEMS, prompt_style="chat", runner=wf.runner)
    state = chat.new_state("heldout", 0)
    assert "Python program" in chat.render("tool", state) and "2+2" in chat.render("tool", state)
    play_turn(chat, state, "answer: 5", "print(2+3)")
    prompt = chat.render("reasoner", state)
    # the second turn shows both answers (not the earlier texts) and asks for a checked answer
    assert "the Python program printed: 5" in prompt and "the reasoning agent answered: 5" in prompt
    assert "print(2+3)" not in prompt and "Answer: <number>" in prompt
    with pytest.raises(ValueError, match="prompt_style"):
        MathWorkflow(PROBLEMS, prompt_style="verbose")


def test_arithmetic_source_is_disjoint_and_seeded():
    splits = arithmetic_problems((1, 3), seed=0, train_size=300, heldout_size=100)
    train_q, held_q = {p.question for p in splits.train}, {p.question for p in splits.heldout}
    assert train_q and held_q and not train_q & held_q
    assert len(train_q) == len(splits.train)  # no repeats inside a split
    assert {p.metadata["level"] for p in splits.train[:2]} == {1, 3}  # levels interleaved
    assert math_problems("arithmetic:1,3", seed=0).train[:5] == arithmetic_problems((1, 3), seed=0).train[:5]
    assert splits.get("train", len(splits.train)) == splits.train[0]  # indices wrap
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        splits.get("valid", 0)
    with pytest.raises(ValueError, match="levels"):
        math_problems("arithmetic:one")


def test_hash_partition_is_stable():
    items = [f"id{i}" for i in range(200)]
    a = hash_partition(items, str, 0.25, seed=1)
    b = hash_partition(list(reversed(items)), str, 0.25, seed=1)
    assert set(a.train) == set(b.train) and not set(a.train) & set(a.heldout)
    assert 20 < len(a.heldout) < 80
    assert set(hash_partition(items, str, 0.25, seed=2).heldout) != set(a.heldout)


def _have_data(*names: str) -> bool:
    try:
        return all((default_data_dir() / name).is_file() for name in names)
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _have_data("gsm8k_train.jsonl", "gsm8k_test.jsonl", "math500_test.jsonl"),
                    reason="math datasets not found (set TEAMRL_DATA_DIR)")
def test_dataset_sources():
    gsm = math_problems("gsm8k")
    assert len(gsm.train) == 7473 and len(gsm.heldout) == 1319
    m500 = math_problems("math500", seed=0)
    assert not {p.id for p in m500.train} & {p.id for p in m500.heldout}
    assert len(m500.train) + len(m500.heldout) == 500
    wf = MathWorkflow(m500, runner=ProgramRunner())
    assert wf.new_state("heldout", 0).problem.question in wf.render("reasoner", wf.new_state("heldout", 0))


def test_runs_under_the_rollout_driver(runner):
    import random

    import torch
    from toy import tiny_policy

    from teamrl.rollout.builtin_engine import SamplingParams
    from teamrl.rollout.tree import RewardWeights, run_episodes

    wf = MathWorkflow(PROBLEMS, max_turns=2, runner=runner)
    samples, episodes = run_episodes(
        wf, [0], "train", {"p": tiny_policy()}, {"reasoner": "p", "tool": "p"},
        SamplingParams(temperature=1.0, max_new_tokens=4), 2, RewardWeights(1.0, 1.0),
        torch.Generator().manual_seed(0), random.Random(0))
    assert {s.agent for s in samples} == {"reasoner", "tool"}
    assert all(ep.turns >= 1 for ep in episodes)


def test_settings_object_and_single_agent_baseline(runner):
    from teamrl.workflows.math_team import MathTaskConfig

    wf = MathWorkflow(MathTaskConfig(source="arithmetic:1", seed=3, final_agent="tool"), runner=runner,
                      single_agent=True)
    assert [a.name for a in wf.agents] == ["reasoner"] and wf.max_turns == 1 and wf.final_agent == "tool"
    state = wf.new_state("train", 0)
    out = wf.apply("reasoner", state, f"answer: {state.problem.answer}")
    assert out.team == 1.0 and state.turn == 1 and wf.is_done(state) and wf.success(state)
    with pytest.raises(ValueError, match="unknown agent"):
        wf.apply("tool", state, "print(1)")
    with pytest.raises(ValueError, match="final_agent"):
        MathTaskConfig(final_agent="judge")


def test_worked_examples_are_earlier_turns_ending_in_a_cue(wf):
    from teamrl.workflows.math_team import CHAT_CUES, CHAT_EXAMPLES
    shots = MathWorkflow(PROBLEMS, prompt_style="chat", runner=wf.runner, worked_examples=True)
    state = shots.new_state("heldout", 0)
    for agent in ("reasoner", "tool"):
        messages = shots.render(agent, state)
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
        assert messages[-1]["content"] == f"Problem: 2+2\n{CHAT_CUES[agent]}"
        assert [m["content"] for m in messages[1::2]] == [answer for _, answer in CHAT_EXAMPLES[agent]]
    # each example answer is well formed for its role and right
    for (asked, answer), (_, program) in zip(CHAT_EXAMPLES["reasoner"], CHAT_EXAMPLES["tool"]):
        expression = asked.split("\n")[0].removeprefix("Problem: ")
        assert reasoner_answer(answer) == (str(eval(expression)), True)  # noqa: S307 - our own literal
        assert wf.runner.run([program.removeprefix("```python\n").removesuffix("\n```")])[0][0].strip() == \
            str(eval(expression))  # noqa: S307
    play_turn(shots, state, "answer: 5", "print(2+3)")
    second = shots.render("reasoner", state)[-1]["content"]
    assert "the Python program printed: 5" in second and second.endswith("\nSolution:")
    assert MathWorkflow(PROBLEMS, prompt_style="chat", runner=wf.runner).render("tool", state).count("Problem") == 1


def test_worked_examples_are_no_problem_of_any_arithmetic_level():
    from teamrl.tasks.math_data import generate_arithmetic
    from teamrl.workflows.math_team import CHAT_EXAMPLES
    asked = {q.split("\n")[0].removeprefix("Problem: ") for q, _ in CHAT_EXAMPLES["reasoner"] + CHAT_EXAMPLES["tool"]}
    for level in (1, 2, 3):
        for split in ("train", "heldout"):
            questions = {p.question for p in generate_arithmetic(level, 3000, seed=0, split=split, unique=False)}
            assert not asked & questions, (level, split)


def test_validation_and_test_are_disjoint_halves_of_the_held_out_list():
    problems = arithmetic_problems((2,))
    validation, test = problems.problems("validation"), problems.problems("test")
    assert validation and test and len(validation) + len(test) == len(problems.heldout)
    assert not {p.question for p in validation} & {p.question for p in test}
    assert not {p.question for p in problems.train} & {p.question for p in validation + test}
    assert problems.get("heldout", 0) == problems.heldout[0]  # no heldout_split: the whole list, as before
    halved = replace(problems, heldout_split="test")
    assert halved.get("heldout", 0) == test[0] and halved.get("heldout", len(test)) == test[0]  # wraps in its half
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        problems.get("dev", 0)


def test_a_math_config_picks_its_held_out_half():
    from teamrl.config import ConfigError, load_config
    from teamrl.setup.team import build_workflow

    path = Path(__file__).resolve().parents[2] / "src/teamrl/configs/smollm2_math_team.yaml"
    validation = build_workflow(load_config(path, ["task.heldout_split=validation"]))
    test = build_workflow(load_config(path, ["task.heldout_split=test", "workflow.name=single"]))
    assert validation.new_state("heldout", 0).problem == validation.problems.problems("validation")[0]
    assert test.new_state("heldout", 0).problem == test.problems.problems("test")[0]
    assert validation.new_state("heldout", 0).problem != test.new_state("heldout", 0).problem
    with pytest.raises(ConfigError, match="heldout_split = 'tset' is invalid"):
        load_config(path, ["task.heldout_split=tset"])
