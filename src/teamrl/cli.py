"""`teamrl` command line: quickstart, warmup, train, eval, export, report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from teamrl.config import ConfigError, RunConfig, load_config

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "plan_path_team.yaml"


def _load(args: argparse.Namespace) -> RunConfig:
    return load_config(args.config, args.overrides)


def cmd_warmup(args: argparse.Namespace) -> int:
    from teamrl.training.tiny_default import WarmupRecipe, warm_up

    config = _load(args)
    kind = "team" if config.workflow.name == "single" else config.workflow.name
    recipe = WarmupRecipe.for_task(config.task, config.workflow.max_turns, kind, steps=config.policy.warmup_sft_steps)
    started = time.time()
    path = warm_up(recipe, force=args.force)
    print(f"tiny default model ready in {time.time() - started:.1f}s: {path}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from teamrl.training.checkpoint import CheckpointError
    from teamrl.training.loop import train

    config = _load(args)
    if getattr(args, "resume", None):
        config.train.resume = args.resume
    try:
        run_dir = train(config)
    except CheckpointError as err:
        print(f"teamrl: error: {err}", file=sys.stderr)
        return 2
    summary = json.loads((run_dir / "summary.json").read_text())
    print(f"held-out success: before {summary['initial_success']:.1%}, after "
          f"{summary['final_success']:.1%} (best {summary['best_success']:.1%} at step "
          f"{summary['best_step']}); {summary['steps']} steps in {summary['train_seconds']:.0f}s")
    print(f"run directory: {run_dir}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from teamrl.rollout.agent_params import agent_sampling
    from teamrl.training.build import build_policies, build_workflow, policies_from_checkpoint
    from teamrl.training.evaluate import evaluate

    config = _load(args)
    workflow = build_workflow(config)
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    if args.checkpoint:
        policies, mapping = policies_from_checkpoint(config, workflow, Path(args.checkpoint))
    else:
        policies, mapping = build_policies(config, workflow)
    metrics, _ = evaluate(workflow, policies, mapping, args.instances or config.train.eval_instances,
                          seed=config.seed, sampling=sampling)
    print(json.dumps(metrics, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from teamrl.policies.storage import export_checkpoint

    for source, target in export_checkpoint(Path(args.checkpoint), Path(args.merged), args.base):
        print(f"{source} -> {target}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from teamrl.report import ReportError, report_command

    try:
        print(f"report written: {report_command(args.run_dirs, args.out)}")
    except ReportError as err:
        print(f"teamrl: error: {err}", file=sys.stderr)
        return 2
    return 0


def cmd_alerts(args: argparse.Namespace) -> int:
    from teamrl.diagnostics.replay import replay_alerts

    try:
        alerts = replay_alerts(Path(args.run_dir), args.overrides)
    except ValueError as err:
        print(f"teamrl: error: {err}", file=sys.stderr)
        return 2
    for alert in alerts:
        print(f"step {alert.step:4d}  {alert.kind}  {alert.subject}\n    {alert.message}")
    if not alerts:
        print("no alert")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teamrl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p: argparse.ArgumentParser, required: bool = True) -> None:
        p.add_argument("config", nargs=None if required else "?", default=None if required else str(DEFAULT_CONFIG),
                       help="YAML run config")
        p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=50 algorithm.k=4")

    p = sub.add_parser("quickstart", help="warm up the tiny default (cached) and train the default team on Plan-Path")
    p.add_argument("overrides", nargs="*", help="dotted overrides of the default config")
    p.set_defaults(func=cmd_train, config=str(DEFAULT_CONFIG))
    p = sub.add_parser("warmup", help="build and warm up the tiny default model (cached)")
    with_config(p, required=False)
    p.add_argument("--force", action="store_true", help="redo it even if cached")
    p.set_defaults(func=cmd_warmup)
    p = sub.add_parser("train", help="train a team")
    with_config(p)
    p.add_argument("--resume", metavar="DIR", help="continue a stopped run: its run directory (newest complete "
                   "checkpoint), a checkpoints/stepN folder, or 'auto' (sets train.resume)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("eval", help="score a checkpoint (or the untrained base) on the held-out split")
    with_config(p)
    p.add_argument("--checkpoint", help="a checkpoint folder (checkpoints/<tag>) or a model folder")
    p.add_argument("--instances", type=int, default=0, help="held-out instances (default: train.eval_instances)")
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser("export", help="write a checkpoint's policies as plain HF models (LoRA adapters merged)")
    p.add_argument("checkpoint", help="checkpoints/<tag> of a run, or one policy's folder in it")
    p.add_argument("--merged", required=True, metavar="OUT", help="output folder (one sub-folder per policy)")
    p.add_argument("--base", help="base model folder of the adapters (default: the one their config names)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("report", help="HTML report of a run (RUN_DIR/report/index.html), or a comparison of several")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by train")
    p.add_argument("--out", help="output folder (default: RUN_DIR/report; ./teamrl-compare for several runs)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("alerts", help="the alerts a finished run raises under other diagnostics settings, "
                       "replayed from its metrics (alerts never change training)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by train")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. diagnostics.window=1 diagnostics.echo_cosine=0.7")
    p.set_defaults(func=cmd_alerts)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, FileNotFoundError, FileExistsError) as err:
        print(f"teamrl: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
