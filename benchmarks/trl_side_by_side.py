"""teamrl vs TRL's GRPOTrainer, side by side: seconds per step and trained samples per second.

    python -m benchmarks run trl_side_by_side --trl-python /work/venv-trl/bin/python --quick  # ~2 min CPU
    python -m benchmarks run trl_side_by_side --trl-python /work/venv-trl/bin/python          # 3 rounds x 7 steps

TRL is a benchmark dependency only, in its own venv (it sees this interpreter's torch and
transformers; nothing CUDA is pulled in):

    python -m venv --system-site-packages /work/venv-trl
    /work/venv-trl/bin/pip install trl==1.16.0

Three sides, each in its own subprocess (one torch thread, OMP_NUM_THREADS=1), run in interleaved
rounds (the order alternates from round to round, so a load that drifts during the run hits every
side alike); the ratios are taken within a round, then their median over rounds is reported:
- teamrl: single-agent GRPO on Plan-Path (workflow single, one turn: prompt -> K responses ->
  rewards -> one optimizer step), through `teamrl.training.loop.train`;
- trl: TRL's GRPOTrainer on the same prompts, model folder, K, max new tokens and reward;
- team: teamrl's two-agent AT-GRPO team (tool + plan, up to 3 turns) on the same instances per
  step, K and max new tokens; compared per trained sample (its steps hold more samples).

Same on every side: the model folder (a random tiny-default Llama by default, or --model), float32
(with --bf16: TRL's bf16=True; teamrl's bf16 sampler, bf16 autocast update and truncated IS correction),
CPU, prompts per step, K, max new tokens, temperature 1 with no top-k/top-p, learning rate,
constant schedule without warm-up, AdamW weight decay, grad-norm clip 1.0, one optimizer step per
batch over every sample of the step (no zero-signal filtering on either side, unless
--teamrl-default-filter), no KL term and no reference model, PPO clip 0.2, token-mean loss over
the batch (TRL's "dapo" in one micro-batch), group-std-scaled advantages, no evaluation, no
checkpoints, a metrics line per step. Timed: the wall and CPU seconds (process and descendants,
`resource.getrusage` and /proc) between the ends of consecutive steps, after warm-up steps that are
not counted. Differences that remain are printed with the results (DIFFERENCES below).

The report ends with each single-agent side's arithmetic floor (benchmarks/grpo_work.py): the
matmul FLOPs its step cannot avoid (prompts once per prompt for teamrl, once per row for TRL) at
this machine's fp32 matmul peak, measured in the same run on the CPU clock with one thread; the
side's measured CPU seconds as a share of that peak; and the most teamrl could be faster than
this TRL, were every teamrl step to run at the peak (TRL's measured CPU s / teamrl's floor).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import grpo_work
from benchmarks.harness import add_out_argument, child_env, write_result

SIDES = ("teamrl", "trl", "team")

DIFFERENCES = [
    "generation: teamrl's engine (each prompt encoded once, its KV cache copied to its K rows, finished rows "
    "dropped) vs TRL's model.generate on K copies of each prompt (prompt re-encoded per row)",
    "update: teamrl scores each prompt once for its K responses (shared prefix); TRL runs every "
    "prompt + completion row in full",
    "old log-probs: teamrl keeps the sampler's log-probs (ratio exactly 1 up to float noise); TRL, with one "
    "iteration, uses the detached current log-probs (ratio 1)",
    "extra work: teamrl computes per-role diagnostics (diagnostics.level cheap: per-role gradient norms) and "
    "its rollout metrics; TRL its own metrics (both compute every token's entropy) and accelerate's wrappers "
    "and the Trainer's callbacks; both write one metrics line per step (TRL prints it, teamrl writes "
    "metrics.jsonl)",
    "optimizer: torch.optim.AdamW as train.adamw sets it (fused by default) "
    "in teamrl, the Trainer's default optim in TRL (printed above; adamw_torch_fused here)",
    "prompts: teamrl takes train instances step*P..step*P+P-1 in order; TRL's RepeatSampler draws P of the "
    "same train instances per step in shuffled order (same distribution, other instances per step)",
    "rewards: the same function (teamrl's single-agent Plan-Path outcome, team + local term), called by TRL "
    "as a reward function on a fresh instance state; advantages: both (r - group mean) / (group std + eps), "
    "with the unbiased std and eps 1e-4 in TRL, the population std and eps 1e-6 in teamrl",
    "team side: two agents and up to 3 turns per episode, the tool's programs run in the sandbox: more "
    "samples per step, so it is compared per trained sample, not per step",
]


@dataclass(frozen=True)
class Setup:
    """What every side trains with."""

    model: str
    prompts: int = 32
    k: int = 8
    max_new_tokens: int = 24
    lr: float = 1e-4
    weight_decay: float = 0.0
    warmup_steps: int = 1  # steps run first and not timed (first-call costs)
    steps: int = 3  # timed steps
    seed: int = 0
    size: int = 6
    min_distance: int = 3
    team_turns: int = 3
    drop_zero_signal: bool = False  # teamrl's default is True; False trains every sample, as TRL does
    lora_r: int = 0  # > 0: a LoRA adapter of this rank (alpha 2r, q/k/v/o) on both sides instead of full fine-tuning
    cpu_linear: str = "auto"  # teamrl's policy.cpu_linear (torch: MKL's matmuls, as TRL's side uses)
    bf16: bool = False  # bfloat16 on both sides: TRL's bf16=True; teamrl's bf16 sampler + bf16 autocast update

    def __post_init__(self) -> None:
        if self.prompts < 1 or self.k < 2 or self.max_new_tokens < 1 or self.steps < 1 or self.warmup_steps < 0:
            raise ValueError(f"need prompts >= 1, k >= 2 (GRPO groups), max_new_tokens >= 1, steps >= 1 and "
                             f"warmup_steps >= 0, got {self}")


def teamrl_overrides(setup: Setup, team: bool) -> list[str]:
    """`teamrl train` settings of the teamrl side (team=False) or of the two-agent team (team=True)."""
    return [
        "task.name=plan_path", f"task.size={setup.size}", f"task.min_distance={setup.min_distance}",
        f"workflow.name={'team' if team else 'single'}", f"workflow.max_turns={setup.team_turns if team else 1}",
        f"policy.model={setup.model}", f"policy.lr={setup.lr}", f"policy.weight_decay={setup.weight_decay}",
        f"seed={setup.seed}", f"algorithm.k={setup.k}", "algorithm.kl_coef=0.0", "algorithm.ppo_epochs=1",
        f"algorithm.drop_zero_signal={str(setup.drop_zero_signal).lower()}",
        "algorithm.minibatch_size=100000",  # one optimizer step over the whole batch
        "algorithm.aggregation=token-mean", "algorithm.clip_low=0.2", "algorithm.clip_high=0.2",
        f"rollout.max_new_tokens={setup.max_new_tokens}", "rollout.temperature=1.0",
        f"train.batch_size={setup.prompts}", f"train.steps={setup.warmup_steps + setup.steps}",
        "train.warmup_steps=0", "train.schedule=constant", "train.grad_clip=1.0",
        "train.eval_every=0", "train.eval_instances=1", "train.checkpoint_every=0", "report_to=none",
        f"policy.cpu_linear={setup.cpu_linear}",
    ] + (BF16_OVERRIDES if setup.bf16 else []) + ([f"policy.lora={{r: {setup.lora_r}, alpha: {2 * setup.lora_r}, target_modules: [{', '.join(LORA_TARGETS)}]}}"]
         if setup.lora_r else [])


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
# teamrl in bfloat16: the sampler reads bf16 weight copies, the update's forward runs in bf16 autocast (fp32
# master weights and log-probs), and the truncated importance weight corrects the sampler/trainer gap.
BF16_OVERRIDES = ["rollout.sampler_dtype=bfloat16", "algorithm.autocast=bf16", "algorithm.rollout_correction=tis"]


def trl_peft_config(setup: Setup):
    """The PEFT LoraConfig TRL trains with --lora-r, the same adapter as teamrl's (None: full fine-tuning)."""
    if not setup.lora_r:
        return None
    import peft

    return peft.LoraConfig(r=setup.lora_r, lora_alpha=2 * setup.lora_r, lora_dropout=0.0,
                           target_modules=list(LORA_TARGETS), bias="none", task_type="CAUSAL_LM")


