"""Budgets of the real-model studies, planned from measured cell times (docs/study/real.md).

The machine these tables are sized for has 2 cores; one study process uses one torch thread. The first
plan priced a cell from single steps timed before any table ran (SmolLM2-135M-Instruct, 1 thread, LoRA
r16 per role, 4 instances x K 4, 80 new tokens: one AT-GRPO step 50-90 s, a 64-instance evaluation
~100 s). The first finished table, `real_hetero_calc` at commit c883e6e (3 seeds, one core, the other
busy), took 259-330 s per SmolLM2 pair cell where that plan said 1105 s, and 294-320 s per Gemma-3
pair cell where it said 2195 s. The prices below are the old ones scaled to those cells:

    TRAIN_EPISODE_S = 70 s / 16 x 0.27,  EVAL_EPISODE_S = 100 s / 64 x 0.27

(0.27 = the SmolLM2 cells' median 314 s less 15 s of loading, over the old 1090 s), scaled by the
workflow's agent turns per episode (the cells had two) and by the model's size (`MODEL_COST`:
SmolLM2 1; Gemma-3-270M 1.0, its measured cells cost what SmolLM2's did; the tiny default's cost is a
few seconds a cell plus its warm-up). Until a cell of a row has run, the study's ETA uses these prices;
after, the measured seconds of finished cells replace them.
"""

from __future__ import annotations

from dataclasses import dataclass

MEASURED_SCALE = 0.27
"""Measured cell seconds over the first plan's, on `real_hetero_calc`'s SmolLM2 pair cells (see above)."""
TRAIN_EPISODE_S = 70.0 / 16 * MEASURED_SCALE
EVAL_EPISODE_S = 100.0 / 64 * MEASURED_SCALE
MEASURED_TURNS = 2
"""Agent turns per episode in the measured runs (the two-role team)."""
LOAD_S = 15.0
"""Seconds to load a model and its adapters once per cell (not measured alone; a small share of a cell)."""
HOURS_PER_TABLE = 6.0
QUICK_MINUTES = 15.0
MODEL_COST = {"smollm2-135m-instruct": 1.0, "gemma-3-270m": 1.0, "tiny-default": 0.07}
"""Cost of a model's episode relative to SmolLM2's (Gemma-3's measured pair cells, 294-320 s, cost what
SmolLM2's did: its LoRA step is as fast (docs: real models, step cost) and its answers stop at the blank
line; the tiny default's 0.87M parameters are about 1/150 of SmolLM2's, priced at 1/50 of the old
prices, 0.07 of the measured ones, to cover its overheads)."""
TINY_WARMUP_S_PER_STEP = 600.0 / 500
"""The tiny default's warm-up per SFT step (500 steps took 586 s on this machine, docs/study/heterogeneous.md)."""


@dataclass(frozen=True)
class Budget:
    """One table's training and evaluation sizes (the overrides `overrides()` gives the study)."""

    steps: int
    batch_size: int
    k: int
    max_new_tokens: int
    lora_rank: int
    eval_every: int
    validation_instances: int
    test_instances: int
    seeds: int
    tiny_warmup_steps: int = 500
    """The tiny default's warm-up (the scale axis's smallest model; real models have none)."""
    test_samples: int = 1
    """Sampled episodes per test instance (test success is their mean pass@1): the test size's knob past
    the split's end (Split-Calc's test split has 112 instances at operands 1..9)."""

    def test_episodes(self) -> int:
        return self.test_instances * self.test_samples

    def overrides(self) -> tuple[str, ...]:
        """The config overrides this budget sets (the protocol's split sizes and seeds are set apart)."""
        return (
            f"train.steps={self.steps}",
            f"train.batch_size={self.batch_size}",
            f"algorithm.k={self.k}",
            f"rollout.max_new_tokens={self.max_new_tokens}",
            f"train.eval_every={self.eval_every}",
            f"policy.lora={{r: {self.lora_rank}, alpha: {2 * self.lora_rank}, "
            f"target_modules: [q_proj, k_proj, v_proj, o_proj]}}",
            f"policy.warmup_sft_steps={self.tiny_warmup_steps}",
        )

    def evaluations(self) -> int:
        """Held-out evaluations of one training run: the first, one every `eval_every` steps before the
        last, and the final one (`teamrl.training.loop`)."""
        between = (self.steps - 1) // self.eval_every if self.eval_every else 0
        return 2 + between

    def train_s(self, turns: int = MEASURED_TURNS, cost: float = 1.0) -> float:
        """One training run from a loaded base: steps, its validation evaluations, its best checkpoint's test."""
        scale = cost * turns / MEASURED_TURNS
        sampled = self.steps * self.batch_size * self.k * TRAIN_EPISODE_S
        held_out = (self.evaluations() * self.validation_instances + self.test_episodes()) * EVAL_EPISODE_S
        return LOAD_S + scale * (sampled + held_out)

    def test_s(self, turns: int = MEASURED_TURNS, cost: float = 1.0) -> float:
        """One test-split scoring of given policies."""
        return LOAD_S + cost * turns / MEASURED_TURNS * self.test_episodes() * EVAL_EPISODE_S

    def base_rates_s(self, turns: int = MEASURED_TURNS, cost: float = 1.0) -> float:
        """An `eval` row: validation pass@k (k samples) and greedy, then the test split."""
        episodes = self.validation_instances * (self.k + 1) + self.test_episodes()
        return LOAD_S + cost * turns / MEASURED_TURNS * episodes * EVAL_EPISODE_S


