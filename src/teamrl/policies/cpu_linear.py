"""Linear layers through oneDNN on CPU: the same fp32 arithmetic as `F.linear`, in about half the time here.

torch's CPU `F.linear` / `mm` in float32 goes to MKL's sgemm. On AMD CPUs with AVX-512 MKL does not use its
fastest code path: on the AMD EPYC host of the 2026-12-02 sessions a 1024-square fp32 matmul ran at ~100 GFLOP
per CPU second through MKL and at ~214 through oneDNN (`torch.ops.mkldnn._linear_pointwise`, the op torch's own
compiler emits for CPU linears), in fp32, no reduced-precision arithmetic (`benchmarks/cpu_linear.py`). One core
reaches 214 only with 512-bit FMAs, so that host ran AVX-512 (torch's CPU capability AVX512). On an AVX2-only
EPYC (Zen 3, the 2026-12-03 host) there is nothing for oneDNN to win: MKL ran at 88.5 and oneDNN at 72.9, and
the 135M update was 1.24x faster through MKL (`benchmarks/results/cpu_linear/amd-zen3-avx2/cpu_linear.txt`). `policy.cpu_linear:
auto` (`resolve_cpu_linear`) therefore takes oneDNN only where torch runs its AVX-512 kernels.

`OneDnnLinear` is an `nn.Linear` whose forward and backward run the three matmuls of a linear layer (the
output, the input's gradient, the weight's gradient) through oneDNN. Nothing else changes: the parameters,
state dict, `save_pretrained` and PEFT wrapping are those of an `nn.Linear`. It falls back to `F.linear`
whenever oneDNN does not apply: another device or dtype, autocast on (autocast decides the dtype there),
or a torch without the op. Results agree with `F.linear` to float32 rounding (another summation order;
tests/policies/test_cpu_linear.py), and are deterministic run to run like MKL's.

`use_onednn_linears(model)` turns a model's `nn.Linear` layers of 256 x 256 weights or more into `OneDnnLinear`
(class swap, in place); `load_model` does it for a CPU model unless `policy.cpu_linear: torch`.

`packed_linear` is the decode loop's variant (no gradients): the weight is read in oneDNN's own blocked layout,
made once per version of the weight and kept until the weight changes or a training forward passes through it.
At the 16-64 rows of a decode step the plain op re-blocks the weight on every call; with packed weights the
135M decode ran 1.25-1.38x faster (`benchmarks/experiments/decode_parts.py`), at the price of a second copy of the decoded
weights.

`sampler_arithmetic("bfloat16")` is the bf16 sampler's (`rollout.sampler_dtype`): autocast, with the decode
path's and `OneDnnLinear`'s matmuls reading a bf16 copy of the weight made once per weight version
(`sampler_weight`, kept like the packs), while the fp32 weights stay the trainer's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from contextvars import ContextVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from teamrl.config.options import CpuLinear, choices
from teamrl.policies.arithmetic_probe import host_probe


@functools.lru_cache(maxsize=1)
def onednn_available() -> bool:
    """Whether this torch has the oneDNN linear op and it reproduces F.linear on a small probe."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        op = torch.ops.mkldnn._linear_pointwise
        generator = torch.Generator().manual_seed(0)
        x, w = torch.randn(8, 16, generator=generator), torch.randn(4, 16, generator=generator)
        return bool(torch.allclose(op(x, w, None, "none", [], ""), F.linear(x, w), atol=1e-5, rtol=1e-5))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


CPU_LINEAR_SETTINGS = choices(CpuLinear)  # policy.cpu_linear's words


def onednn_pays_here() -> bool:
    """`cpu_linear: auto`'s rule: oneDNN where torch's CPU kernels are AVX-512 ones (there MKL keeps to AVX2 on AMD
    CPUs and oneDNN measured 2.14x faster; on Intel's AVX-512 parts both use it) and the op works. A fixed
    property of the host, not a timing, so runs stay reproducible on one machine."""
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512") and onednn_available()


def cpu_has_bf16_matmul() -> bool:
    """Whether this CPU multiplies bf16 in hardware (torch's oneDNN check: AVX-512 BW/VL/DQ, AVX-512-BF16/AMX, or
    Arm's bf16). Without it a bf16 matmul is emulated: on the AVX2-only EPYC a 135M update's forward + backward
    under `algorithm.autocast: bf16` took 11x as long as in fp32 (`setup/real_model_checks.py` warns)."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def resolve_cpu_linear(setting: CpuLinear, device: str | torch.device = "cpu") -> str:
    """The linear path a model on `device` gets for `setting` (auto, onednn, torch or measured): onednn or torch.

    auto is onednn on a CPU where `onednn_pays_here`, torch elsewhere; measured is the faster of the two as this
    host's cached arithmetic probe timed them (`policies/arithmetic_probe.py`); off the CPU every setting is torch."""
    if setting not in CPU_LINEAR_SETTINGS:
        raise ValueError(f"cpu_linear must be one of {', '.join(CPU_LINEAR_SETTINGS)}, got {setting!r}")
    if torch.device(device).type != "cpu":
        return "torch"
    if setting == "auto":
        return "onednn" if onednn_pays_here() else "torch"
    if setting == "measured":
        return host_probe().cpu_linear if onednn_available() else "torch"
    return setting