def trl_arguments(setup: Setup, output_dir: str) -> dict:
    """GRPOConfig keyword arguments matching `teamrl_overrides(setup, team=False)`."""
    batch = setup.prompts * setup.k
    return dict(
        output_dir=output_dir, per_device_train_batch_size=batch, gradient_accumulation_steps=1,
        num_generations=setup.k, max_completion_length=setup.max_new_tokens,
        max_steps=setup.warmup_steps + setup.steps, learning_rate=setup.lr, lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=setup.weight_decay, max_grad_norm=1.0, beta=0.0, num_iterations=1,
        epsilon=0.2, loss_type="dapo", scale_rewards="group", temperature=1.0, top_p=1.0, top_k=0,
        bf16=setup.bf16, fp16=False, gradient_checkpointing=False, use_cpu=True, report_to="none",
        save_strategy="no", eval_strategy="no", logging_steps=1, seed=setup.seed, dataloader_num_workers=0,
        disable_tqdm=True,
    )


# ---------------------------------------------------------------------------- the workers
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def worker_teamrl(setup: Setup, team: bool, out: Path) -> None:
    """Time `teamrl train` on `setup`; write each timed step to `out` (JSON)."""
    _one_thread()
    from benchmarks.teamrl_steps import measured, timed_train

    with tempfile.TemporaryDirectory() as runs:
        records = measured(timed_train(teamrl_overrides(setup, team), Path(runs)), setup.warmup_steps)
    steps = [{"wall_s": r.wall_s, "cpu_s": r.cpu_s, "sampled": r.sampled, "trained": r.trained,
              "tokens": r.tokens, "reward": statistics.mean(v for k, v in r.metrics.items()
                                                            if k.startswith("role/") and k.endswith("/reward"))}
             for r in records]
    phases = {key: statistics.median(r.metrics[f"time/{key}"] for r in records) for key in ("rollout_s", "update_s")}
    out.write_text(json.dumps({"side": "team" if team else "teamrl", "steps": steps, "info": phases}))