def main_table_seed_s(b: Budget) -> dict[str, float]:
    """Seconds of each row of the real Split-Calc table for one seed (the single agent has one turn)."""
    return {
        "single": b.base_rates_s(turns=1),
        "single_grpo": b.train_s(turns=1),
        "team": b.base_rates_s(),
        "shared": b.train_s(),
        "per_role": b.train_s(),
        "swapped": b.test_s(),
        "alone": 2 * (b.train_s() - b.test_s()) + b.test_s(),  # one run per role, one test together
        "trajectory": b.train_s(),
        # A transfer row tests one team on the unseen variant (its source row's training is priced there).
        "team_transfer": b.test_s(),
        "shared_transfer": b.test_s(),
        # No sampling: one SFT step per RL step on the scripted team's turns of as many instances, priced
        # at a held-out episode's time per trained turn (unmeasured; measured cells replace it in ETAs).
        "sft": b.test_s() + b.steps * b.batch_size * MEASURED_TURNS * EVAL_EPISODE_S,
    }


STRENGTH_EPISODES_PER_INSTANCE = 4 * 2
"""The hetero rows' strength measure: 4 sampled answers per validation instance, per role (two roles)."""


def hetero_table_seed_s(b: Budget) -> dict[str, float]:
    """Seconds of the heterogeneous-pair rows for one seed (SmolLM2 pair, mixed pair, Gemma pair).

    The mixed pair costs the mean of the two models; the first `bases` row also measures both bases'
    per-role strengths (one-turn answers, so half an episode each)."""
    gemma = MODEL_COST["gemma-3-270m"]
    strengths = sum(
        LOAD_S + c * b.validation_instances * STRENGTH_EPISODES_PER_INSTANCE * EVAL_EPISODE_S / 2 for c in (1.0, gemma)
    )
    return {
        "per_role": b.train_s(),
        "hetero": strengths + b.train_s(cost=(1.0 + gemma) / 2),
        "homo_b": b.train_s(cost=gemma),
    }


SCALE_WORKFLOW_TURNS = {"voting": 4, "evaluator_optimizer": 2}
"""Agent turns per episode: voting's three generators and aggregator; the evaluator-optimizer's first
optimizer answer and the evaluator's verdict (a refinement round adds two, not priced: most episodes
of an untrained small model end at the first verdict)."""


def scale_table_seed_s(b: Budget, scales: dict[str, str]) -> dict[str, float]:
    """Seconds of each scale row for one seed: per workflow, the untrained test and a shared and a
    per-agent training run (the tiny default adds its warm-up per workflow; cached after the first seed,
    counted every seed to stay on the safe side)."""
    rows = {}
    for row, model in scales.items():
        cost = MODEL_COST[model]
        seconds = sum(b.test_s(turns, cost) + 2 * b.train_s(turns, cost) for turns in SCALE_WORKFLOW_TURNS.values())
        warmup = TINY_WARMUP_S_PER_STEP * b.tiny_warmup_steps * len(SCALE_WORKFLOW_TURNS)
        rows[row] = seconds + (warmup if model == "tiny-default" else 0.0)
    return rows


def table_hours(seed_seconds: dict[str, float], seeds: int) -> float:
    return seeds * sum(seed_seconds.values()) / 3600
