"""The sections of a run configuration that say how the team learns: the algorithm, the loop, where the
updates run, and the diagnostics. One dataclass each, every field with its help text beside it, each
validating its own fields in `__post_init__` (checks across sections: `cross_checks.py`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from teamrl.config.checks import ConfigError, require
from teamrl.config.options import (
    AdamWImpl,
    Aggregation,
    Autocast,
    Commit,
    DiagnosticsLevel,
    Grouping,
    Objective,
    RolloutCorrection,
    RolloutSchedule,
    Schedule,
    Shard,
    ShardParamDType,
    Threads,
    TrainerBackend,
    TrajectoryCredit,
    check_choice,
)

MAX_STEPS = 1_000_000_000  # decades of steps: a run meant to stop on time sets train.time_budget_s
THREADS_PER_CORE = 4  # more threads than that on a core only makes torch slower


@dataclass
class AlgorithmConfig:
    """AT-GRPO and its baselines."""

    objective: Objective = "grpo"
    """grpo: group-normalised advantages (AT-GRPO and its GRPO baselines); rft: the SFT baseline on the team's
    own successes (rejection-sampling fine-tuning): every response of a successful episode gets advantage 1,
    every other 0 (needs grouping: trajectory)."""
    grouping: Grouping = "tree"
    """tree: AT-GRPO groups by (instance, turn, agent); trajectory: one group per instance over K full episodes."""
    k: int = 8
    """Candidates per agent per turn (tree) or episodes per instance (trajectory)."""
    team_weight: float = 1.0
    """r = team_weight * r_team + local_weight * r_local."""
    local_weight: float = 1.0
    """See team_weight."""
    scale_by_std: bool = True
    """Divide centred rewards by the group std (False: Dr. GRPO)."""
    adv_eps: float = 1e-6
    """Added to the group std."""
    agentwise_norm: bool = False
    """Dr. MAS: divide each group's centred rewards by its agent's reward std over the whole batch instead
    of by the group's own std (takes precedence over scale_by_std; tree grouping, or trajectory with
    trajectory_credit: per_agent)."""
    drop_zero_signal: bool = True
    """Leave out of the update the groups whose rewards are all equal (their advantage is 0)."""
    commit: Commit = "greedy"
    """Which candidate continues the episode: greedy (argmax reward, seeded ties) or sample."""
    clip_low: float = 0.2
    """PPO ratio clip below 1."""
    clip_high: float = 0.2
    """PPO ratio clip above 1."""
    log_ratio_clamp: float = 20.0
    """|log(pi / pi_old)| is clamped to this before exp in the PPO ratio, so a huge ratio cannot give an
    infinite loss or a NaN gradient (verl clamps at 20 too)."""
    rollout_correction: RolloutCorrection = "none"
    """Correct for a sampler whose distribution mu differs from the trainer's (vLLM, bfloat16 sampling, stale
    weights): none (the PPO ratio is taken against the sampler's log-probs), or one extra no-grad forward per
    update batch gives the trainer's own log-probs pi_prox, the PPO ratio is taken against those and each
    token's loss is weighted by pi_prox / mu: tis (per token, truncated at rollout_correction_cap), mis (per
    token, tokens whose ratio leaves [1 / cap, cap] are dropped), seq_tis / seq_mis (the same with the
    geometric mean of the ratio over each response). Use with rollout.engine: vllm or a bfloat16 sampler;
    logs rollout_correction/<policy>/... (docs/concepts/rollout-correction.md)."""
    rollout_correction_cap: float = 2.0
    """C of rollout_correction (> 1): the importance weight is truncated at C (tis, seq_tis) or the token or
    response is dropped when its weight leaves [1 / C, C] (mis, seq_mis)."""
    kl_clamp: float = 10.0
    """|log(ref / pi)| is clamped to this inside the k3 KL estimator (exp of a large gap overflows)."""
    aggregation: Aggregation = "token-mean"
    """token-mean, seq-mean-token-mean or seq-mean-token-sum."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the frozen initial policy (0 = no reference model)."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""
    ppo_epochs: int = 1
    """Passes over each step's samples."""
    minibatch_size: int = 256
    """Samples per optimizer step (several minibatches make the PPO clip act)."""
    kl_coef_by_role: dict = field(default_factory=dict)
    """Per-role KL anchor {role: coef}; listed roles use their coef instead of kl_coef (needs a reference)."""
    coherence_damping: float = 0.0
    """lambda: scale each role's gradient by 1 - lambda * clamp(cos(g, EMA(g)), 0, 1) (0 = off; <= 0.3)."""
    coherence_tau: float = 0.9
    """EMA decay of each role's gradient, ema <- tau * ema + (1 - tau) * g (damping and the coherence metric)."""
    role_balanced: bool = False
    """Each role contributes equally to a minibatch's loss (instead of in proportion to its tokens/samples)."""
    trajectory_credit: TrajectoryCredit = "team"
    """grouping trajectory only. team: every agent's return is the episode's summed reward (one shared
    outcome); per_agent: each agent's own committed rewards plus the episode's success (0/1), grouped
    per (instance, agent) (the per-agent-rewards mitigation against echo chambers); own: each agent's own
    committed rewards only, grouped per (instance, agent): the per-turn rewards tree grouping uses, so a
    tree-vs-trajectory comparison differs in the grouping alone."""
    micro_batch_tokens: int = 0
    """Split each minibatch into micro-batches of at most this many real tokens (each prompt once plus its
    responses), backpropagated one at a time with gradients accumulated to the minibatch's: bounds activation
    memory, same gradient (0 = no limit; a prompt with a response longer than the budget runs alone)."""
    length_buckets: bool = True
    """Lay each minibatch out by length (prompts by prompt length, responses by response length) so that
    forward passes compute little padding; false: one forward per part, padded to its longest sequence.
    Off under trainer.shard: fsdp, whose workers must run the same forwards."""
    bucket_call_tokens: int = 64
    """Padded positions one more forward call is worth when cutting into length buckets (lower: more,
    tighter buckets; suits big models, where a position costs more than a call's fixed overhead)."""
    autocast: Autocast = "off"
    """off or bf16: the update's forward in bfloat16 autocast (fp32 weights, fp32 output head and log-probs;
    the body's matmuls in bf16: faster on CPUs with bf16 units and on GPUs, but not bit-equal to fp32). Keep it
    off on a CPU without bf16 units: there bf16 is emulated, far slower than fp32 (warned about at load;
    docs/performance/update.md has the measurements)."""

    def __post_init__(self) -> None:
        # Keys are bare: build_dataclass prefixes the section ("algorithm.") to a check's message.
        check_choice(self.grouping, "grouping", Grouping)
        check_choice(self.objective, "objective", Objective)
        require(
            self.objective != "rft" or self.grouping == "trajectory",
            "objective",
            self.objective,
            "grpo with tree grouping (rft imitates whole successful episodes: set algorithm.grouping=trajectory)",
        )
        check_choice(self.trajectory_credit, "trajectory_credit", TrajectoryCredit)
        require(self.k >= 2, "k", self.k, ">= 2 (a group needs two samples)")
        check_choice(self.commit, "commit", Commit)
        check_choice(self.aggregation, "aggregation", Aggregation)
        require(
            0 <= self.clip_low < 1 and self.clip_high >= 0,
            "clip_low",
            self.clip_low,
            "0 <= clip_low < 1 and clip_high >= 0",
        )
        require(
            self.minibatch_size >= 1 and self.ppo_epochs >= 1,
            "minibatch_size",
            self.minibatch_size,
            ">= 1 (and ppo_epochs >= 1)",
        )
        self._check_mitigations()
        require(
            self.micro_batch_tokens >= 0,
            "micro_batch_tokens",
            self.micro_batch_tokens,
            "an integer >= 0 tokens (0 = no limit), e.g. 4096",
        )
        require(
            self.bucket_call_tokens >= 0,
            "bucket_call_tokens",
            self.bucket_call_tokens,
            "an integer >= 0 (e.g. 64; set length_buckets: false to turn bucketing off)",
        )
        check_choice(self.autocast, "autocast", Autocast)
        check_choice(self.rollout_correction, "rollout_correction", RolloutCorrection)
        require(
            self.rollout_correction_cap > 1,
            "rollout_correction_cap",
            self.rollout_correction_cap,
            "a number > 1 (the weight is kept within [1 / cap, cap]), e.g. 2.0",
        )

    def _check_mitigations(self) -> None:
        """The settings of the mitigations against unstable ratios, echo chambers and dominant roles."""
        require(
            self.log_ratio_clamp > 0,
            "log_ratio_clamp",
            self.log_ratio_clamp,
            "> 0 (e.g. 20: ratios beyond exp(20) are treated as exp(20))",
        )
        require(self.kl_clamp > 0, "kl_clamp", self.kl_clamp, "> 0 (e.g. 10)")
        if self.agentwise_norm and self.grouping == "trajectory" and self.trajectory_credit == "team":
            raise ConfigError(
                "agentwise_norm = true does nothing with grouping: trajectory and "
                "trajectory_credit: team (every agent shares the episode's return); set "
                "algorithm.trajectory_credit=per_agent or algorithm.grouping=tree, or "
                "agentwise_norm=false"
            )
        for role, coef in self.kl_coef_by_role.items():
            require(
                isinstance(coef, (int, float)) and not isinstance(coef, bool) and coef >= 0,
                f"kl_coef_by_role.{role}",
                coef,
                "a number >= 0",
            )
        require(
            0 <= self.coherence_damping <= 1,
            "coherence_damping",
            self.coherence_damping,
            "0 <= lambda <= 1 (0 = off; at 1 a fully coherent role's update freezes)",
        )
        require(0 <= self.coherence_tau < 1, "coherence_tau", self.coherence_tau, "0 <= tau < 1")