def worker_trl(setup: Setup, out: Path) -> None:
    """Time TRL's GRPOTrainer on `setup`; write each timed step to `out` (JSON)."""
    _one_thread()
    import trl
    from datasets import Dataset
    from teamrl.config import load_config
    from teamrl.setup.team import build_workflow
    from benchmarks.teamrl_steps import tree_cpu_seconds
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    workflow = build_workflow(load_config(None, teamrl_overrides(setup, team=False)))
    rows = [{"prompt": prompt, "instance": i} for i, prompt in enumerate(run_prompts(setup, workflow))]

    def plan_path_reward(prompts: list[str], completions: list[str], instance: list[int], **_: object) -> list[float]:
        outcomes = [workflow.apply("plan", workflow.new_state("train", i), text)
                    for text, i in zip(completions, instance)]
        return [o.team + o.local for o in outcomes]  # team_weight = local_weight = 1, teamrl's defaults

    marks: list[tuple[float, float]] = []  # (wall, CPU) at the start, then at the end of every step
    logged: dict[int, dict] = {}  # step -> TRL's logged metrics (on_log follows that step's on_step_end)

    class StepClock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), tree_cpu_seconds()))

        def on_step_end(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), tree_cpu_seconds()))

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                logged[len(marks) - 1] = dict(logs)

    tokenizer = AutoTokenizer.from_pretrained(setup.model)
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = GRPOTrainer(model=setup.model, reward_funcs=plan_path_reward, args=GRPOConfig(**trl_arguments(setup, output_dir)),
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer, callbacks=[StepClock()],
                              peft_config=trl_peft_config(setup))
        trainer.train()
        optim = str(trainer.args.optim)
    batch = float(setup.prompts * setup.k)  # TRL's loss covers every completion of the step
    steps = [{"wall_s": marks[i][0] - marks[i - 1][0], "cpu_s": marks[i][1] - marks[i - 1][1],
              "sampled": batch, "trained": batch,
              "tokens": float(logged.get(i, {}).get("completions/mean_length", 0.0)) * batch,
              "reward": float(logged.get(i, {}).get("reward", float("nan")))}
             for i in range(1 + setup.warmup_steps, len(marks))]
    same_ids = tokenizer(rows[0]["prompt"])["input_ids"] == tokenizer(rows[0]["prompt"], add_special_tokens=False)["input_ids"]
    out.write_text(json.dumps({"side": "trl", "steps": steps,
                               "info": {"trl": trl.__version__, "optim": optim, "prompt_ids_as_teamrl": same_ids}}))


