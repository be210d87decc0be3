"""`teamrl sft`: offline supervised fine-tuning of a config's policies on a transcript file.

Each turn trains the policy its agent maps to under the config's regime / `roles:` mapping (one
shared policy sees every turn; per-role policies see their role's turns). The loss is the response
NLL only, the prompt wrapped as the rollout wraps it (`Policy.encode_prompt`), the same trainer as
the warm-up (`teamrl.setup.sft`). The run folder has the layout of `teamrl train`'s
(config.yaml, metrics.jsonl, checkpoints/best/<policy>/, summary.json), so `teamrl eval CONFIG
--checkpoint RUN/checkpoints/best` scores it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError, RunConfig
from teamrl.setup.sft import Demo, SFTSettings, heldout_loss, supervised_finetune
from teamrl.setup.team import build_policies, build_workflow
from teamrl.training.run_dir import RunDirectory, RunLock, default_run_name, refuse_existing_run
from teamrl.training.transcript_file import TurnRecord
from teamrl.workflows.base import Workflow

SCORED_DEMOS = 256
"""Demos per policy whose loss is reported before and after training (the first ones of its file)."""


@dataclass(frozen=True)
class OfflineSFT:
    """How `teamrl sft` trains (its command-line flags)."""

    steps: int = 100
    """Optimizer steps per policy."""
    batch_size: int = 32
    """Turns per step (of the policy's own turns)."""
    lr: float = 1e-3
    """Peak AdamW learning rate (linear warm-up over a tenth of the steps, at most 20, then cosine to 0)."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.steps < 1 or not self.lr > 0:
            raise ConfigError(f"--steps must be >= 1 and --lr > 0, got {self.steps} and {self.lr}")

    def settings(self, seed: int) -> SFTSettings:
        """The warm-up trainer's settings for these options (no held-out early stopping)."""
        return SFTSettings(steps=self.steps, lr=self.lr, warmup_steps=min(20, self.steps // 10), seed=seed)


def demos_by_policy(
    config: RunConfig, workflow: Workflow, mapping: dict[str, str], records: list[TurnRecord]
) -> dict[str, list[Demo]]:
    """Policy name -> the (prompt, response) of every turn its agents spoke; refuses turns of another
    task or of agents / roles the config's workflow does not have."""
    task = config.task["name"]
    others = sorted({r.task for r in records} - {task})
    if others:
        raise ConfigError(
            f"the transcripts are of task(s) {', '.join(others)}, the config's task is {task!r}; "
            "use the config the transcripts were made with"
        )
    roles = {a.name: a.role for a in workflow.agents}
    strangers = sorted({f"{r.agent} ({r.role})" for r in records if roles.get(r.agent) != r.role})
    if strangers:
        have = ", ".join(f"{a} ({r})" for a, r in roles.items())
        raise ConfigError(
            f"the transcripts have agent(s) {', '.join(strangers)} that workflow "
            f"{config.workflow.name!r} lacks (its agents: {have}); set workflow.name to the "
            "workflow the transcripts were made with"
        )
    demos: dict[str, list[Demo]] = {}
    for record in records:
        demos.setdefault(mapping[record.agent], []).append((record.prompt, record.response))
    return demos


def shuffled_batches(demos: list[Demo], batch_size: int, seed: int) -> Iterator[list[Demo]]:
    """Endless batches: epochs of `demos` in a fresh seeded order each (a batch may span two epochs)."""
    rng = random.Random(seed)
    order: list[int] = []
    while True:
        batch: list[Demo] = []
        while len(batch) < batch_size:
            if not order:
                order = rng.sample(range(len(demos)), len(demos))
            batch.append(demos[order.pop()])
        yield batch


def offline_sft(
    config: RunConfig, records: list[TurnRecord], options: OfflineSFT, model_path: str | None = None
) -> Path:
    """Fine-tune the config's policies on `records`; returns the run directory.

    model_path: the base model to start from where a policy's model is 'tiny-default' (default: warm it up).
    """
    workflow = build_workflow(config)
    policies, mapping = build_policies(config, workflow, model_path)
    demos = demos_by_policy(config, workflow, mapping, records)
    path = Path(config.output_dir) / (config.run_name or default_run_name(config))
    refuse_existing_run(path)
    run = RunDirectory(config, None, RunLock(path))
    started = time.time()
    summary: dict[str, Any] = {"transcript_turns": len(records), "policies": {}}
    try:
        for offset, (name, own) in enumerate(demos.items()):
            scored = own[:SCORED_DEMOS]
            before = heldout_loss(policies[name], scored)

            def log(step: int, loss: float, name: str = name) -> None:
                run.log(step + 1, {f"sft/{name}/loss": loss})

            batches = shuffled_batches(own, options.batch_size, config.seed + offset)
            result = supervised_finetune(policies[name], batches, options.settings(config.seed), log=log)
            summary["policies"][name] = {
                "turns": len(own),
                "loss_before": before,
                "loss_after": heldout_loss(policies[name], scored),
                "final_batch_loss": result.losses[-1],
                "steps": len(result.losses),
            }
        # Policies no turn maps to keep their starting weights (they are saved, so eval finds them).
        run.save_checkpoint("best", policies)
        summary |= {
            "steps": options.steps,
            "batch_size": options.batch_size,
            "lr": options.lr,
            "untrained_policies": sorted(set(policies) - set(demos)),
            "sft_seconds": time.time() - started,
        }
        run.write_json("summary.json", summary)
    except BaseException:
        run.close(failed=True)
        raise
    run.close()
    return run.path