@dataclass
class TrainConfig:
    """The loop."""

    steps: int = 150
    """Training steps (one rollout batch and one update per step)."""
    batch_size: int = 16
    """Task instances per step."""
    warmup_steps: int = 5
    """Linear learning-rate warm-up."""
    schedule: Schedule = "constant"
    """constant or cosine (after warm-up)."""
    grad_clip: float = 1.0
    """Max global grad norm per policy (0 = off)."""
    eval_every: int = 25
    """Held-out evaluation period in steps (0 = only at start and end)."""
    eval_instances: int = 200
    """Held-out instances of the first and the final evaluation (the reported initial and final success)."""
    midway_eval_instances: int = 50
    """Held-out instances of the evaluations in between (the first N of the split, the same ones each time),
    which cost a small share of training this way; checkpoints/best is picked on these N, at every
    evaluation (the first and final ones included). 0 (or >= eval_instances): eval_instances every time."""
    checkpoint_every: int = 0
    """Resumable checkpoint period in steps (0 = only the final and best weights; nothing to resume from)."""
    keep_last: int = 3
    """Step checkpoints kept (older ones are deleted; 0 keeps all). best and final are always kept."""
    resume: str = ""
    """'' (new run), auto (continue output_dir/run_name if it exists), or a run directory / checkpoint folder."""
    time_budget_s: float = 0.0
    """Stop training after this many seconds (0 = no limit); the final eval still runs."""
    threads: Threads = "auto"
    """Torch threads of the training and eval process: a number, or auto: the cores other processes leave
    free (CPU affinity and cgroup quota minus the others' load: the larger of the load average's share of
    others and their CPU use on these cores since the last decision, from /proc/stat; rounded down, 1 to 4),
    decided again before every step, so a busy machine never makes a step slower than one thread would
    (docs/performance/busy-machine.md). Each step logs the count as time/threads. A different count changes the
    last bits of the arithmetic: set a number for runs (and resumes) that must repeat exactly."""
    adamw: AdamWImpl = "fused"
    """AdamW implementation: fused (one kernel over all parameters), foreach (a few batched ops) or for-loop
    (one op per tensor). All give the same update up to float rounding; fused falls back to foreach where
    this torch has no fused kernel for the device."""
    keep_freed_memory: bool = True
    """CPU (glibc): keep the memory a step frees for the next step instead of giving it back to the OS and
    faulting it in again (`teamrl.training.freed_memory`), which makes steps faster (docs/performance/update.md
    has the measurements). The process's resident set then stays at its highest point; false gives memory back
    between steps, for a process that must not hold its peak. Applies to the rest of the process."""

    def __post_init__(self) -> None:
        # Keys are bare: build_dataclass prefixes the section ("train.") to a field check's message.
        require(self.steps >= 0, "steps", self.steps, "an integer >= 0")
        require(
            self.steps <= MAX_STEPS,
            "steps",
            self.steps,
            f"at most {MAX_STEPS:_} steps (to stop on time instead, set train.time_budget_s)",
        )
        require(self.batch_size >= 1, "batch_size", self.batch_size, "an integer >= 1")
        require(self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "an integer >= 0")
        check_choice(self.schedule, "schedule", Schedule)
        require(self.grad_clip >= 0, "grad_clip", self.grad_clip, ">= 0 (0 turns clipping off)")
        require(self.eval_every >= 0, "eval_every", self.eval_every, ">= 0 (0 evaluates only at start and end)")
        require(
            self.eval_instances >= 1,
            "eval_instances",
            self.eval_instances,
            "an integer >= 1 (the held-out success needs at least one episode)",
        )
        require(
            self.midway_eval_instances >= 0,
            "midway_eval_instances",
            self.midway_eval_instances,
            "an integer >= 0 (0 evaluates eval_instances every time)",
        )
        require(self.keep_last >= 0, "keep_last", self.keep_last, ">= 0 (0 keeps every checkpoint)")
        require(
            self.checkpoint_every >= 0,
            "checkpoint_every",
            self.checkpoint_every,
            ">= 0 (0 writes no resumable checkpoint)",
        )
        require(self.time_budget_s >= 0, "time_budget_s", self.time_budget_s, ">= 0 seconds (0 = no limit)")
        most = THREADS_PER_CORE * (os.cpu_count() or 1)
        require(
            self.threads == "auto"
            or (isinstance(self.threads, int) and not isinstance(self.threads, bool) and 1 <= self.threads <= most),
            "threads",
            self.threads,
            f"auto or a whole number of threads from 1 to {most} ({THREADS_PER_CORE} per core of this "
            "machine), e.g. train.threads=1",
        )
        check_choice(self.adamw, "adamw", AdamWImpl)


