"""Fake run directories, written file by file the way training/run_dir.py and loop.py write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from teamrl.report import report_command

import pytest
import yaml

AGENTS = ("tool", "plan")
# Model output is untrusted: every fake transcript carries markup that must render as text.
HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script><b>bold?</b> & \"quotes\""


def write_run(root: Path, name: str, eval_success: list[float], *, steps: int = 40, eval_every: int = 10,
              policies: tuple[str, ...] = ("shared",), summary: bool = True,
              train_seconds: float = 123.4) -> Path:
    """A finished (or, with summary=False, unfinished) run with one eval every `eval_every` steps.

    `eval_success` holds the held-out success of evals at 0, eval_every, ..., and finally `steps`.
    """
    eval_steps = list(range(0, steps, eval_every)) + [steps]
    assert len(eval_success) == len(eval_steps), f"need {len(eval_steps)} eval values"
    run = root / name
    run.mkdir(parents=True)
    config = {"seed": 0, "output_dir": str(root), "run_name": name, "regime": "shared",
              "task": {"name": "plan_path", "size": 6}, "workflow": {"name": "team", "max_turns": 3},
              "policy": {"model": "tiny-default", "lr": 1e-4},
              "algorithm": {"grouping": "tree", "k": 4}, "train": {"steps": steps, "eval_every": eval_every}}
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    success_at = dict(zip(eval_steps, eval_success))
    lines, best, best_step = [], eval_success[0], 0

    def eval_line(step: int) -> dict:
        s = success_at[step]
        return {"step": step, "eval/success": s, "eval/team_return": 2 * s - 0.5, "eval/turns": 2.5,
                **{f"eval/reward/{a}": s - 0.1 * i for i, a in enumerate(AGENTS)}, "time/eval_s": 1.5}

    lines.append(eval_line(0))
    for step in range(1, steps + 1):
        progress = step / steps
        # Training curves head for the run's final held-out success, so overlaid runs differ.
        train = {"step": step, "train/success": 0.2 + (eval_success[-1] - 0.2) * progress,
                 "train/team_return": eval_success[-1] * progress,
                 "train/turns": 2.0, "train/samples": 64.0, "adv/zero_signal_frac": 0.8 - 0.5 * progress,
                 "adv/adv_std": 0.7, "time/rollout_s": 2.0, "time/update_s": 1.0,
                 "time/tokens_per_s": 900.0, "time/elapsed_s": 3.0 * step}
        for i, agent in enumerate(AGENTS):
            train |= {f"role/{agent}/reward": eval_success[-1] * progress - 0.2 * i, f"role/{agent}/response_len": 12.0 + i,
                      f"role/{agent}/adv_abs": 0.5 - 0.3 * progress}
        for i, role in enumerate(AGENTS):  # diagnostics: tool takes over the gradient, plan grows longer
            share = 0.5 + 0.4 * progress if role == "tool" else 0.5 - 0.4 * progress
            train |= {f"diag/role/{role}/grad_norm": 1.0 + i, f"diag/role/{role}/grad_share": share,
                      f"diag/role/{role}/tokens_share": share, f"diag/role/{role}/coherence": 0.2 + 0.5 * progress,
                      f"diag/role/{role}/response_len": (30.0 if role == "tool" else 6.0 + 10 * progress),
                      f"diag/role/{role}/response_len_drift": 0.0 if role == "tool" else 10 * progress,
                      f"diag/role/{role}/format_ok": 1.0 - 0.3 * progress * i,
                      f"diag/role/{role}/clip_frac": 0.02, f"diag/role/{role}/entropy": 1.0 - 0.5 * progress,
                      f"diag/role/{role}/correct": 0.3 + 0.4 * progress}
        for policy in policies:
            train |= {f"policy/{policy}/{k}": v for k, v in
                      {"loss": 0.01, "entropy": 1.5 - progress, "clip_frac": 0.05, "grad_norm": 2.0,
                       "lr": 1e-4, "samples": 32.0}.items()}
        train["policy/shared/kl_ref"] = None  # non-finite values are logged as null
        if step in success_at and step < steps:
            lines.append(eval_line(step))
            if success_at[step] > best:
                best, best_step = success_at[step], step
            train["eval/best_success"] = best
        lines.append(train)
    lines.append(eval_line(steps))
    if eval_success[-1] > best:  # a tie keeps the earlier step, as loop.py does
        best, best_step = eval_success[-1], steps
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    transcripts = run / "transcripts"
    transcripts.mkdir()
    for step in eval_steps:
        episodes = [{"instance": i, "success": i % 2 == 0,
                     "turns": [{"turn": t, "agent": AGENTS[t % 2],
                                "text": f"step {step} instance {i} turn {t}: {HOSTILE}",
                                "reward": 0.5 * t, "terms": {"format": 0.1, "<goal>": 0.4}}
                               for t in range(3)]}
                    for i in range(3)]
        (transcripts / f"eval_step{step:05d}.json").write_text(json.dumps(episodes, indent=2))
        if 0 < step < steps:  # training episodes at eval steps, with advantages
            for episode in episodes:
                for turn in episode["turns"]:
                    turn["advantage"] = 0.25 * turn["turn"] - 0.3
            (transcripts / f"train_step{step:05d}.json").write_text(json.dumps(episodes[:2], indent=2))
    alert_step = eval_steps[len(eval_steps) // 2]
    (run / "alerts.jsonl").write_text(json.dumps(
        {"step": alert_step, "kind": "dominant_role", "subject": "tool>plan",
         "message": f"Dominant role: role 'tool' carries 85% of the gradient {HOSTILE}"}) + "\n")
    if summary:
        (run / "summary.json").write_text(json.dumps(
            {"initial_success": eval_success[0], "final_success": eval_success[-1], "best_success": best,
             "best_step": best_step, "steps": steps, "train_seconds": train_seconds,
             "agent_to_policy": {a: policies[0] for a in AGENTS}}, indent=2))
    return run


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """make_run(name, eval_success, **options) -> a fake run directory under tmp_path."""
    return lambda name, eval_success, **kw: write_run(tmp_path, name, eval_success, **kw)


@pytest.fixture(scope="session")
def write_fake_run() -> Callable[..., Path]:
    """write_run itself, for module-scoped fixtures that render a report once and share it."""
    return write_run


# Plotting dominates the test time, so each report is rendered once per session and shared
# by the page tests and the browser tests (neither modifies it).
SINGLE_SUCCESS = [0.25, 0.4, 0.7, 0.6, 0.65]  # evals at steps 0, 10, 20, 30, 40: best 70% at step 20


@pytest.fixture(scope="session")
def single_report(tmp_path_factory) -> tuple[Path, str]:
    """(index.html, its text) of the report of run "alpha" with SINGLE_SUCCESS."""
    run = write_run(tmp_path_factory.mktemp("runs"), "alpha", SINGLE_SUCCESS)
    page = report_command([str(run)], None)
    return page, page.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def comparison_report(tmp_path_factory) -> tuple[Path, str, list[Path]]:
    """(index.html, its text, run dirs) comparing two finished runs and one without summary.json."""
    root = tmp_path_factory.mktemp("runs")
    runs = [write_run(root, "alpha", SINGLE_SUCCESS, train_seconds=100.0),
            write_run(root, "beta", [0.1, 0.3, 0.5], steps=20, train_seconds=50.0, policies=("p0", "p1")),
            write_run(root, "gamma", [0.3, 0.2, 0.45], steps=20, summary=False)]
    page = report_command([str(r) for r in runs], str(tmp_path_factory.mktemp("cmp") / "comparison"))
    return page, page.read_text(encoding="utf-8"), runs
