"""The real-model main job's learning under its faster settings: fp32 serial against bf16 and the pipeline.

Each arm trains `src/teamrl/configs/smollm2_math_team.yaml` (SmolLM2-135M-Instruct, a LoRA adapter per
role, 24 steps of 4 instances x K 4) on the same seeds, with held-out evaluations during training
(`train.eval_every`, on the first `train.midway_eval_instances` held-out problems) and at the ends (all
`train.eval_instances`). Held-out problems are sampled in float32 at the training temperature in every arm, so
the curves compare what was learned, not how it was sampled.

- `fp32`: the config as it is (serial, fp32 sampler and update, no rollout correction);
- `bf16`: rollout.sampler_dtype=bfloat16, algorithm.rollout_correction=tis, algorithm.autocast=bf16;
- `pipelined`: trainer.rollout_schedule=pipelined with one rollout worker (Ray), staleness 1, tis: every
  update after the first trains on samples one weights version old.

Each (arm, seed) run appends one line to OUT/results.jsonl when it ends (held-out success by step, the
step and wall times, the rollout-correction metrics); a re-run skips what is there, so an interrupted study
continues where it stopped (a run cut short resumes from its last checkpoint, every 4 steps). Several
processes may share one OUT: each takes the next run no live process holds (OUT/<run>.lock). Learning does
not depend on the machine's load (a seed fixes every draw); the times do, so the summary prints the load
beside them.

    python -m scripts.study.main_job_settings --arms fp32 bf16 pipelined --seeds 0 1 2 --out DIR
    python -m scripts.study.main_job_settings --summary DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "src" / "teamrl" / "configs" / "smollm2_math_team.yaml"
ARMS: dict[str, list[str]] = {
    "fp32": [],
    "bf16": ["rollout.sampler_dtype=bfloat16", "algorithm.rollout_correction=tis", "algorithm.autocast=bf16"],
    "pipelined": ["trainer.backend=ray", "trainer.rollout_workers=1", "trainer.rollout_schedule=pipelined",
                  "trainer.rollout_staleness=1", "algorithm.rollout_correction=tis"],
}
BOUND = 0.10
"""The equivalence bound planned for "within seed noise": an arm whose paired difference to fp32 lies inside
+-10 points of held-out success on the final evaluation is "no effect larger than 10 points"."""


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def read_run(run_dir: Path) -> dict:
    """Held-out success by step, median step phases and rollout-correction metrics of a finished run."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve: dict[int, dict[str, float]] = {}
    steps = []
    for row in rows:
        step = int(row["step"])
        if "eval/success" in row and "eval/instances" in row:
            curve[step] = {"success": row["eval/success"], "instances": row["eval/instances"]}
        if "time/rollout_s" in row:
            steps.append(row)
    later = steps[1:] or steps  # the first step pays first calls
    correction = {key: median(r[key] for r in steps if key in r) for key in sorted(
        {k for r in steps for k in r if k.startswith("rollout_correction/")})}
    return {
        "curve": {str(step): value for step, value in sorted(curve.items())},
        "train_success": [round(r["train/success"], 4) for r in steps],
        "median_rollout_s": median(r["time/rollout_s"] for r in later),
        "median_update_s": median(r["time/update_s"] for r in later),
        "median_step_s": median(r.get("time/step_s", r["time/rollout_s"] + r["time/update_s"]) for r in later),
        "correction_medians": correction,
        "summary": json.loads((run_dir / "summary.json").read_text()),
    }


def done_keys(results: Path) -> set[str]:
    if not results.exists():
        return set()
    return {json.loads(line)["key"] for line in results.read_text().splitlines() if line.strip()}


def _claim(lock: Path) -> bool:
    """Whether this process may run the lock's run: it takes a free lock, or one whose process has died."""
    for _ in range(2):
        try:
            handle = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = lock.read_text().strip()
            try:
                os.kill(int(holder), 0)
                return False  # another live process runs it
            except (ValueError, ProcessLookupError):
                lock.unlink(missing_ok=True)  # left by a process that died: take it over
                continue
        os.write(handle, str(os.getpid()).encode())
        os.close(handle)
        return True
    return False


