"""The real-model main job over several seeds: train, then score base and trained teams several ways.

For each seed: `teamrl train src/teamrl/configs/smollm2_math_team.yaml seed=S` (what
`teamrl quickstart --model smollm2-135m-instruct` runs), then, on held-out problems of the training
level and of a harder unseen level, the untrained and the trained team scored with:
- strict: the team's answer as the reward scores it (the answer format counts);
- lenient: the gold number appears anywhere in the reasoner's text or in what the tool's program
  printed (any line, any wording), so a format-only gain shows as strict rising while lenient does not.
Sampled at the training temperature and greedy. Each (seed, phase) result is appended to
OUT/results.jsonl as soon as it exists; a re-run skips what is there (cells survive interruptions).

    python -m scripts.study.real_main_job --seeds 0 1 2 --out runs/real-main-job
    (or in parallel: --seeds 0 --out D & --seeds 1 --no-base --out D & --seeds 2 --no-base --out D)
    python -m scripts.study.real_main_job --summary runs/real-main-job
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs" / "smollm2_math_team.yaml"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def lenient_hit(gold: str, *texts: str) -> bool:
    """Whether the gold number appears as a whole number token in any of `texts`."""
    return any(gold in _NUMBER.findall(text or "") for text in texts)


def score(config_path: Path, overrides: list[str], checkpoint: Path | None, instances: int,
          temperature: float, seed: int) -> dict:
    """Held-out strict and lenient success of the base team (checkpoint None) or a trained one."""
    import torch

    from teamrl.config import load_config
    from teamrl.rollout.agent_params import agent_sampling
    from teamrl.setup.team import build_policies, build_workflow, policies_from_checkpoint
    from teamrl.rollout.evaluation import evaluate

    torch.set_num_threads(1)
    config = load_config(str(config_path), [*overrides, f"rollout.eval_temperature={temperature}"])
    workflow = build_workflow(config)
    if checkpoint is None:
        policies, mapping = build_policies(config, workflow)
    else:
        policies, mapping = policies_from_checkpoint(config, workflow, checkpoint)
    started = time.time()
    _, episodes = evaluate(workflow, policies, mapping, instances, seed=seed,
                           sampling=agent_sampling(config.rollout, workflow.agents, "eval"), batch=32)
    workflow.close()
    rows = []
    for episode in episodes:
        state = episode.state
        gold = str(state.problem.answer)
        texts = {t["agent"]: t["text"] for t in episode.transcript}
        printed = state.shown.get("tool", "").rpartition("# printed:")[2]
        rows.append({"strict": bool(episode.success),
                     "reasoner": bool(state.correct.get("reasoner")), "tool": bool(state.correct.get("tool")),
                     "lenient": lenient_hit(gold, texts.get("reasoner", ""), printed),
                     "reasoner_tokens": len(texts.get("reasoner", "").split())})
    return {key: statistics.mean(r[key] for r in rows) for key in rows[0]} | {
        "instances": len(rows), "seconds": round(time.time() - started, 1)}


def done_keys(results: Path) -> set[str]:
    if not results.exists():
        return set()
    return {json.loads(line)["key"] for line in results.read_text().splitlines() if line.strip()}


def record(results: Path, key: str, payload: dict) -> None:
    with results.open("a") as handle:
        handle.write(json.dumps({"key": key, **payload}) + "\n")
    print(key, json.dumps(payload), flush=True)


def run(seeds: list[int], out: Path, instances: int, transfer_level: int, extra: list[str],
        with_base: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=CONFIG.parent).stdout.strip()
    evals = [("train_level", []), (f"level{transfer_level}", [f"task.source=arithmetic:{transfer_level}"])]
    phases = [(name, over, temp) for name, over in evals for temp in (0.5, 0.0)]
    for seed in seeds:
        run_dir = out / f"seed{seed}"
        key = f"seed{seed}/train"
        if key not in done_keys(results):
            started = time.time()
            subprocess.run([sys.executable, "-m", "teamrl.cli", "train", str(CONFIG), f"seed={seed}",
                            f"output_dir={out}", f"run_name=seed{seed}", "train.threads=1", *extra], check=True)
            summary = json.loads((run_dir / "summary.json").read_text())
            record(results, key, {"wall_s": round(time.time() - started, 1), "commit": commit, "summary": summary})
        for name, over, temp in phases:
            key = f"seed{seed}/{name}/T{temp}"
            if key not in done_keys(results):
                record(results, key, score(CONFIG, [*extra, *over, f"seed={seed}"], run_dir / "checkpoints" / "final",
                                           instances, temp, seed) | {"commit": commit})
    for name, over, temp in phases if with_base else ():  # the base model is the same for every seed: once
        key = f"base/{name}/T{temp}"
        if key not in done_keys(results):
            record(results, key, score(CONFIG, [*extra, *over], None, instances, temp, 0) | {"commit": commit})


def summarize(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    by_key = {r["key"]: r for r in rows}
    for key, row in by_key.items():
        if key.endswith("/train"):
            s = row["summary"]
            print(f"{key}: {json.dumps({k: v for k, v in s.items() if not isinstance(v, (dict, list))})}"
                  f" wall {row['wall_s']}s")
        else:
            print(f"{key}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in row.items() if k != "key"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--no-base", action="store_true", help="leave the untrained team's scores to another call "
                        "(several calls may share one --out, e.g. one seed each in parallel)")
    parser.add_argument("--out", type=Path, default=Path("runs/real-main-job"))
    parser.add_argument("--instances", type=int, default=64, help="held-out instances per extra evaluation")
    parser.add_argument("--transfer-level", type=int, default=3, help="the harder unseen arithmetic level")
    parser.add_argument("--summary", type=Path, help="print a results folder's table and stop")
    parser.add_argument("overrides", nargs="*", help="dotted overrides for every run")
    args = parser.parse_args()
    if args.summary:
        summarize(args.summary)
        return
    run(args.seeds, args.out, args.instances, args.transfer_level, args.overrides, not args.no_base)


if __name__ == "__main__":
    main()
