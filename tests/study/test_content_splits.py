"""The study tasks' train / validation / test splits never share an instance's content."""

import pytest

from teamrl.tasks import content_splits
from teamrl.tasks.split_calc import SplitCalcConfig, split_instances
from teamrl.tasks.split_nav import SplitNavConfig, instance


def test_buckets_cover_every_split_with_the_stated_shares():
    names = [content_splits.content_split(("key", i)) for i in range(20_000)]
    shares = {name: names.count(name) / len(names) for name in content_splits.SPLITS}
    assert shares["train"] == pytest.approx(0.70, abs=0.02)
    assert shares["validation"] == pytest.approx(0.15, abs=0.02)
    assert shares["test"] == pytest.approx(0.15, abs=0.02)


def test_split_calc_splits_are_disjoint_and_cover_every_triple():
    config = SplitCalcConfig()
    parts = {name: set(split_instances(config, name)) for name in content_splits.SPLITS}
    assert not parts["train"] & parts["validation"]
    assert not parts["train"] & parts["test"]
    assert not parts["validation"] & parts["test"]
    assert sum(map(len, parts.values())) == 8 * 9 * 9


def test_split_nav_instances_of_different_splits_never_share_a_grid():
    config = SplitNavConfig()
    seen = {name: {instance(config, name, i) for i in range(150)} for name in content_splits.SPLITS}
    assert not seen["train"] & seen["validation"]
    assert not seen["train"] & seen["test"]
    assert not seen["validation"] & seen["test"]


def test_heldout_means_the_configured_split():
    validation = SplitNavConfig(heldout_split="validation")
    test = SplitNavConfig(heldout_split="test")
    assert instance(validation, "heldout", 3) == instance(validation, "validation", 3)
    assert instance(test, "heldout", 3) == instance(test, "test", 3)
    assert instance(test, "heldout", 3) != instance(validation, "heldout", 3)


def test_bad_split_names_fail_with_the_fix():
    with pytest.raises(ValueError, match="use validation .* or test"):
        SplitNavConfig(heldout_split="train")
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        content_splits.resolve_split("dev", "validation")


def test_split_calc_refuses_an_evaluation_larger_than_its_split():
    config = SplitCalcConfig()
    size = len(split_instances(config, "validation"))
    from teamrl.tasks.split_calc import instance as calc_instance

    calc_instance(config, "validation", size - 1)
    with pytest.raises(ValueError, match=f"validation split has {size} instances"):
        calc_instance(config, "validation", size)
    assert calc_instance(config, "train", 10_000) in split_instances(config, "train")  # training cycles
