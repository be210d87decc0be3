"""Held-out evaluation's share of training time, from a run's metrics: the old schedule against the new default.

Run: python -m benchmarks run eval_share [--set key=value ...] [--midway 0 50] [--out FILE]
     python -m benchmarks run eval_share --runs RUN_DIR [RUN_DIR ...]   (only read finished runs)

Trains the default quickstart config once per `train.midway_eval_instances` value (0 = every
evaluation on all eval_instances, as before; 50 = the new default), the runs side by side (one
`teamrl train` process each, started together, so that the machine's load hits them alike), and
prints, per run, the seconds of every held-out evaluation (metrics `time/eval_s`, the first and
the final one included) over the seconds of the training steps (`time/rollout_s` + `time/update_s`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from benchmarks.harness import add_out_argument, write_result

CONFIG = Path(__file__).resolve().parents[1] / "src" / "teamrl" / "configs" / "plan_path_team.yaml"


def eval_share(run_dir: Path) -> dict[str, float]:
    """{eval_s, train_s, share, evaluations, eval_instances} summed over a run's metrics.jsonl."""
    rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if "time/eval_s" in r]
    eval_s = sum(r["time/eval_s"] for r in evals)
    train_s = sum(r["time/rollout_s"] + r["time/update_s"] for r in rows if "time/rollout_s" in r)
    return {"eval_s": eval_s, "train_s": train_s, "share": eval_s / train_s if train_s else float("nan"),
            "evaluations": float(len(evals)), "eval_instances": sum(r.get("eval/instances", 0.0) for r in evals)}


def row(label: str, share: dict[str, float]) -> str:
    return (f"{label:<34}{share['evaluations']:>6.0f}{share['eval_instances']:>10.0f}{share['eval_s']:>9.1f}"
            f"{share['train_s']:>9.1f}{share['share']:>8.1%}")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--midway", nargs="*", type=int, default=[0, 50], help="train.midway_eval_instances values")
    parser.add_argument("--runs", nargs="*", default=[], help="read these finished run directories instead")
    add_out_argument(parser, "eval_share")
    args = parser.parse_args(argv)
    results = {str(path): eval_share(Path(path)) for path in args.runs}
    if not args.runs:
        output = Path(tempfile.mkdtemp(prefix="teamrl-eval-share-"))
        runs = {}
        for midway in args.midway:
            command = [sys.executable, "-m", "teamrl.cli", "train", str(CONFIG), *args.set,
                       f"train.midway_eval_instances={midway}", f"output_dir={output}", f"run_name=midway{midway}"]
            log = open(output / f"midway{midway}.log", "w")  # noqa: SIM115 - closed once the run ended
            runs[midway] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log)
        for midway, (proc, log) in runs.items():
            if proc.wait() != 0:
                raise SystemExit(f"the run with midway_eval_instances={midway} failed: see {log.name}")
            log.close()
            results[f"midway_eval_instances={midway}"] = eval_share(output / f"midway{midway}")
    lines = [f"held-out evaluation's share of training time; overrides: {' '.join(args.set) or 'none'}",
             f"{'run':<34}{'evals':>6}{'episodes':>10}{'eval s':>9}{'train s':>9}{'share':>8}"]
    lines += [row(label, share) for label, share in results.items()]
    text = "\n".join(lines)
    print(text)
    write_result(args.out, text.splitlines())
    return text


if __name__ == "__main__":
    main()
