"""Can the decode read fewer weight bytes on this CPU? One 16-row decode step's matmuls at SmolLM2-135M's shapes in
fp32 against the narrower weight formats torch offers on a CPU, side by side.

    python -m benchmarks run experiments.narrow_weights --out benchmarks/results/narrow_weights/amd-zen3-avx2/narrow_weights.txt

A 16-row decode step reads every weight of the model to make 16 tokens, so it is bound by memory: a format with
fewer bytes per weight could only help if its product runs at least as fast per weight as fp32's. Compared, one
torch thread, CPU seconds, `--rounds` alternating rounds, random weights of the model's 30 layers' shapes (q, k, v,
o, gate, up, down) and its output head (49,152 x 576), a fresh [16, in] input per shape:
- fp32: `F.linear` (MKL, what `policy.cpu_linear: auto` uses on a CPU without AVX-512);
- bf16: `F.linear` with bf16 input and weight (what a bf16 weight copy for sampling would run);
- int8: `torch._weight_int8pack_mm`, int8 weights with one fp32 scale per output row (weight-only quantisation).
Each format's error: the largest |difference| from fp32 over the largest |fp32 output|, per shape, the worst shape.
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import torch
import torch.nn.functional as F

from benchmarks.harness import Lines, add_out_argument, spread

LAYERS = 30
SHAPES = {"q": (576, 576), "k": (192, 576), "v": (192, 576), "o": (576, 576), "gate": (1536, 576),
          "up": (1536, 576), "down": (576, 1536), "head": (49152, 576)}
ROWS = 16


def int8_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-row int8 quantisation: (int8 weight, fp32 scale per row)."""
    scale = weight.abs().amax(1).clamp_min(1e-12) / 127
    return torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def formats(weight: torch.Tensor) -> dict[str, object]:
    """The weight in each format, as its product reads it."""
    return {"fp32": weight, "bf16": weight.bfloat16(), "int8": int8_rows(weight)}


def product(name: str, x: torch.Tensor, weight) -> torch.Tensor:
    if name == "fp32":
        return F.linear(x, weight)
    if name == "bf16":
        return F.linear(x.bfloat16(), weight).float()
    return torch._weight_int8pack_mm(x, *weight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    add_out_argument(parser, "narrow_weights")
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    out = Lines.started()
    out(f"# 1 thread, CPU s, {args.rounds} rounds; torch's CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"bf16 units (oneDNN's check): {bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())}")
    weights = {shape: [formats(torch.randn(*dims, generator=generator) * 0.02)
                       for _ in range(1 if shape == "head" else LAYERS)] for shape, dims in SHAPES.items()}
    inputs = {shape: torch.randn(ROWS, dims[1], generator=generator) for shape, dims in SHAPES.items()}
    errors = {name: 0.0 for name in ("fp32", "bf16", "int8")}
    for shape, layer_weights in weights.items():
        reference = product("fp32", inputs[shape], layer_weights[0]["fp32"])
        for name in errors:
            got = product(name, inputs[shape], layer_weights[0][name])
            errors[name] = max(errors[name], float((got - reference).abs().max() / reference.abs().max()))
    times: dict[str, list[float]] = {name: [] for name in errors}
    for _ in range(args.rounds):
        for name in times:
            started = time.process_time()
            for shape, layer_weights in weights.items():
                for layer in layer_weights:
                    product(name, inputs[shape], layer[name])
            times[name].append(time.process_time() - started)
    base = median(times["fp32"])
    for name, seconds in times.items():
        out(f"{name}: one {ROWS}-row decode step's matmuls {spread(seconds, '6.3f')} s, fp32 / this "
            f"{base / median(seconds):.2f}x, worst relative error {errors[name]:.4f}")
    out.finish(args.out)


if __name__ == "__main__":
    main()
