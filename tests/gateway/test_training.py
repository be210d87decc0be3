"""One end-to-end training step of the example teams through the gateway, on a tiny random model."""

from __future__ import annotations

import json

from pathlib import Path

import pytest
import torch

from teamrl.config import load_config
from teamrl.policies.loading import load_policy
from teamrl.training.loop import train

from gateway_template import CHAT_TEMPLATE
from toy import tiny_policy


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random chat model saved as an HF folder (no warm-up: a step takes seconds)."""
    folder = tmp_path_factory.mktemp("gateway-model")
    policy = tiny_policy(seed=3, chat_template=CHAT_TEMPLATE)
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("config_file, entry", [
    ("examples/gateway/openai_team.yaml", None),
    ("examples/gateway/openai_team.yaml", "examples/gateway/openai_team.py:run_episode_async"),
    ("examples/gateway/langgraph_team.yaml", None),
])
def test_a_training_step_of_the_example_team(model_dir, tmp_path, config_file, entry):
    overrides = [f"output_dir={tmp_path}", "train.steps=1", "train.batch_size=2", "algorithm.k=3",
                 "train.eval_instances=2", "train.checkpoint_every=0"]
    config = load_config(config_file, overrides + ([f"task.entry={entry}"] if entry else []))
    run = train(config, model_path=str(model_dir), progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    # tree sampling: K = 3 free runs per instance (level 0, the planner's call), then K replaying the committed
    # plan (level 1, the solver's call)
    assert step["gateway/runs"] == 2 * 3 and step["gateway/branch_runs"] == 2 * 3 and step["gateway/levels"] == 2
    assert step["gateway/dropped_runs"] == 0
    assert step["train/samples"] == 2 * 2 * 3  # K candidates per instance and level
    assert step["gateway/planner/groups"] == 2 and step["gateway/nondeterministic_runs"] == 0
    # A policy whose groups all tied has nothing to learn this step (no loss row); the others trained.
    trained = [p for p in ("planner", "solver") if f"policy/{p}/loss" in step]
    tied = [p for p in ("planner", "solver")
            if step[f"gateway/{p}/zero_variance_groups"] == step[f"gateway/{p}/groups"]]
    assert trained and sorted(trained + tied) == ["planner", "solver"]
    before = load_policy("x", str(model_dir)).network.state_dict()
    for name in trained:
        after = load_policy(name, str(run / "checkpoints" / "final" / name)).network.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)  # the update reached the weights


def test_serve_answers_with_the_trained_per_role_policies(model_dir, tmp_path, monkeypatch):
    import openai

    from teamrl.cli import build_parser
    from teamrl.gateway import batching
    from teamrl.gateway.serve import serve_run
    from teamrl.rollout import engine_routing

    config = load_config("examples/gateway/openai_team.yaml", [f"output_dir={tmp_path}", "train.steps=1",
                                                              "train.batch_size=1", "algorithm.k=2",
                                                              "train.eval_instances=1"])
    run = train(config, model_path=str(model_dir), progress=False)
    assert build_parser().parse_args(["serve", str(run), "--port", "0"]).func.__name__ == "cmd_serve"
    assert build_parser().parse_args(["serve", str(run), "--threads", "auto"]).threads == "auto"
    with pytest.raises(SystemExit):  # one clear argparse error
        build_parser().parse_args(["serve", str(run), "--threads", "0"])
    torch.set_num_threads(2)
    threaded = serve_run(run / "checkpoints" / "final", threads=1)  # the thread setting reaches torch
    threaded.close()
    threaded.worker.close()
    assert torch.get_num_threads() == 1
    used = []
    original = engine_routing.sample
    monkeypatch.setattr(batching.engine_routing, "sample", lambda p, prompts, n, params, g: used.append(
        (p.name, params.temperature)) or original(p, prompts, n, params, g))
    gateway = serve_run(run / "checkpoints" / "final")
    try:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
        for agent in ("solver", "planner"):
            reply = client.chat.completions.create(model=agent, temperature=0.7,
                                                   messages=[{"role": "user", "content": "2+2?"}])
            assert reply.model == agent
    finally:
        gateway.close()
        gateway.worker.close()
    assert used == [("solver", 0.7), ("planner", 0.7)]
    trained = load_policy("s", str(run / "checkpoints" / "final" / "solver")).network.state_dict()
    served = gateway.routes["solver"].policy.network.state_dict()
    assert all(torch.equal(trained[k], served[k]) for k in trained)


def test_scripted_teammates_give_warm_up_demos_and_warm_the_tiny_default_up(tmp_path, monkeypatch):
    from teamrl.setup.tiny_default import WarmupRecipe, warm_up
    from teamrl.setup.team import build_workflow
    from teamrl.gateway.program import scripted_demos

    config = load_config("examples/gateway/openai_team.yaml", [f"output_dir={tmp_path}"])
    demos = scripted_demos(build_workflow(config), seed=0)
    (planner, plan_prompt, plan), (solver, solve_prompt, answer) = next(demos), next(demos)
    demos.close()
    assert (planner, solver) == ("planner", "solver")
    a, b = map(int, plan.removeprefix("Add ").removesuffix(".").split(" and "))
    assert answer == str(a + b) and f"What is {a} + {b}?" in plan_prompt
    assert solve_prompt.endswith(f"Plan: {plan}")  # the program's own messages, contents joined as the tiny model reads them
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    folder = warm_up(WarmupRecipe.for_task(config.task, config.workflow.max_turns, steps=2, batch_size=4,
                                           heldout_demos=4), verbose=False)
    assert (folder / "config.json").is_file() and json.loads((folder / "warmup.json").read_text())["steps_done"] == 2


def test_serve_takes_a_config_and_serves_its_base_models(model_dir, tmp_path):
    """`teamrl serve CONFIG.yaml policy.model=...`: the untrained base behind the same API, no run needed."""
    import openai

    from teamrl.cli import build_parser
    from teamrl.config import ConfigError
    from teamrl.gateway.serve import serve_run

    args = build_parser().parse_args(["serve", "examples/gateway/openai_team.yaml", f"policy.model={model_dir}"])
    assert args.overrides == [f"policy.model={model_dir}"]
    gateway = serve_run(Path(args.run), overrides=args.overrides)
    try:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
        reply = client.chat.completions.create(model="planner", max_tokens=4,
                                               messages=[{"role": "user", "content": "2+2?"}])
        assert reply.model == "planner" and reply.choices[0].message.content is not None
    finally:
        gateway.close()
        gateway.worker.close()
    base = load_policy("b", str(model_dir)).network.state_dict()
    served = gateway.routes["planner"].policy.network.state_dict()
    assert all(torch.equal(base[k], served[k]) for k in base)
    with pytest.raises(ConfigError, match="overrides apply to a config file"):
        serve_run(tmp_path, overrides=["seed=1"])


def test_runs_that_all_drop_stop_with_one_clear_error(model_dir, tmp_path, monkeypatch):
    """Every run crashes: the held-out evaluation, then (evaluation set aside) the training step, stops naming the
    cause and the fix, not with a statistics error."""
    from teamrl.training import loop

    program = tmp_path / "crashing_team.py"
    program.write_text("def run_episode(instance, endpoint):\n    raise ValueError('the program is broken')\n")
    overrides = [f"output_dir={tmp_path / 'runs'}", "train.steps=1", "train.batch_size=2", "algorithm.k=2",
                 "train.eval_instances=2", "train.checkpoint_every=0", f"task.entry={program}:run_episode",
                 "task.check_determinism=false"]
    config = load_config("examples/gateway/openai_team.yaml", overrides + ["run_name=evaluated"])
    with pytest.raises(RuntimeError, match="held-out evaluation played no episode of 2.*task.timeout_s"):
        train(config, model_path=str(model_dir), progress=False)
    monkeypatch.setattr(loop, "evaluate", lambda *args, **kwargs: ({"success": 0.0}, []))
    config = load_config("examples/gateway/openai_team.yaml", overrides + ["run_name=trained"])
    with pytest.raises(RuntimeError, match="step 1 played no episode.*task.timeout_s.*train.resume=auto"):
        train(config, model_path=str(model_dir), progress=False)


def test_dropped_held_out_runs_count_as_failures(monkeypatch):
    """A workflow that drops an instance's run (a program that crashed or timed out) cannot raise success by it."""
    from types import SimpleNamespace

    from teamrl.rollout import evaluation

    played = [SimpleNamespace(success=True, team_return=1.0, turns=1, rewards_by_agent={})]

    def one_of_two(workflow, ids, *args, **kwargs):
        return [], played if ids else []

    monkeypatch.setattr(evaluation, "run_episodes", one_of_two)
    metrics, episodes = evaluation.evaluate(SimpleNamespace(agents=[]), {}, {}, 2)
    assert len(episodes) == 1 and metrics["success"] == 0.5 and metrics["dropped"] == 1.0
