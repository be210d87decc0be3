"""The embedded default model: build the tiny Llama, warm it up on scripted team transcripts, cache it.

The warm-up (for the configured task; Plan-Path by default) mixes the demonstrations of the two-agent team and of the single plan agent, so the same
checkpoint serves the team and the single-agent baseline. It is cached under
`$TEAMRL_CACHE` (default `~/.cache/teamrl`) in a folder named after the recipe's hash: the main job
reuses it, and a changed recipe gets a new folder.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import time
from dataclasses import asdict, dataclass
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.training.sft import supervised_finetune
from teamrl.demos.plan_path import TrustedRunner
from teamrl.workflows.registry import task_entry, task_settings


@dataclass(frozen=True)
class WarmupRecipe:
    """Everything that determines the warmed-up checkpoint."""

    task: tuple[tuple[str, Any], ...] = (("name", "plan_path"),)
    """The task section (name and settings) as sorted pairs, so the recipe is hashable."""
    workflow: str = "team"
    """The task's team workflow kind whose transcripts (with the single agent's) are demonstrated."""
    max_turns: int = 3
    steps: int = 500
    batch_size: int = 64
    lr: float = 2e-3
    seed: int = 0
    hidden_size: int = 128
    num_layers: int = 4

    @classmethod
    def for_task(cls, task: dict[str, Any], max_turns: int, workflow: str = "team",
                 **kwargs: Any) -> "WarmupRecipe":
        return cls(task=tuple(sorted(task.items())), workflow=workflow, max_turns=max_turns, **kwargs)

    def digest(self) -> str:
        """Hash of the recipe and of the code that makes the demonstrations and the model.

        Editing a scripted agent, the task's workflow or environment, or the model builder must not
        silently reuse an old checkpoint (the task entry's `sources` name the modules).
        """
        from teamrl.policies import tiny_model

        entry = task_entry(dict(self.task)["name"])
        modules = [tiny_model] + [importlib.import_module(name) for name in entry.sources]
        for part in (entry.workflow, entry.demos):  # a user's task may list no sources
            module = inspect.getmodule(part)
            if module is not None and module not in modules:
                modules.append(module)
        code = "".join(inspect.getsource(m) for m in modules)
        fields = asdict(self)
        if fields["workflow"] == "team":
            del fields["workflow"]  # recipes from before the field existed keep their cache key
        payload = json.dumps(fields, sort_keys=True) + code
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


def cache_root() -> Path:
    return Path(os.environ.get("TEAMRL_CACHE", Path.home() / ".cache" / "teamrl"))


def recipe_dir(recipe: WarmupRecipe) -> Path:
    return cache_root() / f"tiny-default-{recipe.digest()}"


def demo_batches(recipe: WarmupRecipe) -> Iterator[list[tuple[str, str]]]:
    """Batches of one prompt kind each (every team agent, then the single agent), in turn.

    One kind per batch keeps prompt lengths alike, so little compute goes to padding.
    """
    task = dict(recipe.task)
    entry, settings = task_entry(task["name"]), task_settings(task)
    if entry.demos is None:
        raise ValueError(f"task {task['name']!r} has no scripted demonstrations to warm up the tiny "
                         "default model: register the task with script= (scripted agents, see "
                         "docs/howto/own-workflow.md), or set policy.model to a model folder")
    runner = TrustedRunner()
    workflows = {"team": entry.build(recipe.workflow, settings, max_turns=recipe.max_turns, runner=runner)}
    if entry.single:
        workflows["single"] = entry.build("single", settings, max_turns=recipe.max_turns, runner=runner)
    streams = {kind: entry.demos(wf, recipe.seed + i) for i, (kind, wf) in enumerate(workflows.items())}
    buffers: dict[tuple[str, str], list[tuple[str, str]]] = {}
    order = [(stream, agent.name) for stream, wf in workflows.items() for agent in wf.agents]
    turn = 0
    while True:
        wanted = order[turn % len(order)]
        while len(buffers.get(wanted, [])) < recipe.batch_size:
            stream = wanted[0]
            agent, prompt, response = next(streams[stream])
            buffers.setdefault((stream, agent), []).append((prompt, response))
        yield buffers[wanted][: recipe.batch_size]
        buffers[wanted] = buffers[wanted][recipe.batch_size:]
        turn += 1


def warm_up(recipe: WarmupRecipe, force: bool = False, verbose: bool = True) -> Path:
    """Return the folder of the warmed-up tiny model, training and saving it if not cached."""
    target = recipe_dir(recipe)
    if (target / "config.json").exists() and not force:
        return target
    tokenizer = build_char_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=recipe.hidden_size, num_layers=recipe.num_layers,
                             seed=recipe.seed)
    policy = Policy("warmup", model, tokenizer, use_chat_template=False)
    started = time.time()
    if verbose:
        task = dict(recipe.task)["name"]
        print(f"teamrl: warming up the tiny default model for task {task!r} ({recipe.steps} supervised steps on "
              f"its scripted demos; a few minutes on a laptop CPU, once: cached in {target})", flush=True)
    bar = tqdm(total=recipe.steps, desc="warm-up", disable=not verbose, dynamic_ncols=True)

    def log(step: int, loss: float) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    try:
        losses = supervised_finetune(policy, demo_batches(recipe), recipe.steps, recipe.lr,
                                     recipe.seed, log)
    finally:
        bar.close()
    # Write to a temporary folder and rename, so an interrupted warm-up never looks cached.
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / "warmup.json").write_text(json.dumps(
        {"recipe": asdict(recipe), "final_loss": losses[-1], "seconds": time.time() - started}, indent=2))
    partial.rename(target)
    return target
