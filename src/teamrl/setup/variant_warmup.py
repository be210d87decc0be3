"""Warm-up of the second tiny base (`teamrl.policies.tiny_variants`: Qwen2 over byte-level BPE).

It is warmed up with another emphasis than the tiny default, so the two bases have different
strengths: only the team's demos (no single agent), the roles in the proportions of `role_weights`
(by default three calculator demos per analyst demo), optionally from scripted agents of another
skill (Split-Calc: `skill` overrides fields of `teamrl.demos.split_calc.CalcSkill`), and a short
run. Like the default it is cached under `$TEAMRL_CACHE` in a folder named after a digest of the
recipe and of the code that makes the demos and the model, so each recipe is trained once.
"""

from __future__ import annotations

import collections
import itertools
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from teamrl.config.tasks import task_entry, task_settings
from teamrl.demos.plan_path import TrustedRunner
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_variants import build_bpe_tokenizer, build_tiny_qwen2
from teamrl.setup.cache_folder import publish
from teamrl.setup.recipe_digest import recipe_digest, task_modules
from teamrl.setup.sft import Demo, SFTSettings, demo_prompt, supervised_finetune
from teamrl.setup.tiny_default import HELDOUT_SEED, cache_root, progress_bar
from teamrl.workflows.base import Workflow

Triple = tuple[str, str, str]  # (agent, prompt, response)

CALCULATOR_SKILL = (
    ("value_correct", 0.7),
    ("value_off_by_one", 0.1),
    ("value_precedence", 0.05),
    ("value_random", 0.05),
    ("value_swapped", 0.1),
)
"""The variant's default Split-Calc calculator script: right 70% of the time instead of 50%, its
errors spread as the default's (no wrong kind above 10%); the analyst script is the default's."""


@dataclass(frozen=True)
class VariantRecipe:
    """Everything that determines the warmed-up variant checkpoint."""

    task: tuple[tuple[str, Any], ...] = (("name", "split_calc"),)
    """The task section as sorted pairs (hashable)."""
    max_turns: int = 1
    role_weights: tuple[tuple[str, int], ...] = (("analyst", 1), ("calculator", 3))
    """(agent, demos per cycle): each batch takes the team's agents in these proportions."""
    skill: tuple[tuple[str, float], ...] = CALCULATOR_SKILL
    """Split-Calc only: CalcSkill fields the scripted demos use instead of the defaults (() = the default script)."""
    steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 10
    seed: int = 0
    vocab_size: int = 320
    """BPE vocabulary (the 256 bytes, the 3 special tokens and the merges)."""
    tokenizer_demos: int = 2000
    """Demos whose text the BPE merges are trained on."""
    hidden_size: int = 96
    num_layers: int = 3
    heldout_demos: int = 128

    def __post_init__(self) -> None:
        if (
            not self.role_weights
            or any(w < 0 for _, w in self.role_weights)
            or not any(w > 0 for _, w in self.role_weights)
        ):
            raise ValueError(
                f"variant warm-up role_weights must be (agent, weight >= 0) pairs with some weight > 0, "
                f"got {self.role_weights}"
            )
        if self.skill and dict(self.task).get("name") != "split_calc":
            raise ValueError(
                f"variant warm-up skill overrides Split-Calc's CalcSkill; task "
                f"{dict(self.task).get('name')!r} has no such script: set skill=()"
            )
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"variant warm-up steps and batch_size must be >= 1, got {self.steps}, {self.batch_size}")

    @classmethod
    def for_task(cls, task: dict[str, Any], max_turns: int, **kwargs: Any) -> "VariantRecipe":
        if task.get("name") != "split_calc":
            kwargs.setdefault("skill", ())  # another task's scripts have no CalcSkill
        return cls(task=tuple(sorted(task.items())), max_turns=max_turns, **kwargs)

    def digest(self) -> str:
        """Hash of the recipe and of the code of the demos, the tokenizer, the model and the training."""
        from teamrl.policies import tiny_model, tiny_variants
        from teamrl.setup import sft, sft_packing

        modules = task_modules(
            dict(self.task)["name"], [tiny_model, tiny_variants, sft, sft_packing, sys.modules[__name__]]
        )
        return recipe_digest(asdict(self), modules)


def variant_dir(recipe: VariantRecipe) -> Path:
    return cache_root() / f"tiny-qwen2-{recipe.digest()}"


def team_workflow(recipe: VariantRecipe) -> Workflow:
    task = dict(recipe.task)
    return task_entry(task["name"]).build(
        "team", task_settings(task), max_turns=recipe.max_turns, runner=TrustedRunner()
    )


def demo_stream(recipe: VariantRecipe, workflow: Workflow, seed: int) -> Iterator[Triple]:
    """Endless scripted (agent, prompt, response) triples of the team on training instances."""
    return ((agent, demo_prompt(prompt), response) for agent, prompt, response in _scripted(recipe, workflow, seed))


