"""The embedded default model: build the tiny Llama, warm it up on scripted team transcripts, cache it.

The warm-up (for the configured task; Plan-Path by default) mixes the demonstrations of the two-agent team and of the single plan agent, so the same
checkpoint serves the team and the single-agent baseline. It is cached under
`$TEAMRL_CACHE` (default `~/.cache/teamrl`) in a folder named after the recipe's hash: the main job
reuses it, and a changed recipe gets a new folder.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from teamrl.config.tasks import task_entry, task_settings
from teamrl.demos.plan_path import TrustedRunner
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.setup.cache_folder import publish
from teamrl.setup.recipe_digest import recipe_digest, task_modules
from teamrl.setup.sft import Demo, SFTSettings, demo_prompt, supervised_finetune


@dataclass(frozen=True)
class WarmupRecipe:
    """Everything that determines the warmed-up checkpoint."""

    task: tuple[tuple[str, Any], ...] = (("name", "plan_path"),)
    """The task section (name and settings) as sorted pairs, so the recipe is hashable."""
    workflow: str = "team"
    """The task's team workflow kind whose transcripts (with the single agent's) are demonstrated."""
    max_turns: int = 3
    steps: int = 500
    """Supervised steps (the most, with early stopping)."""
    batch_size: int = 64
    """Demos per step."""
    lr: float = 2e-3
    """Peak learning rate (linear warm-up, cosine decay to 0)."""
    seed: int = 0
    hidden_size: int = 128
    num_layers: int = 4
    warmup_steps: int = 20
    """Linear learning-rate warm-up steps."""
    pack_tokens: int = 0
    """Packed rows of this many tokens, every batch mixing all prompt kinds; 0 = the first recipe's
    layout: one demo per row, one prompt kind per batch."""
    bf16: bool = False
    """bf16 autocast of the forward passes."""
    eval_every: int = 0
    """Held-out demo loss every this many steps (0 = only at the end)."""
    patience: int = 0
    """Early stop after this many held-out losses without a new best (0 = off)."""
    heldout_demos: int = 256
    """Demos of unseen training instances scored for the held-out demo loss."""

    @classmethod
    def for_task(cls, task: dict[str, Any], max_turns: int, workflow: str = "team", **kwargs: Any) -> "WarmupRecipe":
        return cls(task=tuple(sorted(task.items())), workflow=workflow, max_turns=max_turns, **kwargs)

    def digest(self) -> str:
        """Hash of the recipe and of the code that makes the demonstrations and the model.

        Editing a scripted agent, the task's workflow or environment, or the model builder must not
        silently reuse an old checkpoint (the task entry's `sources` name the modules).
        """
        from teamrl.policies import tiny_model
        from teamrl.setup import sft, sft_packing

        # The training code shapes the checkpoint as much as the model builder does.
        modules = task_modules(dict(self.task)["name"], [tiny_model, sft, sft_packing])
        fields = asdict(self)
        if fields["workflow"] == "team":
            del fields["workflow"]  # recipes from before the field existed keep their cache key
        return recipe_digest(fields, modules)


def cache_root() -> Path:
    return Path(os.environ.get("TEAMRL_CACHE", Path.home() / ".cache" / "teamrl"))


def recipe_dir(recipe: WarmupRecipe) -> Path:
    return cache_root() / f"tiny-default-{recipe.digest()}"


def _demo_streams(recipe: WarmupRecipe, seed: int) -> tuple[list[tuple[str, str]], Callable[[tuple[str, str]], Demo]]:
    """The prompt kinds, (stream, agent), in turn order, and a function drawing the next demo of a kind.

    Streams are the team workflow's scripted episodes and, where the task has one, the single
    agent's; `seed` picks their training instances.
    """
    task = dict(recipe.task)
    entry, settings = task_entry(task["name"]), task_settings(task)
    if entry.demos is None:
        raise ValueError(
            f"task {task['name']!r} has no scripted demonstrations to warm up the tiny "
            "default model: register the task with script= (scripted agents, see "
            "docs/howto/own-workflow.md), or set policy.model to a model folder"
        )
    runner = TrustedRunner()
    workflows = {"team": entry.build(recipe.workflow, settings, max_turns=recipe.max_turns, runner=runner)}
    if entry.single:
        workflows["single"] = entry.build("single", settings, max_turns=recipe.max_turns, runner=runner)
    streams = {kind: entry.demos(wf, seed + i) for i, (kind, wf) in enumerate(workflows.items())}
    buffers: dict[tuple[str, str], collections.deque[Demo]] = collections.defaultdict(collections.deque)

    def draw(kind: tuple[str, str]) -> Demo:
        # An episode yields demos of every agent: keep the others' for their turn.
        while not buffers[kind]:
            agent, prompt, response = next(streams[kind[0]])
            buffers[(kind[0], agent)].append((demo_prompt(prompt), response))
        return buffers[kind].popleft()

    return [(stream, agent.name) for stream, wf in workflows.items() for agent in wf.agents], draw


def demo_batches(recipe: WarmupRecipe) -> Iterator[list[Demo]]:
    """Endless batches of `recipe.batch_size` demos.

    Padded layout (`pack_tokens=0`): one prompt kind per batch (every team agent, then the single
    agent, in turn), so prompt lengths are alike and little compute goes to padding. Packed layout:
    every batch takes the kinds in turn, demo by demo, so each step sees every role.
    """
    kinds, draw = _demo_streams(recipe, recipe.seed)
    turn = 0
    while True:
        if recipe.pack_tokens:
            yield [draw(kinds[(turn + j) % len(kinds)]) for j in range(recipe.batch_size)]
            turn += recipe.batch_size
        else:
            yield [draw(kinds[turn % len(kinds)]) for _ in range(recipe.batch_size)]
            turn += 1


HELDOUT_SEED = 7_919
"""Seed offset of the held-out demos: their training instances are far from those of any warm-up seed."""


def heldout_demos(recipe: WarmupRecipe) -> list[Demo]:
    """`recipe.heldout_demos` demos, the prompt kinds in equal shares, of instances no warm-up trains on."""
    kinds, draw = _demo_streams(recipe, recipe.seed + HELDOUT_SEED)
    return [draw(kinds[j % len(kinds)]) for j in range(recipe.heldout_demos)]


def sft_settings(recipe: WarmupRecipe) -> SFTSettings:
    return SFTSettings(
        steps=recipe.steps,
        lr=recipe.lr,
        warmup_steps=recipe.warmup_steps,
        pack_tokens=recipe.pack_tokens,
        bf16=recipe.bf16,
        eval_every=recipe.eval_every,
        patience=recipe.patience,
        seed=recipe.seed,
    )


BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps [{elapsed} elapsed, ETA {remaining}{postfix}]"
"""The warm-up bar: steps done, time spent and the time left (tqdm's estimate from the mean step)."""


def progress_bar(total: int, verbose: bool) -> tqdm:
    """The warm-up's progress bar with an ETA (on stderr; off when not verbose)."""
    return tqdm(total=total, desc="warm-up", disable=not verbose, dynamic_ncols=True, bar_format=BAR_FORMAT)


def warm_up(recipe: WarmupRecipe, force: bool = False, verbose: bool = True) -> Path:
    """Return the folder of the warmed-up tiny model, training and saving it if not cached."""
    target = recipe_dir(recipe)
    if (target / "config.json").exists() and not force:
        return target
    tokenizer = build_char_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=recipe.hidden_size, num_layers=recipe.num_layers, seed=recipe.seed)
    policy = Policy("warmup", model, tokenizer, use_chat_template=False)
    started, cpu_started = time.time(), time.process_time()
    if verbose:
        task = dict(recipe.task)["name"]
        print(
            f"teamrl: warming up the tiny default model for task {task!r} ({recipe.steps} supervised steps on "
            f"its scripted demos; a few minutes on a laptop CPU, once: cached in {target})",
            flush=True,
        )
    bar = progress_bar(recipe.steps, verbose)

    def log(step: int, loss: float) -> None:
        bar.update(1)
        bar.set_postfix_str(f"loss {loss:.3f}", refresh=False)

    try:
        result = supervised_finetune(policy, demo_batches(recipe), sft_settings(recipe), heldout_demos(recipe), log)
    finally:
        bar.close()
    record = {
        "recipe": asdict(recipe),
        "final_loss": result.losses[-1],
        "steps_done": len(result.losses),
        "stopped_early": result.stopped_early,
        "heldout_loss": result.heldout,
        "seconds": time.time() - started,
        "cpu_seconds": time.process_time() - cpu_started,
    }

    def write(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / "warmup.json").write_text(json.dumps(record, indent=2))

    # Written aside and renamed when complete: an interrupted warm-up never looks cached.
    return publish(target, write, force=force)