# ---------------------------------------------------------------------------- results and arithmetic
@dataclass
class SideResult:
    """One side's timed steps in one round."""

    side: str
    wall_s: list[float]  # [S] per timed step
    cpu_s: list[float]  # [S]
    trained: list[float]  # [S] samples in the update
    tokens: list[float]  # [S] sampled response tokens
    reward: list[float]  # [S] mean reward of the step's samples
    info: dict = field(default_factory=dict)

    @property
    def s_per_step(self) -> float:
        """Median wall seconds per step (a median: one step slowed by another job does not count)."""
        return statistics.median(self.wall_s)

    @property
    def cpu_per_step(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def samples_per_s(self) -> float:
        """Trained samples per wall second over the timed steps."""
        return sum(self.trained) / sum(self.wall_s)

    @property
    def samples_per_cpu_s(self) -> float:
        return sum(self.trained) / sum(self.cpu_s)


def parse_side(text: str) -> SideResult:
    """A worker's JSON output as a SideResult; a ValueError saying what is missing or wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"worker output is not JSON ({err}); the worker failed before writing it") from err
    if not isinstance(data, dict) or data.get("side") not in SIDES or not isinstance(data.get("steps"), list):
        raise ValueError(f"worker output needs 'side' (one of {', '.join(SIDES)}) and a 'steps' list, got "
                         f"{str(data)[:200]}")
    if not data["steps"]:
        raise ValueError(f"side {data['side']}: no timed steps (all were warm-up?); run more steps")
    keys = ("wall_s", "cpu_s", "trained", "tokens", "reward")
    columns: dict[str, list[float]] = {key: [] for key in keys}
    for i, step in enumerate(data["steps"]):
        missing = [key for key in keys if not isinstance(step.get(key), (int, float))]
        if missing:
            raise ValueError(f"side {data['side']}, timed step {i}: missing or non-numeric {', '.join(missing)}")
        if step["wall_s"] <= 0:
            raise ValueError(f"side {data['side']}, timed step {i}: wall_s must be > 0, got {step['wall_s']}")
        for key in keys:
            columns[key].append(float(step[key]))
    return SideResult(data["side"], **columns, info=dict(data.get("info", {})))


def round_ratios(results: dict[str, SideResult]) -> dict[str, float]:
    """Within one round: how many times faster teamrl is than TRL.

    per_step: TRL's seconds per step / teamrl's; per_sample: teamrl's trained samples per second /
    TRL's; cpu_per_sample: the same per CPU second; team_per_sample: the two-agent team's trained
    samples per second / TRL's (only with a team result).
    """
    ours, trl = results["teamrl"], results["trl"]
    out = {"per_step": trl.s_per_step / ours.s_per_step,
           "per_sample": ours.samples_per_s / trl.samples_per_s,
           "cpu_per_sample": ours.samples_per_cpu_s / trl.samples_per_cpu_s}
    if "team" in results:
        out["team_per_sample"] = results["team"].samples_per_s / trl.samples_per_s
    return out


def summarise(rounds: list[dict[str, float]]) -> dict[str, tuple[float, float, float]]:
    """Each ratio's (median, min, max) over rounds."""
    keys = [key for key in rounds[0] if all(key in r for r in rounds)]
    return {key: (statistics.median(r[key] for r in rounds), min(r[key] for r in rounds),
                  max(r[key] for r in rounds)) for key in keys}


# ---------------------------------------------------------------------------- the arithmetic floor
@dataclass(frozen=True)
class Floor:
    """Each single-agent side's unavoidable matmul work per step, and the peak it is measured against."""

    peak_gflops: float  # fp32, one thread, CPU clock
    gflop: dict[str, float]  # side -> GFLOP per step (median over rounds of the side's own tokens)
    cpu_s: dict[str, float]  # side -> measured CPU s per step (median over rounds)
    frozen_base: bool = False  # LoRA: the update counted as 2 forwards (no gradient for the base's weights)

    def floor_s(self, side: str) -> float:
        return grpo_work.floor_seconds(self.gflop[side] * 1e9, self.peak_gflops)

    def share(self, side: str) -> float:
        """The side's measured CPU seconds as a share of the peak (its floor / its time)."""
        return self.floor_s(side) / self.cpu_s[side]

    @property
    def ceiling(self) -> float:
        """How many times faster than this TRL a teamrl step at 100% of the peak would be."""
        return self.cpu_s["trl"] / self.floor_s("teamrl")


def run_prompts(setup: Setup, workflow=None) -> list[str]:
    """The single agent's prompts of every step of the run: train instances 0 .. steps*P - 1."""
    if workflow is None:
        from teamrl.config import load_config
        from teamrl.setup.team import build_workflow

        workflow = build_workflow(load_config(None, teamrl_overrides(setup, team=False)))
    count = setup.prompts * (setup.warmup_steps + setup.steps)
    return [workflow.render("plan", workflow.new_state("train", i)) for i in range(count)]


def prompt_lengths(setup: Setup) -> list[int]:
    """Token counts of `run_prompts` (as TRL and teamrl encode them: no special tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(setup.model)
    return [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in run_prompts(setup)]


def arithmetic_floor(setup: Setup, rounds: list[dict[str, SideResult]], lengths: list[int], peak_gflops: float,
                     shape: grpo_work.ModelShape) -> Floor:
    """The floor of the teamrl and trl sides from their measured tokens per step."""
    steps = len(lengths) / setup.prompts  # the lengths are every step's prompts: count them all, then per step
    gflop, cpu = {}, {}
    for side, shared in (("teamrl", True), ("trl", False)):
        tokens = statistics.median(statistics.mean(r[side].tokens) for r in rounds)  # per step
        flops = grpo_work.grpo_step_flops(shape, lengths, setup.k, tokens * steps, shared_prompt=shared,
                                          frozen_base=setup.lora_r > 0)
        gflop[side] = flops / steps / 1e9
        cpu[side] = statistics.median(r[side].cpu_per_step for r in rounds)
    return Floor(peak_gflops, gflop, cpu, frozen_base=setup.lora_r > 0)


def measure_peak() -> float:
    """fp32 matmul peak, one thread, CPU clock (as the sides' CPU seconds are): the faster of torch.mm (MKL) and
    oneDNN (2.14x MKL on an AMD CPU with AVX-512, 0.82x on an AVX2-only one; policies/cpu_linear.py): the
    hardware's fp32 rate."""
    import torch
    from benchmarks.matmul_peak import measure_matmul_peak

    from teamrl.policies.cpu_linear import onednn_available

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backends = ("torch", "onednn") if onednn_available() else ("torch",)
        return max(measure_matmul_peak(clock=time.process_time, backend=b) for b in backends)
    finally:
        torch.set_num_threads(threads)


def format_floor(floor: Floor) -> list[str]:
    """The report's floor section."""
    lines = ["", f"Arithmetic floor (benchmarks/grpo_work.py: the matmul FLOPs a step cannot avoid, at this run's "
             f"fp32 matmul peak of {floor.peak_gflops:.1f} GFLOP per CPU second, 1 thread; the faster of torch.mm and oneDNN"
             + ("; LoRA: the base is frozen, so the update counts 2 forwards, not 3" if floor.frozen_base else "") + "):",
             "| side | prompts fed | GFLOP/step | floor CPU s/step | measured CPU s/step | share of peak |",
             "|---|---|---|---|---|---|"]
    for side, layout in (("teamrl", "once per prompt"), ("trl", "once per row")):
        lines.append(f"| {side} | {layout} | {floor.gflop[side]:.1f} | {floor.floor_s(side):.3f} | "
                     f"{floor.cpu_s[side]:.3f} | {floor.share(side):.0%} |")
    lines.append(f"- TRL's step does {floor.gflop['trl'] / floor.gflop['teamrl']:.2f}x teamrl's unavoidable arithmetic")
    lines.append(f"- a teamrl step at 100% of the peak would be {floor.ceiling:.2f}x faster than TRL as measured "
                 f"(TRL's CPU s / teamrl's floor): the most any teamrl could reach on this setup")
    return lines


# ---------------------------------------------------------------------------- the run
MISSING_TRL = """TRL is not importable by {python}.
TRL 1.16 is a benchmark dependency only; give it its own venv that sees this interpreter's torch
and transformers (once, about a minute; nothing CUDA is downloaded):

    {base} -m venv --system-site-packages /work/venv-trl
    /work/venv-trl/bin/pip install trl==1.16.0

then run:

    python -m benchmarks run trl_side_by_side --trl-python /work/venv-trl/bin/python
"""


def trl_available(python: str) -> bool:
    """Whether `python` can import trl's GRPOTrainer."""
    probe = subprocess.run([python, "-c", "from trl import GRPOTrainer"], capture_output=True, text=True)
    return probe.returncode == 0


def run_side(side: str, setup: Setup, python: str, folder: Path) -> SideResult:
    """One side in a fresh subprocess with one thread; its result parsed."""
    import teamrl

    out = folder / f"{side}-{time.monotonic_ns()}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TQDM_DISABLE="1")
    # This checkout's teamrl first, also in TRL's venv (which may see another, installed teamrl).
    env = child_env(env)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(teamrl.__file__).parents[1]), env["PYTHONPATH"]])
    command = [python, "-m", "benchmarks.trl_side_by_side", "--worker", side, "--setup",
               json.dumps(dataclasses.asdict(setup)), "--out", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"side {side} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return parse_side(out.read_text())


def machine_line() -> str:
    """Cores, load averages and library versions, for the output."""
    import torch
    import transformers

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"cores: {os.cpu_count()}, load average (1/5/15 min): {load}; torch {torch.__version__}, "
            f"transformers {transformers.__version__}, python {sys.version.split()[0]}")


