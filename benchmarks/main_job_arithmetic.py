"""The real-model main job's training step in fp32 against the bf16 arithmetic settings, side by side in one run.

    python -m benchmarks run main_job_arithmetic                       # 6 steps per arm, 1 thread
    python -m benchmarks run main_job_arithmetic --steps 1 --tokens 4  # a check that every arm runs

Each arm is one `teamrl train src/teamrl/configs/smollm2_math_team.yaml` child run (SmolLM2-135M-Instruct,
a LoRA adapter per role, 4 instances x K 4, 80 new tokens; no held-out evaluation between steps, 4 held-out
instances at the ends), at --threads torch threads:

- `fp32`: the config as it is (the defaults: fp32 sampler, no rollout correction, fp32 update);
- `bf16-sampler`: rollout.sampler_dtype=bfloat16 with algorithm.rollout_correction=tis (the correction's
  pi_prox comes from the update's own forward where the update is one optimizer step, as here);
- `bf16`: the same and algorithm.autocast=bf16 (the update's forward in bf16 autocast, fp32 master weights).

Step time is rollout + update (`time/rollout_s` + `time/update_s`), median over the steps after the first
(which pays first-call costs); with --rounds > 1 the arms run again in reversed order and the medians pool the
rounds. Also reported: each arm's process CPU seconds over the whole child (model loading and the two 4-instance
evaluations included). Wall seconds: run it on an otherwise quiet machine and say what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from benchmarks.harness import ROOT, Lines, add_out_argument, child_env

CONFIG = ROOT / "src" / "teamrl" / "configs" / "smollm2_math_team.yaml"
ARMS = {
    "fp32": [],
    "bf16-sampler": ["rollout.sampler_dtype=bfloat16", "algorithm.rollout_correction=tis"],
    "bf16": ["rollout.sampler_dtype=bfloat16", "algorithm.rollout_correction=tis", "algorithm.autocast=bf16"],
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_arm(arm: str, threads: int, steps: int, tokens: int | None) -> dict[str, list[float]]:
    """One child run of `arm`: its per-step rollout and update seconds (the first step left out) and CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="teamrl-arith-") as out_dir:
        extra = [f"rollout.max_new_tokens={tokens}"] if tokens else []
        args = [sys.executable, "-m", "teamrl.cli", "train", str(CONFIG), f"train.steps={steps}",
                "train.eval_every=0", "train.eval_instances=4", f"train.threads={threads}", f"output_dir={out_dir}",
                "run_name=arm", *extra, *ARMS[arm]]
        cpu_before = _children_cpu_s()
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=child_env({**os.environ, "OMP_NUM_THREADS": str(threads)}))
        cpu = _children_cpu_s() - cpu_before
        if done.returncode != 0:
            raise SystemExit(f"arm {arm} failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
        rows = [json.loads(line) for line in (Path(out_dir) / "arm" / "metrics.jsonl").read_text().splitlines()]
    steps_rows = [r for r in rows if "time/update_s" in r]
    keep = steps_rows[1:] if len(steps_rows) > 1 else steps_rows
    return {"rollout_s": [r["time/rollout_s"] for r in keep], "update_s": [r["time/update_s"] for r in keep],
            "cpu_s": [cpu]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="training steps per arm (the first is left out)")
    parser.add_argument("--tokens", type=int, default=0, help="rollout.max_new_tokens (0: the config's 80)")
    parser.add_argument("--threads", type=int, default=1, help="train.threads of every arm")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every arm, the order reversed each round")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    add_out_argument(parser, "main_job_arithmetic")
    args = parser.parse_args()
    log = Lines.started()
    log(f"# {CONFIG.relative_to(ROOT)}: {args.steps} steps per arm and round, {args.rounds} round(s), "
        f"{args.threads} thread(s), max_new_tokens {args.tokens or 'as configured'}")
    pooled: dict[str, dict[str, list[float]]] = {arm: {"rollout_s": [], "update_s": [], "cpu_s": []}
                                                 for arm in args.arms}
    for n in range(args.rounds):
        for arm in args.arms if n % 2 == 0 else args.arms[::-1]:
            figures = run_arm(arm, args.threads, args.steps, args.tokens or None)
            for key, values in figures.items():
                pooled[arm][key] += values
            log(f"round {n + 1} {arm:13s} rollout {' '.join(f'{v:.2f}' for v in figures['rollout_s'])}  "
                f"update {' '.join(f'{v:.2f}' for v in figures['update_s'])}  process CPU {figures['cpu_s'][0]:.1f} s")
    results: dict[str, dict[str, float]] = {}
    for arm, figures in pooled.items():
        rollout, update = median(figures["rollout_s"]), median(figures["update_s"])
        results[arm] = {"rollout_s": rollout, "update_s": update, "step_s": rollout + update,
                        "cpu_s": median(figures["cpu_s"])}
    base = results.get("fp32")
    log("")
    log("| arm | rollout s | update s | step s | step vs fp32 | process CPU s |")
    log("|---|---:|---:|---:|---:|---:|")
    for arm, r in results.items():
        ratio = f"{base['step_s'] / r['step_s']:.2f}x" if base else "-"
        log(f"| {arm} | {r['rollout_s']:.2f} | {r['update_s']:.2f} | {r['step_s']:.2f} | {ratio} | {r['cpu_s']:.1f} |")
    log.finish(args.out, results)


if __name__ == "__main__":
    main()
