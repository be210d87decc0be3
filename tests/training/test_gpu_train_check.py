"""benchmarks/gpu/train_check.py: argument checks, a clear stop without CUDA, and its --dry-run on CPU."""

import json
import math

import pytest
import torch



@pytest.fixture(scope="module")
def train_check():
    from benchmarks.gpu import train_check as module
    return module


@pytest.mark.parametrize("argv", [["--k", "1"], ["--steps", "1"], ["--prompt-len", "0"], ["--variants", "zero3"]])
def test_bad_arguments_are_refused(train_check, argv):
    with pytest.raises(SystemExit):
        train_check.parse_args(argv)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the stop on a machine without CUDA")
def test_without_cuda_it_stops_at_once_and_points_to_the_dry_run(train_check, tmp_path):
    with pytest.raises(SystemExit, match="--dry-run"):
        train_check.main(["--out", str(tmp_path / "never.json")])
    assert not (tmp_path / "never.json").exists()


def test_real_shape_is_a_1_5b_qwen2_with_the_real_vocabulary(train_check):
    from transformers import Qwen2Config

    shape = train_check.REAL_MODEL
    config = Qwen2Config(**shape, tie_word_embeddings=True)
    layer = (4 * config.hidden_size ** 2 * (1 + config.num_key_value_heads / config.num_attention_heads) / 2
             + 3 * config.hidden_size * config.intermediate_size)
    params = config.vocab_size * config.hidden_size + config.num_hidden_layers * layer
    assert shape["vocab_size"] == 151936 and 1.4e9 < params < 1.7e9


def test_dry_run_runs_every_variant_on_cpu_and_writes_the_results(train_check, tmp_path):
    out = tmp_path / "results.json"
    train_check.main(["--dry-run", "--steps", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["dry_run"] and report["settings"]["prompt_len"] == 16
    by_name = {r["variant"]: r for r in report["results"]}
    assert set(by_name) == set(train_check.VARIANTS)
    for result in by_name.values():
        assert "error" not in result, result
        assert result["tokens_per_s"] > 0 and result["step_s"] > 0 and len(result["losses"]) == 4
        assert all(math.isfinite(loss) for loss in result["losses"])
    # Sharding a group of one and recomputing MLPs change no number; bf16 compute changes them a little.
    for name in ("ckpt", "fsdp", "fsdp_ckpt"):
        assert by_name[name]["losses"] == pytest.approx(by_name["plain"]["losses"], rel=1e-5, abs=1e-6), name
    assert by_name["fsdp_bf16"]["losses"] == pytest.approx(by_name["plain"]["losses"], rel=0.05, abs=0.05)
