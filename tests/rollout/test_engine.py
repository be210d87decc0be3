import pytest
import torch

from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout.builtin_engine import SamplingParams, sample
from toy import tiny_policy

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>"]


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])
def test_sampling_logprobs_equal_trainer_logprobs(arch):
    policy = tiny_policy(arch)
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    gens = sample(policy, prompts, 4, SamplingParams(temperature=0.8, max_new_tokens=12),
                  torch.Generator().manual_seed(0))
    flat = [g for group in gens for g in group]
    batch = pack_responses([g.prompt_ids for g in flat], [g.response_ids for g in flat],
                           policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, batch, temperature=0.8)
    for i, g in enumerate(flat):
        assert len(g.response_ids) == len(g.logprobs) >= 1
        assert torch.allclose(logp[i, : len(g.logprobs)], torch.tensor(g.logprobs), atol=1e-4)
        # no truncation: the sampler draws from exactly the trained distribution
        assert g.sampler_logprobs == pytest.approx(g.logprobs, abs=1e-5)


def test_k_samples_of_a_prompt_differ_and_are_seeded():
    policy = tiny_policy("llama")
    prompts = [policy.encode_prompt("hello")]
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    first = sample(policy, prompts, 8, params, torch.Generator().manual_seed(1))
    again = sample(policy, prompts, 8, params, torch.Generator().manual_seed(1))
    assert [g.response_ids for g in first[0]] == [g.response_ids for g in again[0]]
    assert len({tuple(g.response_ids) for g in first[0]}) > 1
    assert all(g.prompt_ids == prompts[0] for g in first[0])


def test_greedy_equals_top_k_one_and_batch_independent():
    policy = tiny_policy("qwen2")
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    greedy = sample(policy, prompts, 1, SamplingParams(temperature=0, max_new_tokens=8), torch.Generator())
    topk = sample(policy, prompts, 1, SamplingParams(temperature=1, top_k=1, max_new_tokens=8),
                  torch.Generator().manual_seed(3))
    alone = sample(policy, prompts[1:2], 1, SamplingParams(temperature=0, max_new_tokens=8), torch.Generator())
    assert [g[0].response_ids for g in greedy] == [g[0].response_ids for g in topk]
    # left padding must not change what a prompt generates
    assert greedy[1][0].response_ids == alone[0][0].response_ids


def test_truncation_is_recorded_separately():
    policy = tiny_policy("llama")
    gens = sample(policy, [policy.encode_prompt("abc")], 6, SamplingParams(temperature=1.0, top_k=3, max_new_tokens=6),
                  torch.Generator().manual_seed(0))
    for g in gens[0]:
        # the truncated distribution gives each drawn token at least its full-softmax probability
        assert all(s >= p - 1e-6 for s, p in zip(g.sampler_logprobs, g.logprobs))


def test_stop_strings_cut_text_tokens_and_logprobs_together():
    """One row: the stopped response is exactly the unstopped one's prefix up to the first stop string."""
    policy = tiny_policy("llama")
    prompt = [policy.encode_prompt("xyz")]
    stops = ("a", "e", "i", "o")
    cut_some = 0
    for seed in range(12):
        free = sample(policy, prompt, 1, SamplingParams(temperature=1.0, max_new_tokens=30),
                      torch.Generator().manual_seed(seed))[0][0]
        stopped = sample(policy, prompt, 1, SamplingParams(temperature=1.0, max_new_tokens=30, stop_strings=stops),
                         torch.Generator().manual_seed(seed))[0][0]
        # the char tokenizer: a token is one character (or none: special tokens), so the cut is the
        # first token that is a stop character
        chars = [policy.tokenizer.decode([t], skip_special_tokens=True) for t in free.response_ids]
        first = next((i for i, c in enumerate(chars) if c in stops), None)
        if first is None:
            assert stopped.response_ids == free.response_ids and stopped.text == free.text
            continue
        cut_some += 1
        assert stopped.text == "".join(chars[: first + 1])  # the stop string is kept, nothing after it
        assert stopped.response_ids == free.response_ids[: first + 1]
        assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-6)
        assert len(stopped.sampler_logprobs) == len(stopped.response_ids)
        assert stopped.finished
    assert cut_some >= 4  # the test saw cuts (and rows without one)


def test_chat_template_wraps_prompt():
    template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    policy = tiny_policy("llama", chat_template=template)
    ids = policy.encode_prompt("hi")
    assert policy.tokenizer.decode(ids) == "<user>hi<assistant>"


def test_empty_prompt_is_an_error():
    policy = tiny_policy("llama")
    with pytest.raises(ValueError, match="empty prompt"):
        sample(policy, [[]], 2, SamplingParams(), torch.Generator())