def _onednn_mm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, in] @ weight [out, in]^T (+ bias) through oneDNN; strided views need no copy."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDnnLinearFunction(torch.autograd.Function):
    """y = x W^T + b with the forward and both gradients' matmuls in oneDNN."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        # oneDNN takes strided views, but an odd layout (a broadcast or sliced gradient) sends it to a slow
        # path, up to 50x slower on the output head: rows are made contiguous first (a no-op when they are).
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        ctx.save_for_backward(flat, weight)
        ctx.input_shape, ctx.has_bias = x.shape, bias is not None
        return _onednn_mm(flat, weight, bias).reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        flat, weight = ctx.saved_tensors
        grad = grad.reshape(-1, grad.shape[-1]).contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:  # grad [M, out] @ W [out, in]: W^T [in, out] is oneDNN's "weight"
            grad_x = _onednn_mm(grad, weight.t()).reshape(ctx.input_shape)
        if ctx.needs_input_grad[1]:  # grad^T [out, M] @ x [M, in]
            grad_w = _onednn_mm(grad.t(), flat.t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


def onednn_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """True where `linear` takes the oneDNN path (CPU, float32 on both sides, autocast off, op present)."""
    return (
        x.device.type == "cpu"
        and weight.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.shape[-1] > 0
        and x.numel() > 0
        and not torch.is_autocast_enabled("cpu")
        and onednn_available()
    )


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, through oneDNN where `onednn_applies`."""
    if onednn_applies(x, weight):
        if weight.requires_grad and torch.is_grad_enabled():
            _packs.pop(weight, None)  # a training forward: the weight is about to change, its pack would go stale
            _bf16_copies.pop(weight, None)
        return _OneDnnLinearFunction.apply(x, weight, bias)
    if sampling_in_bf16(x, weight):
        return bf16_linear(x, weight, bias)
    return F.linear(x, weight, bias)


PACK_ROWS_HINT = 64
"""The row count oneDNN is told to expect when it lays a weight out (measured: any hint of 16-256 serves 8-300 rows
alike; 1 does not)."""

_packs: WeakIdKeyDictionary = WeakIdKeyDictionary()  # weight -> ((version, data_ptr), fingerprint, packed weight)


