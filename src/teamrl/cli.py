"""`teamrl` command line: quickstart, warmup, train, eval, serve, transcripts, sft, export, report, alerts, study, models."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from teamrl import __version__
from teamrl.config import ConfigError, RunConfig, load_config

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "plan_path_team.yaml"
# quickstart --model NAME: the real-model main job (a LoRA adapter per role on NAME)
REAL_MODEL_CONFIG = Path(__file__).parent / "configs" / "smollm2_math_team.yaml"


def _load(args: argparse.Namespace) -> RunConfig:
    return load_config(args.config, args.overrides)


def _set_threads(config: RunConfig) -> None:
    """torch's thread count from train.threads (the training loop re-decides `auto` every step itself)."""
    from teamrl.setup.threads import set_threads

    set_threads(config.train.threads)


def cmd_warmup(args: argparse.Namespace) -> int:
    from teamrl.setup.tiny_default import WarmupRecipe, warm_up

    config = _load(args)
    _set_threads(config)
    kind = "team" if config.workflow.name == "single" else config.workflow.name
    recipe = WarmupRecipe.for_task(config.task, config.workflow.max_turns, kind, steps=config.policy.warmup_sft_steps)
    started = time.time()
    path = warm_up(recipe, force=args.force)
    print(f"tiny default model ready in {time.time() - started:.1f}s: {path}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from teamrl.api import train

    config = _load(args)
    result = train(config, resume=getattr(args, "resume", None) or None)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    best = (
        f"best {result.best_success:.1%} at step {result.best_step}"
        if result.best_step
        else f"best {result.best_success:.1%} at step 0: training never beat the initial model"
    )
    eval_instances = config.train.eval_instances
    if summary.get("best_instances", eval_instances) < eval_instances:
        best += f", picked on the first {summary['best_instances']} instances"
    print(
        f"held-out success: before {result.initial_success:.1%}, after "
        f"{result.final_success:.1%} ({best}); {result.steps} steps in {result.seconds:.0f}s"
    )
    print(f"run directory: {result.run_dir}")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    """The tiny default's main job, or with --model the real-model main job on that checkpoint."""
    if args.model:
        args.config = str(REAL_MODEL_CONFIG)
        args.overrides = [f"policy.model={args.model}", *args.overrides]
    return cmd_train(args)


def cmd_models(args: argparse.Namespace) -> int:
    from teamrl.setup.model_sources import CHECKPOINTS, install, installed

    if args.action == "list":
        for checkpoint in CHECKPOINTS.values():
            state = "installed" if installed(checkpoint) else f"not installed: {checkpoint.install_command()}"
            print(f"{checkpoint.name:24s} {checkpoint.summary}\n{'':24s} {state}")
        return 0
    for name in args.names:
        print(f"{name}: ready at {install(name)}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from teamrl.setup.loaded_team import Team, check_results_folder

    if args.out:
        check_results_folder(args.out)  # before the models load: a bad folder costs nothing
    config = _load(args)
    _set_threads(config)
    with Team.from_config(config, checkpoint=args.checkpoint) as team:
        result = team.evaluate(args.instances or config.train.eval_instances, seed=config.seed)
    if args.out:
        print(f"per-instance results and transcripts: {result.write(args.out) / 'episodes.jsonl'}", file=sys.stderr)
    metrics = {
        "success": result.success,
        "team_return": result.team_return,
        "turns": result.turns,
        **{f"reward/{agent}": value for agent, value in result.reward_by_agent.items()},
    }
    print(json.dumps(metrics, indent=2))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from teamrl.gateway.serve import serve_run, stop_serving

    gateway = serve_run(
        Path(args.run),
        args.host,
        args.port,
        os.environ.get("TEAMRL_GATEWAY_TOKEN"),
        threads=args.threads,
        overrides=args.overrides,
    )
    print(
        f"teamrl: serving agents {', '.join(gateway.routes)} at {gateway.base_url}\n"
        f"OPENAI_BASE_URL={gateway.base_url} OPENAI_API_KEY={gateway.token}  (Ctrl-C stops)",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    finally:
        stop_serving(gateway)


def cmd_export(args: argparse.Namespace) -> int:
    from teamrl.policies.storage import export_checkpoint

    for source, target in export_checkpoint(Path(args.checkpoint), Path(args.merged), args.base):
        print(f"{source} -> {target}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from teamrl.report import report_command

    print(f"report written: {report_command(args.run_dirs, args.out)}")
    return 0


def cmd_alerts(args: argparse.Namespace) -> int:
    from teamrl.report.alert_replay import replay_alerts

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


def cmd_probe(args: argparse.Namespace) -> int:
    from teamrl.probes.report import run_probe

    try:
        return run_probe(args.task, args.instances, Path(args.out) if args.out else None, sys.stdout, args.task_option)
    except ValueError as err:  # an unknown task, or one without a catalogue: the message names the fix
        print(f"teamrl: error: {err}", file=sys.stderr)
        return 2


def cmd_data(args: argparse.Namespace) -> int:
    from teamrl.tasks.data_sources import data_report

    print(data_report(args.data_dir))
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from teamrl.study.command import run_command, study_folder

    if args.check_bits:
        from teamrl.study.bit_check import check_bits

        check = check_bits(study_folder(args.name, args.quick, args.out), args.check_bits)
        return 0 if check["same"] == len(check["runs"]) else 1
    page = run_command(
        args.name,
        args.quick,
        args.seeds,
        args.rows,
        args.out,
        args.overrides,
        args.instances,
        jobs=args.jobs,
        remaining_only=args.remaining,
        accept_code=args.accept_code,
        test_instances=args.test_instances,
    )
    if args.remaining:
        return 0
    print(f"study written: {page} (table: {page.parent / 'table.md'}, results: {page.parent / 'results.json'})")
    return 0


def cmd_transcripts(args: argparse.Namespace) -> int:
    from teamrl.training.transcript_file import write_transcripts
    from teamrl.training.transcript_sources import run_transcripts, scripted_transcripts

    config = _load(args)
    _set_threads(config)
    if args.source == "scripted":
        records = scripted_transcripts(config, args.episodes, args.only_successes)
    else:  # a trained run keeps its successes only: failures are not demonstrations worth imitating
        records = run_transcripts(config, Path(args.source), args.episodes, only_successes=True)
    path = write_transcripts(Path(args.out), records)
    episodes = len({r.episode for r in records})
    solved = len({r.episode for r in records if r.success})
    print(f"{len(records)} turns of {episodes} episodes ({solved} solved) written to {path}")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from teamrl.training.offline_sft import OfflineSFT, offline_sft
    from teamrl.training.transcript_file import read_transcripts

    config = _load(args)
    _set_threads(config)
    options = OfflineSFT(steps=args.steps, batch_size=args.batch_size, lr=args.lr)
    run_dir = offline_sft(config, read_transcripts(Path(args.transcripts)), options)
    summary = json.loads((run_dir / "summary.json").read_text())
    for name, info in summary["policies"].items():
        print(f"policy {name}: {info['turns']} turns, loss {info['loss_before']:.3f} -> {info['loss_after']:.3f}")
    print(f"run directory: {run_dir} (score it: teamrl eval CONFIG --checkpoint {run_dir / 'checkpoints' / 'best'})")
    return 0


def _thread_setting(text: str) -> int | str:
    """--threads: 'auto' or a whole number >= 1."""
    from teamrl.setup.threads import check_threads

    value: int | str = text if text == "auto" else (int(text) if text.isdigit() else text)
    problem = check_threads(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def _with_parents(*parents: argparse.ArgumentParser) -> type[argparse.ArgumentParser]:
    """An ArgumentParser class whose instances (the subcommands) inherit `parents`' options."""

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["parents"] = [*parents, *kwargs.get("parents", [])]
            super().__init__(*args, **kwargs)

    return Parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teamrl", description=__doc__)
    parser.add_argument("--version", action="version", version=f"teamrl {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error (also: TEAMRL_DEBUG=1)"
    )
    # --debug also after the command (`teamrl train X.yaml --debug`); SUPPRESS keeps the top-level value.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_with_parents(debug))

    def with_config(p: argparse.ArgumentParser, required: bool = True) -> None:
        p.add_argument(
            "config",
            nargs=None if required else "?",
            default=None if required else str(DEFAULT_CONFIG),
            help="YAML run config",
        )
        p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.steps=50 algorithm.k=4")

    p = sub.add_parser(
        "quickstart",
        help="warm up the tiny default (cached) and train the default team on Plan-Path; "
        "with --model, train a real model's two-role math team",
    )
    p.add_argument("overrides", nargs="*", help="dotted overrides of the default config")
    p.add_argument(
        "--model",
        metavar="NAME",
        help="a shipped checkpoint (e.g. smollm2-135m-instruct; `teamrl models "
        "list`): train its reasoner + Python-tool team, a LoRA adapter per role "
        "(src/teamrl/configs/smollm2_math_team.yaml)",
    )
    p.set_defaults(func=cmd_quickstart, config=str(DEFAULT_CONFIG))
    p = sub.add_parser("models", help="the real checkpoints teamrl ships by name: list them, or install one")
    p.add_argument("action", choices=["list", "install"])
    p.add_argument("names", nargs="*", metavar="NAME", help="install: the checkpoints to install and convert")
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("warmup", help="build and warm up the tiny default model (cached)")
    with_config(p, required=False)
    p.add_argument("--force", action="store_true", help="redo it even if cached")
    p.set_defaults(func=cmd_warmup)
    p = sub.add_parser("train", help="train a team")
    with_config(p)
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="continue a stopped run: its run directory (newest complete "
        "checkpoint), a checkpoints/stepN folder, or 'auto' (sets train.resume)",
    )
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("eval", help="score a checkpoint (or the untrained base) on the held-out split")
    with_config(p)
    p.add_argument("--checkpoint", help="a checkpoint folder (checkpoints/<tag>) or a model folder")
    p.add_argument("--instances", type=_positive, default=0, help="held-out instances (default: train.eval_instances)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="also write DIR/eval.json and DIR/episodes.jsonl (each instance's "
        "result and transcript); DIR must be new or empty",
    )
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser("transcripts", help="write a collaboration-transcript file (JSONL) for `teamrl sft`")
    with_config(p)
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="SOURCE",
        help="'scripted' (the task's strong scripted team) or a trained run directory (its successes)",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write")
    p.add_argument("--episodes", type=_positive, default=200, help="training-split episodes to play (default 200)")
    p.add_argument("--only-successes", action="store_true", help="keep the solved episodes only (scripted)")
    p.set_defaults(func=cmd_transcripts)
    p = sub.add_parser("sft", help="offline SFT of the config's policies on a transcript file (docs/howto/sft.md)")
    with_config(p)
    p.add_argument("--transcripts", required=True, metavar="FILE", help="a file written by `teamrl transcripts`")
    p.add_argument("--steps", type=_positive, default=100, help="optimizer steps per policy (default 100)")
    p.add_argument("--batch-size", type=_positive, default=32, help="turns per step (default 32)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    p.set_defaults(func=cmd_sft)
    p = sub.add_parser(
        "serve",
        help="serve a run's trained agents (or a config's base models) over an OpenAI-compatible "
        "API (docs/howto/gateway.md)",
    )
    p.add_argument(
        "run",
        metavar="RUN_DIR|CONFIG",
        help="a run directory (its final, else best checkpoint), "
        "checkpoints/<tag>, or a config .yaml (its base, untrained models)",
    )
    p.add_argument(
        "overrides", nargs="*", help="with a config: dotted overrides, e.g. policy.model=smollm2-135m-instruct"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    p.add_argument(
        "--threads",
        type=_thread_setting,
        default=None,
        metavar="N|auto",
        help="torch threads for sampling: a number or auto (default: the run's train.threads)",
    )
    p.set_defaults(func=cmd_serve)
    p = sub.add_parser("export", help="write a checkpoint's policies as plain HF models (LoRA adapters merged)")
    p.add_argument("checkpoint", help="checkpoints/<tag> of a run, or one policy's folder in it")
    p.add_argument("--merged", required=True, metavar="OUT", help="output folder (one sub-folder per policy)")
    p.add_argument("--base", help="base model folder of the adapters (default: the one their config names)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("report", help="HTML report of a run (RUN_DIR/report/index.html), or a comparison of several")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories written by train")
    p.add_argument("--out", help="output folder (default: RUN_DIR/report; ./teamrl-compare for several runs)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser(
        "alerts",
        help="the alerts a finished run raises under other diagnostics settings, "
        "replayed from its metrics (alerts never change training)",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by train")
    p.add_argument(
        "overrides", nargs="*", help="dotted overrides, e.g. diagnostics.window=1 diagnostics.echo_cosine=0.7"
    )
    p.set_defaults(func=cmd_alerts)
    p = sub.add_parser(
        "probe", help="reward-hacking probe: hacks tried and rewarded per verifier (goal 0 rewarded; exit 1 if any)"
    )
    p.add_argument(
        "--task", action="append", metavar="NAME", help="a task to probe (repeatable; default: every registered task)"
    )
    p.add_argument("--instances", type=_positive, default=4, help="held-out instances per task (default: 4)")
    p.add_argument("--out", metavar="FILE", help="write the counts and every rewarded attempt as JSON")
    p.add_argument(
        "--task-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a task setting for every probed task (repeatable), e.g. source=gsm8k",
    )
    p.set_defaults(func=cmd_probe)
    p = sub.add_parser(
        "data",
        help="where the benchmark data sets (GSM8K, MATH-500, AIME, HumanEval, MBPP) are "
        "found, and where to get the missing ones",
    )
    p.add_argument("--data-dir", metavar="DIR", help="a folder to look in first (as a task's data_dir)")
    p.set_defaults(func=cmd_data)
    p = sub.add_parser("study", help="run a named study's table (rows x seeds; docs/study/index.md)")
    from teamrl.study.rows import ROWS, STUDIES

    p.add_argument("name", choices=sorted(STUDIES), help="the study (its task's config and rows)")
    p.add_argument("overrides", nargs="*", help="dotted overrides for every run, e.g. train.steps=20")
    p.add_argument("--quick", action="store_true", help="one seed and a short budget: a smoke run of the table")
    p.add_argument("--seeds", type=int, nargs="+", metavar="S", help="run seeds (default: 0 1 2; --quick: 0)")
    p.add_argument(
        "--rows",
        nargs="+",
        choices=list(ROWS),
        metavar="ROW",
        help=f"a subset of the rows (default: all): {', '.join(ROWS)}",
    )
    p.add_argument(
        "--instances",
        type=_positive,
        metavar="N",
        help="validation and test instances per evaluation (default: 100; --quick: 24)",
    )
    p.add_argument(
        "--test-instances",
        type=_positive,
        metavar="N",
        help="test instances only (default: the study's; overrides --instances for the test split)",
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default: runs/study-NAME[-quick])")
    p.add_argument(
        "--accept-code",
        action="store_true",
        help="continue a folder made at another code digest without re-running one cell to check it (recorded)",
    )
    p.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        metavar="N",
        help="run the seeds in N processes at once, one torch thread each (default 1)",
    )
    p.add_argument(
        "--remaining",
        action="store_true",
        help="list the cells still to run with an ETA (from measured cell times) and stop",
    )
    p.add_argument(
        "--check-bits",
        type=_positive,
        metavar="N",
        help="replay the first N steps of every finished cell's runs and compare them bit for bit with their "
        "recorded fingerprints (exit 1 if any parted); runs no cell",
    )
    p.set_defaults(func=cmd_study)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; every failure ends in one line on stderr and a non-zero exit code.

    Exit codes: 2 bad input (config, files, a locked run directory) or a full disk, 130 Ctrl-C, 1 anything else
    (its traceback goes to a file the line names). --debug or TEAMRL_DEBUG=1 re-raise instead.
    """
    parser = build_parser()
    from teamrl.training.run_log import quiet_third_party

    quiet_third_party()  # library progress bars off; warnings go to the run's train.log
    args, extra = parser.parse_known_args(argv)
    # Overrides after an option (`train X.yaml --resume R train.steps=9`) land in `extra`: keep them.
    if (
        extra
        and isinstance(getattr(args, "overrides", None), list)
        and all("=" in item and not item.startswith("-") for item in extra)
    ):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    debug = args.debug or os.environ.get("TEAMRL_DEBUG", "") not in ("", "0")
    try:
        return args.func(args)
    except Exception as err:  # noqa: BLE001 - the one place that turns errors into a message
        if debug:
            raise
        return _report_error(err)
    except KeyboardInterrupt as err:
        if debug:
            raise
        from teamrl.training.run_dir import TrainingInterrupted, describe_stopped_run

        if isinstance(err, TrainingInterrupted):
            print(describe_stopped_run(err.run_dir), file=sys.stderr)
        elif args.func in (cmd_train, cmd_quickstart):
            print("teamrl: interrupted before the run started; no run directory was written", file=sys.stderr)
        else:
            print(f"teamrl: {args.command} interrupted", file=sys.stderr)
        return 130


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean bad input; their message says what is wrong and how to fix it."""
    from teamrl.report import ReportError
    from teamrl.tasks.datafiles import DatasetFormatError
    from teamrl.training.checkpoint import CheckpointError
    from teamrl.training.run_dir import RunLockedError
    from teamrl.training.run_files import RunFileError

    return (
        ConfigError,
        DatasetFormatError,
        CheckpointError,
        ReportError,
        RunLockedError,
        RunFileError,
        FileNotFoundError,
        FileExistsError,
        NotADirectoryError,
        IsADirectoryError,
        PermissionError,
        ImportError,
    )


def _report_error(err: Exception) -> int:
    from teamrl.training.disk_full import read_only_message
    from teamrl.training.run_dir import disk_full_message

    message = " ".join(str(err).split()) or type(err).__name__
    # Before the traceback file below: it would not fit on a full disk, nor be useful for a read-only one.
    full = disk_full_message(err) or read_only_message(err)
    if full is not None:
        print(full, file=sys.stderr)
        return 2
    if isinstance(err, _user_errors()):
        print(f"teamrl: error: {message}", file=sys.stderr)
        return 2
    # Not a known kind of bad input, so maybe a bug: keep the traceback for a bug report.
    fd, path = tempfile.mkstemp(prefix="teamrl-error-", suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write("".join(traceback.format_exception(err)))
    print(
        f"teamrl: error: {type(err).__name__}: {message} (traceback in {path}; --debug or TEAMRL_DEBUG=1 prints it)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