@dataclass
class DiagnosticsConfig:
    """Role-aware diagnostics and the alerts they raise (see teamrl.diagnostics)."""

    level: DiagnosticsLevel = "cheap"
    """none, cheap (per-role stats and exact per-role gradient norms) or full (+ gradient cosines,
    coherence and output diversity)."""
    sketch_dim: int = 4096
    """Size of the random projection of gradients used for cosines when the model is too big for exact vectors."""
    exact_max_params: int = 4_000_000
    """Keep exact gradient vectors (no projection) for policies with at most this many trainable parameters."""
    alerts: bool = True
    """Raise dominant-role, echo-chamber and collapse alerts (printed and written to alerts.jsonl)."""
    baseline_steps: int = 3
    """Steps averaged into each metric's step-0 baseline (drift is measured against it)."""
    window: int = 5
    """Trailing steps averaged before an alert condition is checked."""
    dominant_share: float = 0.6
    """Dominant role: a role's share of its shared policy's gradient norm at or above this..."""
    drift_toward: float = 0.3
    """...while another role's response length moved this fraction of the way toward the dominant role's..."""
    min_length_gap: float = 2.0
    """(lengths closer than this many tokens at baseline are not compared)..."""
    format_drop: float = 0.2
    """...or that role's format adherence fell by at least this much."""
    echo_cosine: float = 0.8
    """Echo chamber: gradient cosine between duplicated agents of a role at or above this (at any of the last `window` updates)..."""
    diversity_drop: float = 0.5
    """...while their output diversity fell by this fraction of its baseline..."""
    diversity_floor: float = 0.05
    """...or below this absolute level."""
    collapse_drop: float = 0.15
    """Collapse: the held-out success fell this much (absolute) below its peak. Lower catches a cliff earlier
    and flags more noise; docs/study/workflows.md tells how the default was chosen."""
    stall_adv: float = 1e-3
    """Stalled role: a role's mean |advantage| at most this at each of the last `window` steps..."""
    stall_success: float = 0.9
    """...while the team's training success (mean over the window) is below this."""
    train_transcripts: int = 4
    """Training episodes (with each turn's reward and advantage) saved at every evaluation step."""

    def __post_init__(self) -> None:
        check_choice(self.level, "level", DiagnosticsLevel)
        require(self.sketch_dim >= 16, "sketch_dim", self.sketch_dim, ">= 16")
        require(self.baseline_steps >= 1 and self.window >= 1, "window", self.window, ">= 1 (and baseline_steps >= 1)")
        for name in (
            "dominant_share",
            "drift_toward",
            "format_drop",
            "echo_cosine",
            "diversity_drop",
            "diversity_floor",
            "collapse_drop",
            "stall_success",
        ):
            value = getattr(self, name)
            require(0 <= value <= 1, name, value, "a fraction between 0 and 1")
        require(self.stall_adv >= 0, "stall_adv", self.stall_adv, ">= 0 (a mean |advantage|)")
        require(self.train_transcripts >= 0, "train_transcripts", self.train_transcripts, ">= 0")