def _fingerprint(weight: torch.Tensor) -> torch.Tensor:
    """16 evenly spaced entries of the weight: a write that bypasses the version counter (through `.data`, as
    PEFT's merge does) changes them."""
    flat = weight.detach().reshape(-1)
    return flat[:: max(1, flat.numel() // 16)].clone()


def packed_weight(weight: torch.Tensor) -> torch.Tensor:
    """`weight` in oneDNN's blocked layout, made once per version of the weight (an optimizer step or a
    `load_state_dict` bumps the version; a new storage changes the data pointer) and kept while the weight lives.
    Writes through `.data` do not bump the version: `drop_stale_packs` catches those, once per decode call."""
    key = (weight._version, weight.data_ptr())
    cached = _packs.get(weight)
    if cached is not None and cached[0] == key:
        return cached[2]
    _packs.pop(weight, None)  # the stale pack goes before the new one is made: one copy at a time
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS_HINT)
    _packs[weight] = (key, _fingerprint(weight), packed)
    return packed


def drop_stale_packs(model: nn.Module) -> int:
    """Forget the packs and bf16 copies of `model`'s layers whose weights changed since they were made without a
    version bump; the number dropped. The decoder calls this once per call (~10 us a layer), not once per step."""
    dropped = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if not isinstance(module, nn.Linear) or not isinstance(weight, torch.Tensor):
            continue
        for store in (_packs, _bf16_copies):
            cached = store.get(weight)
            if cached is not None and not torch.equal(cached[1], _fingerprint(weight)):
                del store[weight]
                dropped += 1
    return dropped


_bf16_copies: WeakIdKeyDictionary = WeakIdKeyDictionary()  # weight -> ((version, data_ptr), fingerprint, bf16 copy)


def sampler_weight(weight: torch.Tensor) -> torch.Tensor:
    """`weight` rounded to bf16, made once per version of the weight like `packed_weight` (an optimizer step makes
    a new one: the sampler's copy follows the trainer's fp32 master weights, which stay as they are)."""
    key = (weight._version, weight.data_ptr())
    cached = _bf16_copies.get(weight)
    if cached is not None and cached[0] == key:
        return cached[2]
    _bf16_copies.pop(weight, None)
    copy = weight.detach().to(torch.bfloat16)
    _bf16_copies[weight] = (key, _fingerprint(weight), copy)
    return copy


def sampler_weight_version(weight: torch.Tensor) -> int | None:
    """The version of `weight` its bf16 copy was made from (None: no copy): equals `weight._version` when the
    copy is current."""
    cached = _bf16_copies.get(weight)
    return None if cached is None else cached[0][0]


@contextlib.contextmanager
def sampler_arithmetic(dtype: str, device: str | torch.device = "cpu") -> Iterator[None]:
    """Run the sampler's forward passes in `dtype` (float32 or bfloat16) on `device`.

    bfloat16 is torch's autocast, with one difference on the decode path: its linear layers read a bf16
    copy of their weight made once per weight version (`sampler_weight`), not a cast made at every step. Norms,
    softmax and the log-probs stay fp32 (autocast's rule); the log-probs are those of this bf16 model."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"sampler dtype must be float32 or bfloat16, got {dtype!r}")
    token = _sampling_bf16.set(dtype == "bfloat16")
    try:
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
            yield
    finally:
        _sampling_bf16.reset(token)


_sampling_bf16: ContextVar[bool] = ContextVar("sampling_bf16", default=False)
"""Set by `sampler_arithmetic("bfloat16")` only: the trainer's own bf16 autocast (`algorithm.autocast`) keeps
autocast's per-call casts and makes no copies."""


def sampling_in_bf16(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """True inside `sampler_arithmetic("bfloat16")` on the CPU for a call that records no gradients."""
    recording = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    return (
        _sampling_bf16.get()
        and not recording
        and x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )


def bf16_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight^T (+ bias) in bf16 from the weight's cached bf16 copy; the output is bf16, as autocast's."""
    return F.linear(x.to(torch.bfloat16), sampler_weight(weight), None if bias is None else bias.to(torch.bfloat16))


def packed_linear(x: torch.Tensor, module: nn.Linear) -> torch.Tensor:
    """`layer_linear(x, module)` for a call without gradients (decoding): a `OneDnnLinear` reads its packed weight
    (`packed_weight`); anything else, or a call that records gradients, is `layer_linear`."""
    weight = module.weight
    if sampling_in_bf16(x, weight):
        return bf16_linear(x, weight, module.bias)
    recording = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    if not isinstance(module, OneDnnLinear) or recording or not onednn_applies(x, weight):
        return layer_linear(x, module)
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    out = _onednn_mm(flat, packed_weight(weight), module.bias)
    return out.reshape(*x.shape[:-1], weight.shape[0])


def layer_linear(x: torch.Tensor, module: nn.Linear) -> torch.Tensor:
    """What `module` (an `nn.Linear` or `OneDnnLinear`) computes for x, without its hooks: oneDNN only for a layer
    that was turned, so `policy.cpu_linear: torch` keeps F.linear on every path."""
    if isinstance(module, OneDnnLinear):
        return linear(x, module.weight, module.bias)
    return F.linear(x, module.weight, module.bias)


class OneDnnLinear(nn.Linear):
    """An `nn.Linear` computed by `linear` (oneDNN on CPU in float32, `F.linear` otherwise)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def is_torch_linear(module: nn.Module) -> bool:
    """A plain `nn.Linear` or its oneDNN twin: a layer that is exactly x W^T + b (no subclass behaviour)."""
    return type(module) in (nn.Linear, OneDnnLinear)


def onednn_layer_count(models: list[nn.Module]) -> int:
    """How many linear layers of `models` (each model counted once) run on oneDNN: what `cpu_linear` resolved to."""
    unique = {id(model): model for model in models}.values()
    return sum(isinstance(module, OneDnnLinear) for model in unique for module in model.modules())


MIN_WEIGHTS = 256 * 256
"""Layers with fewer weights keep `F.linear`: oneDNN's fixed cost per call (~10 us) loses on tiny matmuls (the
tiny default's 128-wide layers, LoRA's rank-r factors), and the tiny default's arithmetic stays as it was."""


def use_onednn_linears(model: nn.Module, min_weights: int = MIN_WEIGHTS) -> int:
    """Turn each plain `nn.Linear` of `model` with >= `min_weights` weights into a `OneDnnLinear` in place.

    Returns the number turned: 0 without oneDNN, or where every layer is smaller.
    """
    if not onednn_available():
        return 0
    turned = 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.numel() >= min_weights:
            module.__class__ = OneDnnLinear
            turned += 1
    return turned