def run(arms: list[str], seeds: list[int], out: Path, threads: int, extra: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    for seed in seeds:
        for arm in arms:
            key = f"{arm}/seed{seed}"
            if key in done_keys(results):
                continue
            run_name = f"{arm}-seed{seed}"
            lock = out / f"{run_name}.lock"
            if not _claim(lock):
                print(f"{key}: run by process {lock.read_text().strip()}, skipped", flush=True)
                continue
            if key in done_keys(results):  # finished by another process since the check above
                lock.unlink()
                continue
            args = [sys.executable, "-m", "teamrl.cli", "train", str(CONFIG), f"seed={seed}", f"output_dir={out}",
                    f"run_name={run_name}", f"train.threads={threads}", "train.eval_every=8",
                    "train.checkpoint_every=4", "train.keep_last=1", *ARMS[arm], *extra]
            started, load = time.time(), os.getloadavg()[0]
            print(f"[{time.strftime('%H:%M:%S')}] {key}: {' '.join(args[2:])}", flush=True)
            if (out / run_name / "config.yaml").exists():  # an interrupted try: continue from its checkpoint
                args.append("train.resume=auto")
            subprocess.run(args, check=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)},
                           stdout=subprocess.DEVNULL)
            payload = {"key": key, "arm": arm, "seed": seed, "overrides": ARMS[arm] + extra, "threads": threads,
                       "wall_s": round(time.time() - started, 1), "load_start": round(load, 1),
                       "load_end": round(os.getloadavg()[0], 1), "commit": _commit(),
                       **read_run(out / run_name)}
            with results.open("a") as handle:
                handle.write(json.dumps(payload) + "\n")
            lock.unlink()
            final = payload["summary"]["final_success"]
            print(f"[{time.strftime('%H:%M:%S')}] {key}: final held-out {final:.3f}, wall {payload['wall_s']} s",
                  flush=True)


def summarize(out: Path) -> str:
    from teamrl.study.protocol import paired, verdict
    from teamrl.study.protocol import summarize as summary_of

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    by_arm: dict[str, dict[int, dict]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):  # per-seed values in seed order
        by_arm.setdefault(row["arm"], {})[row["seed"]] = row
    lines = ["Held-out success by step (mean over seeds; per seed in brackets):", ""]
    steps = sorted({int(s) for arm in by_arm.values() for r in arm.values() for s in r["curve"]})
    lines.append("| arm | " + " | ".join(f"step {s}" for s in steps) + " | median step s | wall s (load) |")
    lines.append("|---|" + "---:|" * (len(steps) + 2))
    for arm, seeds in by_arm.items():
        cells = []
        for step in steps:
            values = [r["curve"][str(step)]["success"] for r in seeds.values() if str(step) in r["curve"]]
            cells.append(f"{100 * sum(values) / len(values):.1f} [" + ", ".join(f"{100 * v:.0f}" for v in values) + "]"
                         if values else "")
        step_s = median(r["median_step_s"] for r in seeds.values())
        walls = ", ".join(f"{r['wall_s']:.0f} ({r['load_start']}-{r['load_end']})" for r in seeds.values())
        lines.append(f"| {arm} | " + " | ".join(cells) + f" | {step_s:.1f} | {walls} |")
    lines.append("")
    final = {arm: {seed: r["summary"]["final_success"] for seed, r in seeds.items()} for arm, seeds in by_arm.items()}
    last_eval = next(iter(next(iter(by_arm.values())).values()))["curve"]
    instances = int(last_eval[max(last_eval, key=int)]["instances"])
    for arm in final:
        if arm == "fp32" or "fp32" not in final:
            continue
        result = paired(final[arm], final["fp32"])
        lines.append(f"- final held-out, {arm} - fp32: {100 * result.diff.mean:+.1f} points; "
                     + verdict(result, directed=False, names=(arm, "fp32"), bound=BOUND, instances=instances))
        for step in steps[1:-1]:  # the evaluations in between: how fast, not only how far
            at = {arm_name: {seed: r["curve"][str(step)]["success"] for seed, r in by_arm[arm_name].items()
                             if str(step) in r["curve"]} for arm_name in (arm, "fp32")}
            if set(at[arm]) & set(at["fp32"]):
                mid = paired(at[arm], at["fp32"]).diff
                interval = f" [{100 * mid.low:+.1f}, {100 * mid.high:+.1f}]" if mid.low is not None else ""
                lines.append(f"  - at step {step}: {100 * mid.mean:+.1f} points{interval} over {mid.n} seeds")
    for arm, seeds in by_arm.items():
        gain = summary_of([r["summary"]["final_success"] - r["summary"]["initial_success"] for r in seeds.values()])
        lines.append(f"- {arm}: trained - untrained {100 * gain.mean:+.1f} points over {gain.n} seeds"
                     + (f" (95% [{100 * gain.low:+.1f}, {100 * gain.high:+.1f}])" if gain.low is not None else ""))
        corr = {k: median(r["correction_medians"][k] for r in seeds.values() if k in r["correction_medians"])
                for k in sorted({k for r in seeds.values() for k in r["correction_medians"]})}
        if corr:
            lines.append("  - medians over steps and seeds: " + ", ".join(f"{k} {v:.4g}" for k, v in corr.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of a serial run (the pipeline "
                        "gives its worker and its trainer a core each)")
    parser.add_argument("--out", type=Path, default=Path("runs/main-job-settings"))
    parser.add_argument("--summary", type=Path, help="print a results folder's table and stop")
    parser.add_argument("overrides", nargs="*", help="dotted overrides for every arm (e.g. train.steps=2)")
    args = parser.parse_args()
    if args.summary:
        print(summarize(args.summary))
        return
    run(args.arms, args.seeds, args.out, args.threads, args.overrides)


if __name__ == "__main__":
    main()
