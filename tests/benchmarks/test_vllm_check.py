"""benchmarks/gpu/vllm_check.py without a GPU: it stops at once, with status 2 and the reason."""

from __future__ import annotations

import pytest
import torch

from benchmarks.gpu import vllm_check


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU: the check would run")
def test_without_cuda_it_fails_fast_and_says_why(tmp_path, capsys):
    out = tmp_path / "never.txt"
    assert vllm_check.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU" in err and "--dry-run" in err
    assert not out.exists()


def test_an_unknown_size_is_refused():
    with pytest.raises(SystemExit):
        vllm_check.main(["--sizes", "7b"])
