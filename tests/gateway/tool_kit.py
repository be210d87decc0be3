"""Helpers of the tool-call tests: a sampler that answers with scripted texts, scored by the real model."""

from __future__ import annotations

import torch

from teamrl.policies.chat_encoding import text_ids
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout.builtin_engine import Generation

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


def scripted_generation(policy: Policy, prompt: list[int], response: list[int]) -> Generation:
    """A Generation of the given response ids (their log-probs under the policy at temperature 1)."""
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, pack_responses([prompt], [response], policy.tokenizer.pad_token_id))
    logprobs = logp[0, :len(response)].tolist()
    text = policy.tokenizer.decode([i for i in response if i != policy.tokenizer.eos_token_id])
    return Generation(list(prompt), list(response), logprobs, logprobs, text, True, temperature=1.0)


class ScriptedSampler:
    """A `SamplingWorker` sampler answering each prompt with the next scripted text (its tokens + EOS), or
    with the next scripted list of ids; `prompts` keeps what it was asked."""

    def __init__(self, *script: str | list[int], respond=None) -> None:
        """respond: instead of a script, prompt text -> response text."""
        self.script = list(script)
        self.respond = respond
        self.prompts: list[list[int]] = []

    def __call__(self, policy, prompts, n, params, generator):
        out = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            step = self.respond(policy.tokenizer.decode(prompt)) if self.respond else self.script.pop(0)
            ids = step if isinstance(step, list) else text_ids(policy.tokenizer, step) + [policy.tokenizer.eos_token_id]
            out.append([scripted_generation(policy, prompt, ids) for _ in range(n)])
        return out