def _scripted(
    recipe: VariantRecipe, workflow: Workflow, seed: int
) -> Iterator[tuple[str, str | list[dict[str, str]], str]]:
    """The task's scripted demonstrations (its prompts as the workflow renders them)."""
    entry = task_entry(dict(recipe.task)["name"])
    if recipe.skill:
        from teamrl.demos.split_calc import CalcSkill, demonstrations
        from teamrl.workflows.split_calc_team import SplitCalcWorkflow

        if not isinstance(workflow, SplitCalcWorkflow):
            raise TypeError(f"a variant warm-up skill scripts the Split-Calc team; got a {type(workflow).__name__}")
        return demonstrations(workflow, seed, CalcSkill(**dict(recipe.skill)))
    if entry.demos is None:
        raise ValueError(f"task {dict(recipe.task)['name']!r} has no scripted demonstrations to warm up the variant")
    return entry.demos(workflow, seed)


def weighted_demos(recipe: VariantRecipe, seed: int, weights: dict[str, int]) -> Iterator[Demo]:
    """Endless demos, the agents in turn in the proportions of `weights` (agent -> demos per cycle)."""
    workflow = team_workflow(recipe)
    agents = [a.name for a in workflow.agents]
    unknown = sorted(set(weights) - set(agents))
    if unknown:
        raise ValueError(
            f"variant warm-up role_weights name {', '.join(unknown)}, not agents of the team "
            f"workflow ({', '.join(agents)})"
        )
    cycle = [agent for agent in agents for _ in range(weights.get(agent, 0))]
    stream = demo_stream(recipe, workflow, seed)
    buffers: dict[str, collections.deque[Demo]] = collections.defaultdict(collections.deque)
    for agent in itertools.cycle(cycle):
        while not buffers[agent]:  # an episode yields every agent's demo: keep the others' for their turn
            speaker, prompt, response = next(stream)
            if weights.get(speaker, 0):
                buffers[speaker].append((prompt, response))
        yield buffers[agent].popleft()


def demo_batches(recipe: VariantRecipe) -> Iterator[list[Demo]]:
    demos = weighted_demos(recipe, recipe.seed, dict(recipe.role_weights))
    while True:
        yield list(itertools.islice(demos, recipe.batch_size))


def heldout_demos(recipe: VariantRecipe) -> list[Demo]:
    """Demos of instances the warm-up does not train on, every weighted agent in equal shares."""
    equal = {agent: 1 for agent, weight in recipe.role_weights if weight > 0}
    return list(itertools.islice(weighted_demos(recipe, recipe.seed + HELDOUT_SEED, equal), recipe.heldout_demos))


def tokenizer_texts(recipe: VariantRecipe) -> list[str]:
    """The text the BPE merges are learnt from: prompts and responses of the training demos."""
    stream = demo_stream(recipe, team_workflow(recipe), recipe.seed)
    return [prompt + response for _, prompt, response in itertools.islice(stream, recipe.tokenizer_demos)]


def warm_up_variant(recipe: VariantRecipe, force: bool = False, verbose: bool = True) -> Path:
    """Return the folder of the warmed-up variant, training and saving it if not cached."""
    target = variant_dir(recipe)
    if (target / "config.json").exists() and not force:
        return target
    started, cpu_started = time.time(), time.process_time()
    tokenizer = build_bpe_tokenizer(tokenizer_texts(recipe), recipe.vocab_size)
    model = build_tiny_qwen2(tokenizer, hidden_size=recipe.hidden_size, num_layers=recipe.num_layers, seed=recipe.seed)
    if verbose:
        print(
            f"teamrl: warming up the Qwen2 variant ({recipe.steps} supervised steps, roles weighted "
            f"{dict(recipe.role_weights)}; cached in {target})",
            flush=True,
        )
    bar = progress_bar(recipe.steps, verbose)
    settings = SFTSettings(steps=recipe.steps, lr=recipe.lr, warmup_steps=recipe.warmup_steps, seed=recipe.seed)
    try:
        result = supervised_finetune(
            Policy("variant", model, tokenizer, use_chat_template=False),
            demo_batches(recipe),
            settings,
            heldout_demos(recipe),
            lambda step, loss: bar.update(1),
        )
    finally:
        bar.close()
    record = {
        "recipe": asdict(recipe),
        "final_loss": result.losses[-1],
        "heldout_loss": result.heldout,
        "seconds": time.time() - started,
        "cpu_seconds": time.process_time() - cpu_started,
    }

    def write(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / "warmup.json").write_text(json.dumps(record, indent=2))

    return publish(target, write, force=force)  # renamed when complete: never half cached
