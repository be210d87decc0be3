"""The second tiny base (Qwen2 over byte-level BPE) and its warm-up with role-weighted demos."""

import itertools
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from teamrl.policies.loading import load_policy
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.policies.tiny_variants import build_bpe_tokenizer, build_tiny_qwen2
from teamrl.setup.variant_warmup import VariantRecipe, heldout_demos, warm_up_variant, weighted_demos

TEXTS = ["analyst\nop:twice sum\nf>2*(x+y)", "calc\nx=12 y=3\nf:2*(x+y)\n=>2*(12+3)", "=>120"] * 40


def test_variant_round_trips_through_save_pretrained_and_auto_classes(tmp_path):
    tokenizer = build_bpe_tokenizer(TEXTS, vocab_size=300)
    model = build_tiny_qwen2(tokenizer, hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded_tok = AutoTokenizer.from_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(loaded).__name__ == "Qwen2ForCausalLM"
    # Numbers (Qwen2 splits digits, so a merge such as "12" must not survive the reload), a formula, and a
    # character outside the corpus.
    text = "calc\nx=12 y=3\nf:x*y+x\n=>120é?"
    ids = loaded_tok(text, add_special_tokens=False)["input_ids"]
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert loaded_tok.decode(ids) == text
    # Multi-character tokens: fewer ids than the char-level default gives the same prompt.
    assert any(len(loaded_tok.convert_tokens_to_string([t])) > 1 for t in loaded_tok.convert_ids_to_tokens(ids))
    assert len(ids) < len(build_char_tokenizer()(text, add_special_tokens=False)["input_ids"])
    assert (loaded_tok.pad_token, loaded_tok.eos_token) == ("<pad>", "<eos>")
    batch = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(model.eval()(batch).logits, loaded.eval()(batch).logits)
    policy = load_policy("b", str(tmp_path))
    assert not policy.use_chat_template and policy.stop_token_ids() == [loaded_tok.eos_token_id]


def test_bad_sizes_fail_with_the_minimum():
    with pytest.raises(ValueError, match="at least 259"):
        build_bpe_tokenizer(TEXTS, vocab_size=100)
    with pytest.raises(ValueError, match="num_kv_heads"):
        build_tiny_qwen2(build_bpe_tokenizer(TEXTS), num_heads=4, num_kv_heads=3)


def test_demos_follow_the_role_weights():
    recipe = VariantRecipe(role_weights=(("analyst", 1), ("calculator", 3)))
    demos = list(itertools.islice(weighted_demos(recipe, 0, dict(recipe.role_weights)), 8))
    assert [p.split("\n")[0] for p, _ in demos] == ["analyst", "calc", "calc", "calc"] * 2
    held = heldout_demos(VariantRecipe(heldout_demos=6))
    assert [p.split("\n")[0] for p, _ in held] == ["analyst", "calc"] * 3  # held-out: equal shares


def test_recipe_errors_and_digest():
    with pytest.raises(ValueError, match="not agents of the team"):
        next(weighted_demos(VariantRecipe(), 0, {"planner": 1}))
    with pytest.raises(ValueError, match="set skill=()"):
        VariantRecipe(task=(("name", "plan_path"),))
    with pytest.raises(ValueError, match="weight > 0"):
        VariantRecipe(role_weights=(("analyst", 0),))
    base = VariantRecipe()
    assert base.digest() == VariantRecipe().digest()
    assert base.digest() != VariantRecipe(role_weights=(("analyst", 1), ("calculator", 1))).digest()
    assert base.digest() != VariantRecipe(seed=1).digest()


def test_warm_up_trains_once_then_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path))
    recipe = VariantRecipe(steps=2, batch_size=4, tokenizer_demos=50, heldout_demos=4, hidden_size=32,
                           num_layers=1)
    folder = warm_up_variant(recipe, verbose=False)
    assert folder.name == f"tiny-qwen2-{recipe.digest()}" and folder.parent == tmp_path
    record = json.loads((folder / "warmup.json").read_text())
    assert record["recipe"]["steps"] == 2 and len(record["heldout_loss"]) == 1
    stamp = (folder / "warmup.json").stat().st_mtime_ns
    assert warm_up_variant(recipe, verbose=False) == folder
    assert (folder / "warmup.json").stat().st_mtime_ns == stamp  # not trained again
    assert type(AutoModelForCausalLM.from_pretrained(folder)).__name__ == "Qwen2ForCausalLM"
