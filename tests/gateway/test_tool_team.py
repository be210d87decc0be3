"""The tool-using example team (examples/gateway/tool_team.py): its safe calculator, its rewards, the tool
result's round trip through the gateway with scripted answers, and one training step on a tiny random model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from teamrl.config import load_config
from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.training.loop import train

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "examples" / "gateway"))
import tool_langgraph_team  # noqa: E402
import tool_task  # noqa: E402
import tool_team  # noqa: E402

TEAMS = pytest.mark.parametrize("program", [tool_team, tool_langgraph_team], ids=["openai", "langgraph"])
from gateway_template import CHAT_TEMPLATE  # noqa: E402
from tool_kit import ScriptedSampler  # noqa: E402

from toy import tiny_policy  # noqa: E402

INSTANCE = {"question": "A warehouse has 386 crates with 47 bottles in each crate. How many bottles are there?",
            "answer": 386 * 47}


def call(expression: str) -> str:
    arguments = json.dumps({"name": "calculate", "arguments": {"expression": expression}})
    return f"<tool_call>\n{arguments}\n</tool_call>"


@pytest.mark.parametrize("expression, value", [("386 * 47", 18142), ("(1 + 2) * 3 - 4 / 2", 7.0), ("-5 + 2", -3)])
def test_the_calculator_evaluates_integer_arithmetic(expression, value):
    assert tool_task.calculate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "2 ** 10", "x * 2", "1.5 * 2", "1 / 0",
                                        "abs(-3)", "[1, 2]", "'ab' * 3", "386 * 47 = 18142", "9" * 300])
def test_the_calculator_refuses_everything_else(expression):
    with pytest.raises(ValueError):
        tool_task.calculate(expression)


def test_a_bad_call_gets_an_error_text_and_no_value():
    assert tool_task.run_tool('{"expression": "386 * 47"}') == ("386 * 47", 18142, "18142")
    assert tool_task.run_tool('{"expression": 12}')[1:] == (None, "error: give the expression as a string")
    assert tool_task.run_tool('{"number": "12"}')[1] is None
    assert tool_task.run_tool("[1]")[1] is None


@pytest.mark.parametrize("trace, reply, team, solver, checker", [
    ({"value": 18142, "answer": 18142}, "ACCEPT", 1.0, 0.5, 0.5),     # right call, right answer, accepted
    ({"value": 18142, "answer": 18124}, "ACCEPT", 0.0, 0.5, 0.0),     # the solver miscopied; the checker let it pass
    ({"value": 18142, "answer": 18124}, "18142", 1.0, 0.5, 0.5),      # ... and the checker corrects it
    ({"value": 18142, "answer": 18124}, "REJECT", 0.0, 0.5, 0.5),     # a right rejection is no answer
    ({"value": 433, "answer": 433}, "ACCEPT", 0.0, 0.25, 0.0),        # a call that runs, the wrong expression
    ({"value": None, "answer": 18000}, "ACCEPT", 0.0, 0.0, 0.0),      # no call: a guess, accepted
    ({"value": None, "answer": 18000}, "REJECT", 0.0, 0.0, 0.5),
    ({"value": None, "answer": None}, "Sure, here it is", 0.0, 0.0, 0.5),  # neither: no answer
])
def test_the_reward_is_the_true_value_not_the_tools(trace, reply, team, solver, checker):
    result = tool_task.score(INSTANCE, trace, reply)
    assert result["team"] == team and result["success"] == bool(team)
    assert result["agents"] == {"solver": solver, "checker": checker}


def test_instances_are_large_numbers_with_their_true_value():
    for index in range(20):
        instance = tool_task.instances("heldout", index)
        numbers = [int(n) for n in __import__("re").findall(r"\d+", instance["question"])]
        assert all(n > 10 for n in numbers) and max(numbers) > 100
        assert instance["answer"] in (numbers[0] * numbers[1], sum(numbers))
    assert tool_task.instances("train", 0) != tool_task.instances("heldout", 0)


def last_turn(prompt: str) -> str:
    return prompt.rsplit("<user>", 1)[-1]


@pytest.fixture
def scripted_team():
    """A gateway serving solver and checker from one tiny policy whose answers `respond(prompt)` scripts."""
    servers = []

    def start(respond):
        sampler = ScriptedSampler(respond=respond)
        policy = tiny_policy(seed=1, name="team", chat_template=CHAT_TEMPLATE)
        policy.network.config.max_position_embeddings = 4096  # the tool listing and worked examples are long
        worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.0, sampler=sampler)
        params = SamplingParams(temperature=1.0, max_new_tokens=80)
        server = Gateway({a: AgentRoute(policy, params) for a in ("solver", "checker")}, worker).start()
        servers.append((server, worker))
        session = server.sessions.open(0, frozenset(server.routes), max_calls=8)
        endpoint = SimpleNamespace(base_url=server.episode_url(session), api_key=session.key)
        return endpoint, sampler, policy.tokenizer

    yield start
    for server, worker in servers:
        server.close()
        worker.close()


def team(expression: str | None, answer: str, verdict: str):
    """Scripted answers: the solver calls the tool with `expression` (None: answers at once), then says
    `answer` (`{result}`: the tool's text); the checker says `verdict`."""
    def respond(prompt: str) -> str:
        if prompt.startswith("<system>You are the checker"):
            return verdict
        turn = last_turn(prompt)
        if turn.startswith("<tool_response>"):
            return answer.format(result=turn.split("\n")[1])
        return call(expression) if expression else answer
    return respond


@TEAMS
def test_the_tool_result_comes_back_and_a_right_answer_scores_1(scripted_team, program):
    endpoint, sampler, tokenizer = scripted_team(team("386 * 47", "There are {result} bottles.", "ACCEPT"))
    result = program.run_episode(INSTANCE, endpoint)
    assert result["team"] == 1.0 and result["success"] and result["agents"] == {"solver": 0.5, "checker": 0.5}
    prompts = [tokenizer.decode(ids) for ids in sampler.prompts]
    assert len(prompts) == 3  # solver call, solver answer, checker
    # the program ran the call and sent its result back as a tool message: the fallback's tool_response block
    assert last_turn(prompts[1]) == "<tool_response>\n18142\n</tool_response>\n<assistant>"
    assert call("386 * 47") in prompts[1]  # the call, re-rendered as the assistant's turn
    assert "Calculation: calculate(386 * 47) = 18142\nSolver's answer: 18142" in prompts[2]


@TEAMS
def test_a_wrong_expression_scores_0_even_when_the_answer_copies_the_tool(scripted_team, program):
    endpoint, sampler, tokenizer = scripted_team(team("386 + 47", "There are {result} bottles.", "ACCEPT"))
    result = program.run_episode(INSTANCE, endpoint)
    assert "<tool_response>\n433\n</tool_response>" in tokenizer.decode(sampler.prompts[1])
    assert result["team"] == 0.0 and result["agents"] == {"solver": 0.25, "checker": 0.0}


@TEAMS
def test_no_tool_call_is_a_guess_and_the_checker_sees_it(scripted_team, program):
    endpoint, sampler, tokenizer = scripted_team(team(None, "About 18000 bottles.", "ACCEPT"))
    result = program.run_episode(INSTANCE, endpoint)
    prompts = [tokenizer.decode(ids) for ids in sampler.prompts]
    assert len(prompts) == 2 and "the solver did not use the calculator" in prompts[1]
    assert result["team"] == 0.0 and result["agents"] == {"solver": 0.0, "checker": 0.0}


@TEAMS
def test_a_malformed_call_is_not_run(scripted_team, program):
    endpoint, sampler, _ = scripted_team(team(None, call("386 * 47").replace("}}", "}"), "REJECT"))
    result = program.run_episode(INSTANCE, endpoint)
    assert len(sampler.prompts) == 2  # the gateway returned the text: no tool message, no second solver call
    assert result["team"] == 0.0 and result["agents"] == {"solver": 0.0, "checker": 0.5}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tool-team-model")
    policy = tiny_policy(seed=3, chat_template=CHAT_TEMPLATE)
    policy.network.config.max_position_embeddings = 4096
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("config_file", ["tool_team.yaml", "tool_langgraph_team.yaml"])
def test_a_training_step_of_the_tool_team(model_dir, tmp_path, monkeypatch, config_file):
    monkeypatch.chdir(ROOT)  # the example's entry paths are repository-relative
    config = load_config(ROOT / "examples/gateway" / config_file, [
        f"output_dir={tmp_path}", f"policy.model={model_dir}", "policy.lora=null", "train.steps=1", "train.batch_size=1", "algorithm.k=2",
        "task.branching=independent", "task.check_determinism=false", "rollout.max_new_tokens=4", "train.eval_instances=1",
        "train.checkpoint_every=0", "train.warmup_steps=0", "algorithm.drop_zero_signal=false"])
    run = train(config, progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    assert step["gateway/runs"] == 2 and step["gateway/dropped_runs"] == 0
    # each run's solver answered one request with tools (4 random tokens: cut, or text with no call, or a call)
    outcomes = {k.rsplit("/", 1)[1]: v for k, v in step.items() if k.startswith("gateway/tool_calls/")}
    assert sum(outcomes.values()) == 2
    # a run is the solver's first call, its answer after the tool result when it made a call, the checker's
    assert step["train/samples"] == 2 * 2 + outcomes.get("calls", 0.0)