def format_report(setup: Setup, rounds: list[dict[str, SideResult]], started: str, machine: tuple[str, str],
                  floor: Floor | None = None) -> str:
    """The report's text (the .txt beside the JSON result)."""
    ratios = [round_ratios(r) for r in rounds]
    from benchmarks.harness import provenance

    run = provenance()
    lines = [f"teamrl vs TRL GRPOTrainer, side by side ({started})", f"commit {run['commit']}, command: {run['command']}",
             f"before: {machine[0]}", f"after:  {machine[1]}",
             f"setup: {json.dumps(dataclasses.asdict(setup))}", ""]
    trl_info = rounds[0]["trl"].info
    lines.append(f"TRL {trl_info.get('trl', '?')}, optim {trl_info.get('optim', '?')}, TRL prompt ids equal "
                 f"teamrl's (no special tokens added): {trl_info.get('prompt_ids_as_teamrl', '?')}")
    lines += ["", "| round | side | s/step (median) | CPU s/step | trained samples/step | samples/s | "
              "samples/CPU s | tokens/step | mean reward |", "|---|---|---|---|---|---|---|---|---|"]
    for n, result in enumerate(rounds, 1):
        for side, r in result.items():
            lines.append(f"| {n} | {side} | {r.s_per_step:.3f} | {r.cpu_per_step:.3f} | "
                         f"{statistics.mean(r.trained):.0f} | {r.samples_per_s:.1f} | {r.samples_per_cpu_s:.1f} | "
                         f"{statistics.mean(r.tokens):.0f} | {statistics.mean(r.reward):+.3f} |")
    for side in ("teamrl", "team"):
        if side in rounds[0]:
            parts = [f"{r[side].info['rollout_s']:.2f} + {r[side].info['update_s']:.2f}" for r in rounds]
            lines.append(f"{side}: rollout + update, median wall s/step from its metrics.jsonl, by round: "
                         f"{', '.join(parts)}")
    lines += ["", "How many times faster teamrl is than TRL (median over rounds, min-max):"]
    names = {"per_step": "single-agent GRPO, per step (TRL s/step / teamrl s/step)",
             "per_sample": "single-agent GRPO, per trained sample (wall)",
             "cpu_per_sample": "single-agent GRPO, per trained sample (CPU seconds)",
             "team_per_sample": "two-agent AT-GRPO team vs TRL single agent, per trained sample (wall)"}
    for key, (mid, low, high) in summarise(ratios).items():
        lines.append(f"- {names[key]}: {mid:.2f}x ({low:.2f}-{high:.2f})")
    if floor is not None:
        lines += format_floor(floor)
    lines += ["", "Differences of setup that remain:"] + [f"- {d}" for d in DIFFERENCES]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trl-python", default=sys.executable, help="interpreter that can import trl")
    parser.add_argument("--model", default="", help="model folder (default: a random tiny-default Llama)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per side and round")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed steps first")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--no-team", action="store_true", help="skip the two-agent team side")
    parser.add_argument("--lora-r", type=int, default=0, help="a LoRA adapter of this rank on both sides (0: full)")
    parser.add_argument("--teamrl-default-filter", action="store_true",
                        help="teamrl drops zero-signal groups from its update (its default; TRL cannot)")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 1 warm-up + 2 timed steps (~3 min)")
    parser.add_argument("--bf16", action="store_true",
                        help="bfloat16 on both sides (TRL: bf16=True; teamrl: bf16 sampler + bf16 autocast + tis)")
    parser.add_argument("--teamrl-cpu-linear", choices=["auto", "onednn", "torch"], default="auto",
                        help="teamrl's policy.cpu_linear (torch: MKL's matmuls, what TRL's side runs)")
    add_out_argument(parser, "trl_side_by_side")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--setup", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        setup, out = Setup(**json.loads(args.setup)), Path(args.out)
        worker_trl(setup, out) if args.worker == "trl" else worker_teamrl(setup, args.worker == "team", out)
        return
    if not trl_available(args.trl_python):
        sys.exit(MISSING_TRL.format(python=args.trl_python, base=sys.executable))
    if args.quick:
        args.rounds, args.steps, args.warmup_steps = 2, 2, 1
    started, before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine_line()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if not model:
            from benchmarks.teamrl_steps import save_random_llama

            model = str(save_random_llama(Path(tmp) / "model", hidden=128, layers=4, heads=4, intermediate=384))
        setup = Setup(model=model, prompts=args.prompts, k=args.k, max_new_tokens=args.max_new_tokens,
                      warmup_steps=args.warmup_steps, steps=args.steps, drop_zero_signal=args.teamrl_default_filter,
                      lora_r=args.lora_r, cpu_linear=args.teamrl_cpu_linear,
                      bf16=args.bf16)
        sides = [s for s in SIDES if not (args.no_team and s == "team")]
        rounds, peaks = [], [measure_peak()]
        for n in range(args.rounds):
            order = sides if n % 2 == 0 else sides[::-1]
            result = {}
            for side in order:
                result[side] = run_side(side, setup, args.trl_python if side == "trl" else sys.executable, Path(tmp))
                print(f"round {n + 1} {side}: {result[side].s_per_step:.3f} s/step", flush=True)
            rounds.append({side: result[side] for side in sides})
            peaks.append(measure_peak())
        from transformers import AutoModelForCausalLM

        shape = grpo_work.ModelShape.of(AutoModelForCausalLM.from_pretrained(model))
        floor = arithmetic_floor(setup, rounds, prompt_lengths(setup), max(peaks), shape)
    if not args.model:
        setup = dataclasses.replace(setup, model="random tiny-default Llama (hidden 128, 4 layers, seed 0)")
    report = format_report(setup, rounds, started, (before, machine_line()), floor)
    write_result(args.out, report.splitlines())
    print(report)


if __name__ == "__main__":
    main()
