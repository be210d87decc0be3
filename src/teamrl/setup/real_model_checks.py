"""Settings that suit teamrl's tiny character models but waste a real pretrained LLM, caught at load.

Measured on SmolLM2-135M-Instruct (docs/howto/real-models.md): with the shipped tiny-model settings
(compact prompts, temperature 1.0, 10-40 new tokens) it scores about 0% and every group has the same
reward, so training sees no signal and nothing says why. Pure bf16 weights train with no fp32 master
copy: most AdamW updates round away (1.9% of the weights changed per step at lr 1e-5).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from teamrl.config import RunConfig
from teamrl.config.tasks import TASKS
from teamrl.policies.chat_encoding import PLAIN_TRANSCRIPT_STOP
from teamrl.policies.cpu_linear import cpu_has_bf16_matmul
from teamrl.policies.loading import Policy

SUBWORD_VOCAB = 1000
"""A tokenizer with more entries than this is a real subword vocabulary, not the tiny default's characters."""
HOT_TEMPERATURE = 0.9
"""Sampling at or above this ruins a ~100M model's answers (T 1.0: 1.6% of one-digit sums, T 0.5: 16%)."""
SHORT_RESPONSE = 32
"""Fewer new tokens than this cut a real model's answers short."""
AUTOCAST_WITHOUT_BF16 = "a 135M update's forward + backward took 11x as long as in fp32 on an AVX2-only EPYC"
"""What bf16 autocast cost on a CPU without bf16 units (benchmarks/results/autocast_real/amd-zen3-avx2/autocast_real.txt: 109.1 vs 9.9 s)."""


def offers_worked_examples(task: str) -> bool:
    """Whether the task's settings have a `worked_examples` switch (solved problems shown before the question)."""
    entry = TASKS.get(task)
    return entry is not None and "worked_examples" in {f.name for f in dataclasses.fields(entry.settings)}


def base_model_settings(task: str) -> tuple[str, ...]:
    """The overrides a base model (no chat template) needs on `task`: a stop at the blank line that starts the
    next example of its plain transcript, and worked examples where the task offers them."""
    stop = f"rollout.stop={json.dumps(list(PLAIN_TRANSCRIPT_STOP))}"
    return (stop, "task.worked_examples=true") if offers_worked_examples(task) else (stop,)


def is_pretrained_llm(policy: Policy) -> bool:
    """A real subword-vocabulary model (a pretrained checkpoint), not a character-level tiny model."""
    return len(policy.tokenizer) > SUBWORD_VOCAB


def real_model_warnings(
    config: RunConfig,
    policies: dict[str, Policy],
    mapping: dict[str, str],
    roles: dict[str, str],
    training: bool = True,
) -> list[str]:
    """One line per setting that does not suit the real models among `policies` (empty when all is well).

    mapping: agent -> policy name; roles: agent -> role (a role's rollout.by_role entry applies to it).
    """
    warnings = []
    real = [name for name, p in policies.items() if is_pretrained_llm(p)]
    if real:
        names = ", ".join(real)
        # a program task's prompts are the user's own messages: prompt_style does not apply there
        if config.workflow.prompt_style == "compact" and config.task.get("name") != "program":
            warnings.append(
                f"policies {names} are pretrained LLMs but workflow.prompt_style is compact (prompts for "
                "the tiny character model, on which a real model scores about 0%); set "
                "workflow.prompt_style=chat"
            )
        bare = [name for name in real if not policies[name].use_chat_template]
        task = config.task.get("name", "")
        if bare and offers_worked_examples(task) and not config.task.get("worked_examples", False):
            warnings.append(
                f"policies {', '.join(bare)} have no chat template (base models) and the {task} prompts "
                "show no worked examples: a base model continues the problem's text instead of solving "
                "it (Gemma-3-270M: 0% on one-digit sums); set task.worked_examples=true"
            )
        for agent, policy in mapping.items():
            if policy not in real:
                continue
            rollout = config.rollout.for_agent(agent, roles.get(agent, agent))
            if training and rollout.temperature >= HOT_TEMPERATURE:
                warnings.append(
                    f"agent {agent} ({policy}, a pretrained LLM) samples at temperature "
                    f"{rollout.temperature:g}: at 1.0 SmolLM2-135M solves 1.6% of one-digit sums, at 0.5 "
                    "16%; set rollout.temperature=0.5 (or 0.6-0.7)"
                )
            if not policies[policy].use_chat_template and not rollout.stop:
                warnings.append(
                    f"agent {agent} ({policy}) is a pretrained LLM without a chat template (a base model) "
                    "and rollout.stop is empty: it answers a worked example's question and goes on to "
                    'write the next example; set rollout.stop=["\\n\\n"]'
                )
            if rollout.max_new_tokens < SHORT_RESPONSE:
                warnings.append(
                    f"agent {agent} ({policy}) gets rollout.max_new_tokens={rollout.max_new_tokens}: a "
                    f"pretrained LLM's answers need more; set at least {SHORT_RESPONSE} (64-128 typical)"
                )
    if training:
        bf16_units = cpu_has_bf16_matmul()
        for name, loaded in policies.items():
            dtype = config.policy_config(name).dtype
            if dtype != "float32" and loaded.device.type == "cpu":
                warnings.append(
                    f"policy {name} trains with dtype {dtype} weights and no float32 master copy: most "
                    "AdamW updates round away (1.9% of SmolLM2's weights changed per step at lr 1e-5); "
                    "keep policy.dtype=float32"
                    + (" and set algorithm.autocast=bf16 for bf16 arithmetic" if bf16_units else "")
                )
            if config.algorithm.autocast == "bf16" and loaded.device.type == "cpu" and not bf16_units:
                warnings.append(
                    f"algorithm.autocast=bf16 on a CPU without bf16 matmul units (policy {name}): its "
                    "bf16 products are emulated and slower than fp32 (" + AUTOCAST_WITHOUT_BF16 + "); "
                    "set algorithm.autocast=off"
                )
    return list(dict.fromkeys(warnings))


def warn_about_settings(
    config: RunConfig,
    policies: dict[str, Policy],
    mapping: dict[str, str],
    roles: dict[str, str],
    training: bool = True,
) -> list[str]:
    """Print each warning as one `teamrl: warning:` line on stderr; returns them."""
    warnings = real_model_warnings(config, policies, mapping, roles, training)
    for line in warnings:
        print(f"teamrl: warning: {line}", file=sys.stderr, flush=True)
    return warnings
