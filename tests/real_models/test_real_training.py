"""AT-GRPO on a real pretrained LLM end to end, kept to a few tokens: the lean decode against the HF
forward, one step in each policy regime, save and exact resume, `teamrl eval`, and a heterogeneous
SmolLM2 + Gemma-3 pair (two architectures, two tokenizers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from stop_after import stop_after_checkpoint

from teamrl.cli import main as cli_main
from teamrl.config import load_config
from teamrl.policies.loading import load_policy
from teamrl.policies.scoring import left_pad
from teamrl.rollout.decoding import open_decoder
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.rollout.lean_decode import LeanDecoder
from teamrl.training.loop import train

# The math team on one-digit sums, one turn, a few tokens: the smallest real episode (the tool's
# program runs in the sandbox). drop_zero_signal off: with 2 samples of 6 tokens most groups tie.
TINY_BUDGET = [
    "task.name=math", "task.source=arithmetic:1", "workflow.max_turns=1", "workflow.prompt_style=chat",
    "rollout.temperature=0.6", "rollout.max_new_tokens=6", "algorithm.k=2", "algorithm.drop_zero_signal=false",
    "train.steps=1", "train.batch_size=1", "train.eval_instances=1", "train.warmup_steps=0", "train.threads=1",
    "policy.lr=1e-4", "algorithm.entropy_coef=0.01"]
CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"
LORA = "policy.lora={r: 2, alpha: 4, target_modules: [q_proj, v_proj]}"


def _config(tmp_path: Path, model: str, *extra: str):
    return load_config(None, [*TINY_BUDGET, f"policy.model={model}", f"output_dir={tmp_path / 'runs'}", *extra])


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(str(f)).items()}


def test_lean_decode_gives_the_hf_forward_logprobs_on_smollm2(smollm2):
    policy = load_policy("p", smollm2)
    prompts = [policy.encode_prompt("What is 2+3?"), policy.encode_prompt("Name a color.")]
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
    with torch.no_grad():
        assert isinstance(open_decoder(policy.model, ids, mask, 2, 6), LeanDecoder)  # Llama: the fast path
    gens = sample(policy, prompts, 2, SamplingParams(temperature=1.0, max_new_tokens=6), torch.Generator().manual_seed(0))
    worst = 0.0
    for prompt, row in zip(prompts, gens):
        for gen in row:
            full = torch.tensor([prompt + gen.response_ids])
            with torch.no_grad():
                logits = policy.model(input_ids=full).logits[0, len(prompt) - 1:-1].float()
            ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.response_ids)[:, None])[:, 0]
            worst = max(worst, (ref - torch.tensor(gen.logprobs)).abs().max().item())
    assert worst < 1e-4, worst


def test_greedy_stops_at_im_end(smollm2):
    policy = load_policy("p", smollm2)
    [[gen]] = sample(policy, [policy.encode_prompt("What is 2+2? Reply with only the number.")], 1,
                     SamplingParams(temperature=0.0, max_new_tokens=16), torch.Generator().manual_seed(0))
    # greedy SmolLM2 answers "2 + 2 = 4" in 8 tokens and ends its turn: the stop token is the last one kept
    assert gen.finished and gen.response_ids[-1] == policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert len(gen.response_ids) < 16 and gen.text.strip().endswith("4") and "<|im_end|>" not in gen.text


@pytest.mark.parametrize("regime, extra", [
    ("shared", []),                 # one full model for both roles
    ("per_role", [LORA]),           # a LoRA adapter per role on one base
    ("per_agent", [LORA]),          # an adapter per agent
])
def test_one_at_grpo_step_in_each_regime(tmp_path, smollm2, regime, extra):
    run = train(_config(tmp_path, "smollm2-135m-instruct", f"regime={regime}", f"run_name={regime}", *extra),
                progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    assert step["train/samples"] == 4  # 2 agents x K 2
    policies = {k.split("/")[1] for k in step if k.startswith("policy/") and k.endswith("/loss")}
    assert policies == ({"shared"} if regime == "shared" else {"reasoner", "tool"})
    final = run / "checkpoints" / "final"
    for name in policies:
        saved = _weights(final / name)
        assert saved and all(torch.isfinite(v).all() for v in saved.values())
        marker = "adapter_config.json" if extra else "config.json"
        assert (final / name / marker).is_file()
        if not extra:
            assert "quantization_config" not in json.loads((final / name / "config.json").read_text())


def test_save_and_resume_round_trip_is_exact(tmp_path, smollm2, monkeypatch):
    two_steps = ["regime=per_role", LORA, "train.steps=2", "train.checkpoint_every=1"]
    reference = train(_config(tmp_path, "smollm2-135m-instruct", *two_steps, "run_name=reference"), progress=False)
    stop_after_checkpoint(monkeypatch, 1, lambda: train(
        _config(tmp_path, "smollm2-135m-instruct", *two_steps, "run_name=stopped"), progress=False))
    stopped = train(_config(tmp_path, "smollm2-135m-instruct", *two_steps, "run_name=stopped", "train.resume=auto"),
                    progress=False)
    for name in ("reasoner", "tool"):
        want, got = _weights(reference / "checkpoints" / "final" / name), _weights(stopped / "checkpoints" / "final" / name)
        assert want and set(got) == set(want)
        assert all(torch.equal(got[k], want[k]) for k in want), name


def test_teamrl_eval_on_the_named_checkpoint(tmp_path, smollm2, capsys):
    code = cli_main(["eval", str(CONFIGS / "smollm2_math_team.yaml"), "rollout.max_new_tokens=6",
                     "train.threads=1", "--instances", "1"])
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) >= {"success", "reward/reasoner", "reward/tool"} and 0 <= metrics["success"] <= 1


def test_heterogeneous_pair_smollm2_and_gemma3(tmp_path, smollm2, gemma3):
    config = _config(tmp_path, "smollm2-135m-instruct", "regime=per_role", "run_name=hetero",
                     f"policies={{reasoner: {{model: smollm2-135m-instruct, lora: {{r: 2}}}}, "
                     f"tool: {{model: gemma-3-270m, lora: {{r: 2}}}}}}")
    run = train(config, progress=False)
    final = run / "checkpoints" / "final"
    bases = {name: json.loads((final / name / "adapter_config.json").read_text())["base_model_name_or_path"]
             for name in ("reasoner", "tool")}
    assert bases == {"reasoner": smollm2, "tool": gemma3}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    # each policy was updated on the tokens its own tokenizer sampled
    assert step["policy/reasoner/response_tokens"] > 0 and step["policy/tool/response_tokens"] > 0
    assert all(torch.isfinite(v).all() for name in ("reasoner", "tool") for v in _weights(final / name).values())
