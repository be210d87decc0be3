"""Base rates of the real pretrained models on every built-in task with chat prompts: greedy success, and
sampled pass@1 / pass@K (K episodes per held-out instance at one temperature), untrained.

Run: python -m scripts.study.real_base_rates --instances 32 --k 4 --temperature 0.5 --out real_base_rates.jsonl
     [--models smollm2-135m-instruct gemma-3-270m] [--cases split_calc_team calc_flows_voting] [--threads 1]
Each (model, case) result is appended to --out as one JSON line as soon as it is measured; a re-run skips
the pairs already there with the same instances, K and temperature (an interrupted run resumes; `--redo`
measures them again, e.g. after a prompt changed: a record's `commit` says what it measured), and the
Markdown table of every line in the file is printed at the end. A case that fails (a data set not on this
machine) is printed and not recorded, so a later run tries it again.

What a study on a real model needs from this table is a fair prior: a sampled base rate between about 10%
and 50% (RL has something to make reliable, and room to do it). Every case loads one shared policy
(`regime=shared`: the untrained roles are the same model) and uses the config's own settings otherwise,
with `workflow.prompt_style=chat` and a response cap that fits the answer form the chat prompt asks for.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from teamrl.config import RunConfig, load_config
from teamrl.study.seed_run import base_rates
from teamrl.setup.model_sources import is_named_base_model
from teamrl.setup.real_model_checks import base_model_settings

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"
MODELS = ("smollm2-135m-instruct", "gemma-3-270m")


@dataclass(frozen=True)
class Case:
    """One task setting: a built-in config and the overrides that make it a chat-prompt case."""

    name: str
    config: str
    overrides: tuple[str, ...] = ()


# Response caps: the math reasoner thinks before its "Answer:" line (80, as the SmolLM2 main job); code needs a
# block; the split tasks and calc flows ask for a bare formula, value, offset or walk, which a model that
# follows the prompt ends well within 32 tokens (the least that teamrl's real-model check accepts quietly).
CASES = (
    Case("math_arith1", "math_team.yaml", ("task.source=arithmetic:1", "rollout.max_new_tokens=80")),
    Case("math_arith2", "math_team.yaml", ("task.source=arithmetic:2", "rollout.max_new_tokens=80")),
    Case("math_arith3", "math_team.yaml", ("task.source=arithmetic:3", "rollout.max_new_tokens=80")),
    # The main job's team (final answer: the program's) with one turn and with a second turn, on the same problems:
    # does a second turn help the untrained team?
    Case("math_arith2_tool_final_1turn", "math_team.yaml", ("task.source=arithmetic:2", "task.final_agent=tool",
                                                             "workflow.max_turns=1", "rollout.max_new_tokens=80")),
    Case("math_arith2_tool_final_2turns", "math_team.yaml", ("task.source=arithmetic:2", "task.final_agent=tool",
                                                              "workflow.max_turns=2", "rollout.max_new_tokens=80")),
    Case("math_gsm8k", "math_team.yaml", ("task.source=gsm8k", "rollout.max_new_tokens=160")),
    Case("code_team", "code_team.yaml", ("rollout.max_new_tokens=160",)),
    # The procedural functions are easy for an instruct model (67.7% pass@1): the datasets are the harder levels.
    Case("code_team_mbpp", "code_team.yaml", ("task.source=mbpp_sanitized", "rollout.max_new_tokens=200")),
    Case("code_team_humaneval", "code_team.yaml", ("task.source=humaneval", "rollout.max_new_tokens=200")),
    # The procedural harder level: list and string functions with a parameter (between the two above).
    Case("code_team_lists", "code_team.yaml", ("task.source=procedural:lists", "rollout.max_new_tokens=160")),
    Case("plan_path_team", "plan_path_team.yaml", ("rollout.max_new_tokens=40",)),
    # With two solved 4x4 grids as earlier turns (a base model gets them from its settings anyway).
    Case("plan_path_team_shown", "plan_path_team.yaml", ("task.worked_examples=true", "rollout.max_new_tokens=40")),
    Case("plan_path_single_shown", "plan_path_team.yaml",
         ("workflow.name=single", "task.worked_examples=true", "rollout.max_new_tokens=40")),
    Case("split_calc_team", "split_calc_team.yaml", ("rollout.max_new_tokens=32",)),
    Case("split_calc_single", "split_calc_team.yaml", ("workflow.name=single", "rollout.max_new_tokens=32")),
    Case("split_nav_team", "split_nav_team.yaml", ("rollout.max_new_tokens=32",)),
    Case("calc_flows_voting", "calc_flows.yaml", ("workflow.name=voting", "rollout.max_new_tokens=32")),
    Case("calc_flows_evaluator_optimizer", "calc_flows.yaml",
         ("workflow.name=evaluator_optimizer", "rollout.max_new_tokens=32")),
    Case("sokoban_team", "sokoban_team.yaml", ("rollout.max_new_tokens=40",)),
    Case("sudoku_team", "sudoku_team.yaml", ("rollout.max_new_tokens=40",)),
)


def model_overrides(case: Case, model: str) -> tuple[str, ...]:
    """The settings a model needs on every case beyond the case's own: a base model's stop at the blank line and,
    where the task has them, worked examples (`base_model_settings`; without them Gemma-3-270M scored 0% on
    one-digit sums, the first record); none for instruct models."""
    if not is_named_base_model(model):
        return ()
    return base_model_settings(task_of(case.config))


@functools.lru_cache(maxsize=None)
def task_of(config: str) -> str:
    """The task a case's config file names (read once: the main loop asks for every case and model)."""
    return load_config(CONFIGS / config).task["name"]


