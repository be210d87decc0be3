"""training/freed_memory.py: with glibc, memory a step frees is reused by the next without page faults."""

import platform
import resource

import pytest
import torch

from teamrl.config import ConfigError, TrainConfig
from teamrl.config.building import build_dataclass
from teamrl.training.freed_memory import keep_freed_memory


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_freed_large_tensor_is_reused_without_page_faults():
    if not keep_freed_memory():
        pytest.skip(f"no glibc mallopt here ({platform.system()}, {platform.libc_ver()[0] or 'unknown libc'})")
    elements = 16 << 20  # 64 MiB: above glibc's largest automatic mmap threshold (32 MiB), so mmapped by default
    faults = []
    for _ in range(6):  # the heap settles after a round or two (small allocations split a freed block once)
        before = minor_faults()
        tensor = torch.empty(elements)
        tensor.fill_(1.0)  # touch every page
        faults.append(minor_faults() - before)
        del tensor
    assert max(faults[3:]) < 1_000, f"page faults per 64 MiB tensor (16k pages): {faults}; freed memory not reused"


def test_the_setting_is_on_by_default_and_a_boolean():
    assert TrainConfig().keep_freed_memory is True
    assert build_dataclass(TrainConfig, {"keep_freed_memory": False}, "train.").keep_freed_memory is False
    with pytest.raises(ConfigError, match="train.keep_freed_memory"):
        build_dataclass(TrainConfig, {"keep_freed_memory": "sometimes"}, "train.")
