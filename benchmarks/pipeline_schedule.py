"""Serial against pipelined training (`trainer.rollout_schedule`) on the real-model main job: step wall time side
by side, and the ceiling the pipeline could reach, from the serial phase times at 1 thread and at all threads.

    python -m benchmarks run pipeline_schedule                          # 8 steps per arm, the config's budget
    python -m benchmarks run pipeline_schedule --steps 1 --tokens 4     # a check that every arm runs

Each arm is one `teamrl train src/teamrl/configs/smollm2_math_team.yaml` child run (LoRA per role on
SmolLM2-135M-Instruct, batch 4 x K 4, no held-out evaluation between steps, 4 held-out instances at the ends):

- `serial-half`: the serial loop with train.threads=N/2 (the phase times half the cores give a phase; on
  2 cores, 1 thread);
- `serial`: the serial loop with train.threads=N, N = --cores (the machine's cores by default): the
  baseline a pipeline must beat;
- `pipelined`: trainer.backend=ray, one rollout worker with half the cores, the policies' update actor
  with the other half, trainer.rollout_schedule=pipelined (staleness 1), algorithm.rollout_correction=tis;
- `pipelined-0` (only with --arms): the same with trainer.rollout_staleness=0, no overlap: what the
  processes and the weight hand-over cost by themselves.

Step wall time is the difference of consecutive `time/elapsed_s` (rollout, update and, pipelined, the wait
for the worker), median over the steps after the first two (which pay start-up: model loading, Ray actors,
the first rollout of a pipeline; with fewer steps, over all of them). Phase times are the medians of
`time/rollout_s` and `time/update_s`.

The ceiling: a pipeline that gives each phase half the cores takes max(rollout, update) at half the threads
per step, against rollout + update at all of them serially: ceiling = (R_N + U_N) / max(R_{N/2}, U_{N/2}),
read from the two serial arms (on 2 cores: R_2 + U_2 over max(R_1, U_1)). It leaves out what the pipeline adds (a
process per phase, the hand-over of the adapter weights, the rollout correction), so the measured ratio
should fall below it. Wall seconds: run it on an otherwise quiet machine, and say what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from benchmarks.harness import ROOT, Lines, add_out_argument, child_env

CONFIG = ROOT / "src" / "teamrl" / "configs" / "smollm2_math_team.yaml"
ARMS = ("serial-half", "serial", "pipelined", "pipelined-0")


def arm_overrides(arm: str, cores: int) -> list[str]:
    """The `teamrl train` overrides that make `arm` out of the main job's config."""
    half = max(1, cores // 2)
    if arm == "serial-half":
        return [f"train.threads={half}"]
    if arm == "serial":
        return [f"train.threads={cores}"]
    staleness = "0" if arm == "pipelined-0" else "1"
    # LoRA adapters of one base update in one actor (one group), so the cores split in two halves
    return ["trainer.backend=ray", "trainer.rollout_workers=1", "trainer.rollout_schedule=pipelined",
            f"trainer.rollout_staleness={staleness}", "algorithm.rollout_correction=tis",
            f"trainer.num_cpus_per_policy={cores - half}", f"trainer.num_cpus_per_rollout_worker={half}",
            f"train.threads={half}"]


def run_arm(arm: str, cores: int, steps: int, tokens: int | None, log) -> dict[str, float]:
    """One child run of `arm`; its median step, rollout and update seconds."""
    with tempfile.TemporaryDirectory(prefix="teamrl-pipeline-") as out_dir:
        extra = [f"rollout.max_new_tokens={tokens}"] if tokens else []
        args = [sys.executable, "-m", "teamrl.cli", "train", str(CONFIG), f"train.steps={steps}",
                "train.eval_every=0", "train.eval_instances=4", "train.warmup_steps=0", f"output_dir={out_dir}",
                "run_name=arm", *extra, *arm_overrides(arm, cores)]
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=child_env({**os.environ, "OMP_NUM_THREADS": str(cores)}))
        if done.returncode != 0:
            raise SystemExit(f"arm {arm} failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
        rows = [json.loads(line) for line in (Path(out_dir) / "arm" / "metrics.jsonl").read_text().splitlines()]
    steps_rows = [r for r in rows if "time/update_s" in r]
    elapsed = [r["time/elapsed_s"] for r in steps_rows]
    step_s = [b - a for a, b in zip([0.0, *elapsed], elapsed)]
    keep = slice(2, None) if len(steps_rows) > 3 else slice(None)
    figures = {
        "step_s": median(step_s[keep]),
        "rollout_s": median([r["time/rollout_s"] for r in steps_rows][keep]),
        "update_s": median([r["time/update_s"] for r in steps_rows][keep]),
        "steps": float(len(steps_rows)),
    }
    waits = [r["time/rollout_wait_s"] for r in steps_rows if "time/rollout_wait_s" in r]
    if waits:
        figures["wait_s"] = median(waits[keep])
    log(f"{arm:12s} step {figures['step_s']:7.2f} s  rollout {figures['rollout_s']:7.2f} s  "
        f"update {figures['update_s']:7.2f} s" + (f"  waiting for the worker {figures['wait_s']:6.2f} s" if waits else "")
        + f"  ({len(steps_rows)} steps; {' '.join(f'{s:.2f}' for s in step_s)})")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="training steps per arm (medians skip the first two)")
    parser.add_argument("--tokens", type=int, default=0, help="rollout.max_new_tokens (0: the config's)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="cores to use (N)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS[:3]))
    add_out_argument(parser, "pipeline_schedule")
    args = parser.parse_args()
    log = Lines.started()
    log(f"# {CONFIG.relative_to(ROOT)}: {args.steps} steps per arm, N = {args.cores} cores, "
        f"max_new_tokens {args.tokens or 'as configured'}")
    results = {arm: run_arm(arm, args.cores, args.steps, args.tokens or None, log) for arm in args.arms}
    serial, half, piped = (results.get(arm) for arm in ("serial", "serial-half", "pipelined"))
    if serial and piped:
        log(f"serial / pipelined step time: {serial['step_s'] / piped['step_s']:.2f}x")
    if serial and half:
        ceiling = (serial["rollout_s"] + serial["update_s"]) / max(half["rollout_s"], half["update_s"])
        results["ceiling"] = {"speedup": ceiling}
        log(f"ceiling (R_N + U_N) / max(R_N/2, U_N/2) = ({serial['rollout_s']:.2f} + {serial['update_s']:.2f}) / "
            f"max({half['rollout_s']:.2f}, {half['update_s']:.2f}) = {ceiling:.2f}x")
    log.finish(args.out, results)


if __name__ == "__main__":
    main()