def case_configs(case: Case, model: str, temperature: float, threads: int) -> tuple[RunConfig, RunConfig]:
    """(sampled, greedy) run configs of one case on one model."""
    common = [*case.overrides, *model_overrides(case, model), f"policy.model={model}", "workflow.prompt_style=chat", "regime=shared",
              f"train.threads={threads}", f"rollout.temperature={temperature}"]
    sampled = load_config(CONFIGS / case.config, [*common, f"rollout.eval_temperature={temperature}"])
    greedy = load_config(CONFIGS / case.config, [*common, "rollout.eval_temperature=0"])
    return sampled, greedy


def key(record: dict) -> tuple:
    """What makes two results the same measurement."""
    return (record["model"], record["case"], record["instances"], record["k"], record["temperature"],
            tuple(record.get("model_overrides", ())))


def finished(out: Path) -> list[dict]:
    """The results already in `out` (none when it does not exist)."""
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def measure(case: Case, model: str, instances: int, k: int, temperature: float, threads: int, seed: int,
            measured_at: str) -> dict:
    """One (model, case) result: greedy, pass@1, pass@K on the first `instances` held-out instances;
    `measured_at` is the checkout's commit when the run started (the code it imported)."""
    sampled, greedy = case_configs(case, model, temperature, threads)
    started = time.time()
    # model_path only stands in for tiny-default, which no case uses: each case loads its real model.
    rates = base_rates(sampled, greedy, "", instances, k, seed)
    return {"model": model, "case": case.name, "config": case.config, "overrides": list(case.overrides),
            "model_overrides": list(model_overrides(case, model)),
            "instances": instances, "k": k, "temperature": temperature, "greedy": rates["greedy"],
            "pass@1": rates["pass@1"], f"pass@{k}": rates[f"pass@{k}"], "seconds": round(time.time() - started, 1),
            "commit": measured_at}


def commit() -> str:
    """The checkout's commit (with "+changes" when the tree differs from it): what a record was measured with."""
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                           text=True)
    return (head.stdout.strip() or "unknown") + ("+changes" if dirty.stdout.strip() else "")


def table(records: list[dict]) -> str:
    """A Markdown table of results, one row per (model, case)."""
    lines = ["| model | case | model settings | N | greedy | pass@1 | pass@K (K, T) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in records:
        pass_k = r[f"pass@{r['k']}"]
        settings = " ".join(r.get("model_overrides", ())) or "-"
        lines.append(f"| {r['model']} | {r['case']} | `{settings}` | {r['instances']} | {r['greedy']:.1%} | {r['pass@1']:.1%} | "
                     f"{pass_k:.1%} ({r['k']}, {r['temperature']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=32, help="held-out instances per case (N)")
    parser.add_argument("--k", type=int, default=4, help="sampled episodes per instance (pass@K)")
    parser.add_argument("--temperature", type=float, default=0.5, help="sampling temperature of pass@1 / pass@K")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--cases", nargs="+", default=[c.name for c in CASES], choices=[c.name for c in CASES])
    parser.add_argument("--out", type=Path, default=Path("real_base_rates.jsonl"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine may be shared)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redo", action="store_true",
                        help="measure the chosen pairs again even when --out has them (after a prompt changed); "
                             "the new line is appended, the old one kept")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    measured_at = commit()  # now, not per record: later edits to the checkout do not change what this process runs
    done = set() if args.redo else {key(r) for r in finished(args.out)}
    for model in args.models:
        for case in (c for c in CASES if c.name in args.cases):
            if (model, case.name, args.instances, args.k, args.temperature, model_overrides(case, model)) in done:
                print(f"{model} {case.name}: already in {args.out}")
                continue
            try:
                record = measure(case, model, args.instances, args.k, args.temperature, args.threads, args.seed,
                                 measured_at)
            except Exception as err:  # noqa: BLE001 - one case's failure (a missing data set) must not stop the table
                print(f"{model} {case.name}: failed: {type(err).__name__}: {err}")
                continue
            with args.out.open("a") as f:  # appended at once: an interrupted run keeps what it measured
                f.write(json.dumps(record) + "\n")
            print(f"{model} {case.name}: greedy {record['greedy']:.1%}, pass@1 {record['pass@1']:.1%}, "
                  f"pass@{args.k} {record[f'pass@{args.k}']:.1%} ({record['seconds']}s)")
    wanted = [r for r in finished(args.out) if r["model"] in args.models and r["case"] in args.cases]
    print(table(wanted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
