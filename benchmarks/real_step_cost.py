"""Time and memory of one AT-GRPO step on the real checkpoints: SmolLM2-135M and Gemma-3-270M, LoRA per role
and full fine-tuning per role, on the real-model main job's task (the math team, level-2 arithmetic).

Run: nice python -m benchmarks run real_step_cost --steps 3 --out benchmarks/results/real_step_cost/unknown-host/real_step_cost.jsonl
     [--models smollm2-135m-instruct gemma-3-270m] [--modes lora full] [--threads 1]

Each (model, mode) is one `teamrl train configs/smollm2_math_team.yaml` run of `--steps` steps (batch 4 x K 4,
80 new tokens, regime per_role) with the model swapped in; Gemma-3 (a base model) gets the math team's worked
examples and a stop at the blank line (docs/howto/real-models.md). Read from the run's metrics.jsonl: each
step's rollout and update seconds (the first step is left out of the medians: it pays one-time costs), the
largest per-policy peak memory of an update (on CPU the growth of the resident set during it:
`teamrl.training.memory`), and the whole process's peak resident set (weights, optimizer state, rollout and
evaluation included). An update's time depends on how many samples it trains: groups whose rewards are all
equal carry no advantage and are skipped, so steps differ even on a quiet machine. One JSON line per (model, mode) is appended to --out as it finishes;
a re-run skips the pairs already there. Times are wall seconds of a step on a machine that may be shared: say
what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from teamrl.setup.model_sources import is_named_base_model
from teamrl.setup.real_model_checks import base_model_settings
from benchmarks.harness import default_out

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "src" / "teamrl" / "configs" / "smollm2_math_team.yaml"
MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
MODES = {"lora": (), "full": ("policy.lora=null",)}


def overrides(model: str, mode: str, steps: int, threads: int, out_dir: str) -> list[str]:
    """The `teamrl train` overrides of one (model, mode) run."""
    base = base_model_settings("math") if is_named_base_model(model) else ()  # the config's task is math
    return [f"policy.model={model}", *MODES[mode], *base, f"train.steps={steps}", "train.eval_every=0",
            "train.eval_instances=4", f"train.threads={threads}", "train.warmup_steps=0",
            f"output_dir={out_dir}", "run_name=cost"]


def measure(model: str, mode: str, steps: int, threads: int) -> dict:
    """One run's step costs, read back from its metrics."""
    with tempfile.TemporaryDirectory(prefix="teamrl-step-cost-") as out_dir:
        started = time.time()
        args = [sys.executable, "-m", "teamrl.cli", "train", str(CONFIG),
                *overrides(model, mode, steps, threads, out_dir)]
        log = Path(out_dir) / "stderr.txt"
        with log.open("w") as err:
            child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                                     env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            _, status, usage = os.wait4(child.pid, 0)  # this child's own resource use, its peak RSS among it
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{model} {mode}: teamrl train failed:\n{log.read_text()[-2000:]}")
        metrics_file = next(Path(out_dir).rglob("metrics.jsonl"))
        records = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    steps_seen = [r for r in records if "time/rollout_s" in r]
    later = steps_seen[1:] or steps_seen
    peak = max(v for r in steps_seen for k, v in r.items() if k.endswith("/peak_memory_mb"))
    return {"model": model, "mode": mode, "steps": len(steps_seen), "threads": threads,
            "rollout_s": [round(r["time/rollout_s"], 2) for r in steps_seen],
            "update_s": [round(r["time/update_s"], 2) for r in steps_seen],
            "median_rollout_s": round(statistics.median(r["time/rollout_s"] for r in later), 2),
            "median_update_s": round(statistics.median(r["time/update_s"] for r in later), 2),
            "peak_memory_mb": round(peak), "process_peak_rss_mb": round(usage.ru_maxrss / 1024), "wall_s": round(time.time() - started, 1),
            "load_average": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=default_out("real_step_cost").with_suffix(".jsonl"),
                        help="JSON lines, one per model and mode; a pair already there is skipped (default: %(default)s)")
    args = parser.parse_args(argv)
    done = set()
    if args.out.exists():  # records from before the process peak was measured do not count as done
        done = {(r["model"], r["mode"], r["steps"], r["threads"])
                for r in map(json.loads, args.out.read_text().splitlines()) if "process_peak_rss_mb" in r}
    for model in args.models:
        for mode in args.modes:
            if (model, mode, args.steps, args.threads) in done:
                print(f"{model} {mode}: already in {args.out}")
                continue
            record = measure(model, mode, args.steps, args.threads)
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{model} {mode}: rollout {record['median_rollout_s']} s, update {record['median_update_s']} s, "
                  f"update peak {record['peak_memory_mb']} MB, process peak {record['process_peak_rss_mb']} MB (load {record['load_average'][0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