@dataclass
class TrainerConfig:
    """Where the per-policy updates run: in this process, or on Ray actors (see docs/howto/ray.md)."""

    backend: TrainerBackend = "local"
    """local (every policy's update here, one after another) or ray (an actor group per policy, in parallel)."""
    ray_address: str = ""
    """Ray cluster to join, e.g. 10.0.0.1:6379; empty: the RAY_ADDRESS variable, else a local Ray."""
    num_cpus_per_policy: float = 1.0
    """CPUs Ray reserves for each policy's actor group (fractions allowed)."""
    num_gpus_per_policy: float = 0.0
    """GPUs Ray reserves for each policy's actor group (fractions let policies share a GPU)."""
    data_parallel: int = 1
    """Workers per policy, each scoring a share of every minibatch (torch.distributed); > 1 needs ray."""
    rollout_workers: int = 0
    """Ray actors that play the training episodes (environment and verifiers included), a contiguous
    share of every step's instances each; 0: rollouts in the driver. > 0 needs ray."""
    num_cpus_per_rollout_worker: float = 1.0
    """CPUs Ray reserves for each rollout worker (fractions allowed)."""
    rollout_schedule: RolloutSchedule = "serial"
    """serial (sample step t, then update on it) or pipelined (the rollout workers play step t+1 while the
    policies update on step t; needs rollout_workers >= 1; docs/performance/pipeline.md)."""
    rollout_staleness: int = 1
    """rollout_schedule: pipelined only: weights versions the sampler lags behind the trainer. 1: step t+1 is
    sampled with the weights before update t, during it (needs algorithm.rollout_correction); 0: the
    workers wait for update t (no overlap; the run equals the serial one)."""
    shard: Shard = "none"
    """none (every worker of a policy holds all its weights, gradients and AdamW state) or fsdp (FSDP2: the
    data_parallel workers of a policy each hold 1/data_parallel of them; needs backend: ray; docs/scaling/fsdp.md)."""
    shard_param_dtype: ShardParamDType = "float32"
    """shard: fsdp only: the dtype weights are gathered in for forward and backward. bfloat16 is mixed precision:
    weights, gradients reduced across workers and AdamW state stay float32."""

    def __post_init__(self) -> None:
        check_choice(self.backend, "backend", TrainerBackend)
        require(
            self.num_cpus_per_policy >= 0 and self.num_gpus_per_policy >= 0,
            "num_cpus_per_policy",
            self.num_cpus_per_policy,
            ">= 0 (and num_gpus_per_policy >= 0)",
        )
        require(self.data_parallel >= 1, "data_parallel", self.data_parallel, "an integer >= 1")
        require(self.rollout_workers >= 0, "rollout_workers", self.rollout_workers, "an integer >= 0")
        check_choice(self.rollout_schedule, "rollout_schedule", RolloutSchedule)
        require(self.rollout_staleness in (0, 1), "rollout_staleness", self.rollout_staleness, "0 or 1")
        if self.rollout_schedule == "pipelined" and not self.rollout_workers:
            raise ConfigError(
                "rollout_schedule: pipelined plays the next step in rollout worker processes while this "
                "process updates; set trainer.rollout_workers=1 (with trainer.backend=ray), or "
                "trainer.rollout_schedule=serial"
            )
        require(
            self.num_cpus_per_rollout_worker >= 0,
            "num_cpus_per_rollout_worker",
            self.num_cpus_per_rollout_worker,
            ">= 0",
        )
        self._check_sharding()
        if self.rollout_workers and self.backend != "ray":
            raise ConfigError(
                "trainer.rollout_workers > 0 needs trainer.backend: ray (the rollout workers are "
                "Ray actors); set trainer.backend=ray or trainer.rollout_workers=0"
            )

    def _check_sharding(self) -> None:
        # Messages start at the field: build_dataclass prefixes the section ("trainer.").
        check_choice(self.shard, "shard", Shard)
        check_choice(self.shard_param_dtype, "shard_param_dtype", ShardParamDType)
        if self.shard != "fsdp":
            return
        if self.backend != "ray":
            raise ConfigError(
                "shard: fsdp needs trainer.backend: ray (a policy is sharded across the Ray "
                "workers of its actor group); set trainer.backend=ray, or trainer.shard=none"
            )
        gpus = self.num_gpus_per_policy
        if gpus and self.data_parallel > 1 and (self.data_parallel > gpus or gpus % self.data_parallel):
            raise ConfigError(
                f"shard: fsdp with data_parallel = {self.data_parallel} shards but num_gpus_per_policy = "
                f"{gpus:g}: every shard needs whole GPUs of its own (nccl cannot run two ranks on one GPU); set "
                f"data_parallel to at most {int(gpus)} and a divisor of it, or num_gpus_per_policy to a multiple "
                f"of {self.data_parallel}"
            )
