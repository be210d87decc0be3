"""The warm-up recipe: its cache key, its batches, its schedule, early stop and the ETA bar."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from tqdm import tqdm

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.setup import recipe_digest, sft
from teamrl.setup.sft import SFTSettings, supervised_finetune
from teamrl.setup.tiny_default import (BAR_FORMAT, WarmupRecipe, demo_batches, heldout_demos,
                                          progress_bar)

TASK = {"name": "plan_path", "size": 4, "min_distance": 2}


def other_value(value):
    """A different value of the same type (for a recipe field)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return "voting" if value != "voting" else "team"
    return (("name", "math"),)


def test_every_recipe_field_changes_the_cache_key():
    recipe = WarmupRecipe.for_task(TASK, 2)
    for f in dataclasses.fields(recipe):
        changed = dataclasses.replace(recipe, **{f.name: other_value(getattr(recipe, f.name))})
        assert changed.digest() != recipe.digest(), f"changing {f.name} kept the cache key"


@pytest.mark.parametrize("module", ["teamrl.setup.sft", "teamrl.setup.sft_packing"])
def test_editing_the_training_code_changes_the_cache_key(monkeypatch, module):
    recipe = WarmupRecipe.for_task(TASK, 2)
    before = recipe.digest()
    real = recipe_digest.inspect.getsource
    monkeypatch.setattr(recipe_digest.inspect, "getsource",
                        lambda obj: real(obj) + ("\n# edited" if getattr(obj, "__name__", "") == module else ""))
    assert recipe.digest() != before


def test_packed_batches_mix_every_prompt_kind_and_padded_ones_keep_one():
    padded = WarmupRecipe.for_task(TASK, 2, batch_size=6, pack_tokens=0)
    packed = dataclasses.replace(padded, pack_tokens=256)
    for batch in itertools.islice(demo_batches(padded), 3):
        assert len(batch) == 6 and len({p.split("\n", 1)[0] for p, _ in batch}) == 1
    batch = next(demo_batches(packed))
    # Plan-Path's kinds: the team's tool and plan agents, then the single plan agent (also "plan").
    assert [p.split("\n", 1)[0] for p, _ in batch] == ["tool", "plan", "plan"] * 2


def test_heldout_demos_are_not_training_demos():
    recipe = WarmupRecipe.for_task(TASK, 2, batch_size=32, heldout_demos=48)
    held = heldout_demos(recipe)
    assert len(held) == 48
    seen = {demo for batch in itertools.islice(demo_batches(recipe), 30) for demo in batch}
    # Tool prompts of a 4x4 grid repeat across instances: compare the demos of the plan agents.
    assert not {d for d in held if d[0].startswith("plan")} & seen


def test_a_demo_prompt_is_text_and_chat_messages_are_refused():
    assert sft.demo_prompt("Q: 1+2\n") == "Q: 1+2\n"
    with pytest.raises(ValueError, match="rendered chat messages; set workflow.prompt_style=compact"):
        sft.demo_prompt([{"role": "user", "content": "1+2"}])


def test_the_schedule_by_hand():
    s = SFTSettings(steps=10, lr=1.0, warmup_steps=4)
    assert s.lr_factor(0) == pytest.approx(0.25 * 0.5 * (1 + math.cos(0)))
    assert s.lr_factor(3) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.3)))
    assert s.lr_factor(9) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.9)))
    assert SFTSettings(steps=10, warmup_steps=0).lr_factor(0) == 1.0


@pytest.mark.parametrize("kwargs, needle", [
    ({"steps": 0}, "steps must be >= 1"),
    ({"steps": 5, "lr": 0.0}, "lr must be > 0"),
    ({"steps": 5, "pack_tokens": 1}, "pack_tokens must be 0 or >= 2"),
    ({"steps": 5, "patience": 2}, "patience needs eval_every > 0"),
])
def test_bad_settings_say_what_to_fix(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        SFTSettings(**kwargs)


def tiny_policy() -> Policy:
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    return Policy("t", model, tok, use_chat_template=False)


def test_early_stop_after_patience_scores_without_a_new_best(monkeypatch):
    scores = iter([3.0, 2.0, 2.5, 2.1, 1.0, 0.5])  # best at the 2nd score, then two without a new best
    monkeypatch.setattr(sft, "heldout_loss", lambda policy, demos: next(scores))
    batches = itertools.repeat([("a>", "b"), ("c>", "dd")])
    result = supervised_finetune(tiny_policy(), batches, SFTSettings(steps=20, eval_every=2, patience=2),
                                 heldout=[("a>", "b")])
    assert result.stopped_early
    assert len(result.losses) == 8  # scores after steps 2, 4, 6, 8: stop at 8
    assert result.heldout == [(2, 3.0), (4, 2.0), (6, 2.5), (8, 2.1), (8, 1.0)]  # and the final score


def test_without_patience_every_step_runs():
    result = supervised_finetune(tiny_policy(), itertools.repeat([("a>", "b")]),
                                 SFTSettings(steps=3, pack_tokens=16), heldout=[("a>", "b")])
    assert len(result.losses) == 3 and not result.stopped_early and [s for s, _ in result.heldout] == [3]


def test_the_bar_shows_the_time_left_from_the_mean_step():
    # 3 of 12 steps in 30 s: 9 steps left at 10 s each.
    text = tqdm.format_meter(3, 12, 30.0, bar_format=BAR_FORMAT, prefix="warm-up", postfix="loss 1.234")
    assert "3/12 steps" in text and "00:30 elapsed" in text and "ETA 01:30" in text and "loss 1.234" in text


def test_the_warm_up_bar_prints_its_eta(capsys):
    bar = progress_bar(4, verbose=True)
    bar.update(1)
    bar.refresh()
    bar.close()
    err = capsys.readouterr().err
    assert "warm-up:" in err and "1/4 steps" in err and "ETA " in err
    quiet = progress_bar(4, verbose=False)
    quiet.update(1)
    quiet.close()
    assert capsys.readouterr().err == ""


def test_the_benchmark_builds_the_first_recipe_and_a_candidate():
    from benchmarks import warmup_time as bench

    candidate = bench.parse_sets(["steps=120", "lr=4e-3", "pack_tokens=256", "bf16=true"])
    assert candidate == {"steps": 120, "lr": 0.004, "pack_tokens": 256, "bf16": True}
    pair = bench.recipes("math_team", 1, scale=0.1, candidate=candidate)
    assert list(pair) == ["first", "candidate"]
    first, new = pair["first"], pair["candidate"]
    assert (first.steps, first.batch_size, first.lr, first.pack_tokens, first.bf16) == (50, 64, 2e-3, 0, False)
    assert (new.steps, new.lr, new.pack_tokens, new.bf16, new.seed) == (12, 4e-3, 256, True, 1)
    assert first.task == new.task == (("name", "math"), ("source", "arithmetic:2,3"))
    with pytest.raises(SystemExit, match="KEY one of"):
        bench.parse_sets(["task=math"])
