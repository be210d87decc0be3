"""policies/cpu_linear.py: linear layers through oneDNN give F.linear's values and gradients (to fp32 rounding),
fall back where oneDNN does not apply, and leave the model itself (parameters, state dict, saving, PEFT) alone."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from teamrl.config import ConfigError, LoraConfig, PolicyConfig
from teamrl.policies.cpu_linear import (MIN_WEIGHTS, OneDnnLinear, _packs, drop_stale_packs, is_torch_linear, linear,
                                        onednn_available, packed_linear, packed_weight,
                                        onednn_applies, onednn_layer_count, resolve_cpu_linear,
                                        use_onednn_linears)
from teamrl.policies.loading import load_model
from teamrl.policies.lora import attach_adapters
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.lora_rows import RowAdapters, lora_unsupported, project

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch build has no oneDNN linear op")


def wide_model(seed: int = 0) -> nn.Module:
    """A tiny-family Llama whose layers are wide enough (256) to be turned; random weights."""
    torch.manual_seed(seed)
    return build_tiny_model(build_char_tokenizer(), hidden_size=256, num_layers=2, num_heads=4,
                            intermediate_size=512).eval()


def grads_of(fn, x, w, b):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    out = fn(x, w, b)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return out.detach(), x.grad, w.grad, b.grad


@needs_onednn
@pytest.mark.parametrize("shape", [(3, 5, 300), (7, 300), (1, 300)])
def test_values_and_gradients_match_f_linear(shape):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=generator)
    w, b = torch.randn(400, 300, generator=generator) / 17, torch.randn(400, generator=generator)
    assert onednn_applies(x, w)
    mine, ref = grads_of(linear, x, w, b), grads_of(F.linear, x, w, b)
    for got, want in zip(mine, ref):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


@needs_onednn
def test_a_transposed_input_and_a_frozen_weight():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(300, 6, generator=generator).t()  # [6, 300], not contiguous
    w = torch.randn(400, 300, generator=generator)
    x.requires_grad_()
    linear(x, w).sum().backward()  # w needs no gradient: only the input's is computed
    expected = torch.ones(6, 400) @ w
    torch.testing.assert_close(x.grad, expected, rtol=1e-5, atol=1e-4)


def test_falls_back_to_f_linear_where_onednn_does_not_apply():
    generator = torch.Generator().manual_seed(2)
    x, w = torch.randn(4, 64, generator=generator), torch.randn(32, 64, generator=generator)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not onednn_applies(x, w)
        assert torch.equal(linear(x, w), F.linear(x, w))  # autocast's bf16 result, bit for bit
        assert linear(x, w).dtype == torch.bfloat16
    xb, wb = x.bfloat16(), w.bfloat16()
    assert not onednn_applies(xb, wb)
    assert torch.equal(linear(xb, wb), F.linear(xb, wb))
    empty = torch.zeros(0, 64)
    assert linear(empty, w).shape == (0, 32)


@needs_onednn
def test_swap_turns_wide_layers_and_keeps_the_model_itself(tmp_path):
    model, twin = wide_model(), wide_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    turned = use_onednn_linears(model)
    wide = [m for m in twin.modules() if type(m) is nn.Linear and m.weight.numel() >= MIN_WEIGHTS]
    assert turned == len(wide) > 0
    assert all(is_torch_linear(m) for m in model.modules() if isinstance(m, nn.Linear))
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    ids = torch.tensor([[5, 9, 11, 3, 7, 2]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, twin(ids).logits, rtol=1e-4, atol=1e-4)
    copied = copy.deepcopy(model)  # the trainer deep-copies a frozen reference
    assert sum(isinstance(m, OneDnnLinear) for m in copied.modules()) == turned
    model.save_pretrained(tmp_path / "saved")
    reloaded = load_model("p", str(tmp_path / "saved"), cpu_linear="torch")
    assert not any(isinstance(m, OneDnnLinear) for m in reloaded.modules())
    assert all(torch.equal(reloaded.state_dict()[k], v) for k, v in before.items())
    assert sum(isinstance(m, OneDnnLinear) for m in load_model("p", str(tmp_path / "saved"), cpu_linear="onednn"
                                                               ).modules()) == turned


@needs_onednn
@pytest.mark.parametrize("capability, expected", [("AVX512", "onednn"), ("AVX2", "torch"), ("DEFAULT", "torch")])
def test_auto_takes_onednn_only_where_torch_runs_avx512_kernels(tmp_path, monkeypatch, capability, expected):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    assert resolve_cpu_linear("auto") == expected
    assert resolve_cpu_linear("onednn") == "onednn" and resolve_cpu_linear("torch") == "torch"
    assert resolve_cpu_linear("auto", "cuda:0") == resolve_cpu_linear("onednn", "meta") == "torch"
    wide_model().save_pretrained(tmp_path / "saved")
    loaded = load_model("p", str(tmp_path / "saved"))  # the default setting is auto
    assert any(isinstance(m, OneDnnLinear) for m in loaded.modules()) == (expected == "onednn")


@needs_onednn
def test_the_layer_count_counts_a_shared_model_once():
    model, plain = wide_model(), wide_model()
    turned = use_onednn_linears(model)
    assert onednn_layer_count([model, model, plain]) == turned > 0
    assert onednn_layer_count([plain]) == 0


def test_resolving_an_unknown_setting_names_the_choices():
    with pytest.raises(ValueError, match="auto, onednn, torch.*'mkl'"):
        resolve_cpu_linear("mkl")


def test_the_tiny_default_keeps_f_linear():
    model = build_tiny_model(build_char_tokenizer())  # 128-wide layers: under MIN_WEIGHTS
    assert use_onednn_linears(model) == 0
    assert not any(isinstance(m, OneDnnLinear) for m in model.modules())


@needs_onednn
def test_peft_wraps_a_turned_layer_and_the_lean_projection_takes_it():
    model = wide_model()
    use_onednn_linears(model)
    network = attach_adapters(model, {"role": LoraConfig(r=4, alpha=8, target_modules=["q_proj", "down_proj"])})
    layer = network.base_model.model.model.layers[0]
    q = layer.self_attn.q_proj
    assert isinstance(q.base_layer, OneDnnLinear)
    assert lora_unsupported(q, ["role"]) is None and lora_unsupported(layer.self_attn.k_proj, ["role"]) is None
    with torch.no_grad():
        q.lora_B["role"].weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(3))
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(4))
    network.set_adapter("role")
    with torch.no_grad():
        torch.testing.assert_close(project(x, q, RowAdapters.blocks(["role"], [5])), q(x), rtol=1e-5, atol=1e-5)
    ids = torch.tensor([[5, 9, 11, 3, 7, 2]])
    network.train()
    network(ids).logits.sum().backward()
    assert q.lora_B["role"].weight.grad is not None and q.lora_B["role"].weight.grad.abs().sum() > 0
    assert q.base_layer.weight.grad is None  # frozen base: no gradient computed for it


def test_an_unknown_setting_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="auto, onednn, torch or measured"):
        PolicyConfig(cpu_linear="mkl")


@needs_onednn
def test_the_lean_projection_keeps_f_linear_on_a_layer_left_as_torch(monkeypatch):
    model, turned = wide_model(), wide_model()
    use_onednn_linears(turned)
    called = []
    monkeypatch.setattr("teamrl.policies.cpu_linear._onednn_mm", lambda *a: called.append(1) or F.linear(*a[:2]))
    x = torch.randn(3, 256)
    rows = RowAdapters.blocks([None], [3])
    plain = model.model.layers[0].self_attn.q_proj
    assert torch.equal(project(x, plain, rows), F.linear(x, plain.weight, plain.bias)) and not called
    project(x, turned.model.layers[0].self_attn.q_proj, rows)
    assert called  # the turned layer went through oneDNN


@needs_onednn
def test_the_packed_weight_gives_f_linears_values_and_follows_every_change_of_the_weight():
    layer = wide_model().model.layers[0].mlp.up_proj
    use_onednn_linears(layer)
    assert isinstance(layer, OneDnnLinear)
    x = torch.randn(17, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(packed_linear(x, layer), F.linear(x, layer.weight), rtol=1e-5, atol=1e-5)
        first = packed_weight(layer.weight)
        assert packed_weight(layer.weight) is first  # unchanged weight: packed once
        layer.weight.add_(1.0)  # an optimizer step: in place, the version moves
        torch.testing.assert_close(packed_linear(x, layer), F.linear(x, layer.weight), rtol=1e-5, atol=1e-5)
    layer.weight.data.mul_(-1)  # through .data: no version bump; the decoder's once-per-call check sees it
    assert drop_stale_packs(layer) == 1
    with torch.no_grad():
        torch.testing.assert_close(packed_linear(x, layer), F.linear(x, layer.weight), rtol=1e-5, atol=1e-5)
    assert drop_stale_packs(layer) == 0
    layer(x.requires_grad_()).sum().backward()  # a training forward frees the pack (its weight is about to change)
    assert layer.weight not in _packs
    out = packed_linear(x, layer)  # recording gradients: the plain path, differentiable
    assert out.requires_grad and layer.weight not in _packs


@needs_onednn
def test_decoding_after_a_write_through_data_uses_the_new_weights():
    from teamrl.rollout.lean_decode import LeanDecoder

    model = wide_model()
    use_onednn_linears(model)
    ids = torch.tensor([[5, 9, 11, 3, 7, 2]])
    mask = torch.ones_like(ids)
    positions = torch.arange(6)[None]
    with torch.no_grad():
        LeanDecoder(model, ids, mask, positions, 1, 2).step(torch.tensor([4]))  # packs every layer
        for module in model.modules():
            if isinstance(module, OneDnnLinear):
                module.weight.data.mul_(0.5)  # as PEFT's merge writes
        got = LeanDecoder(model, ids, mask, positions, 1, 2).step(torch.tensor([4]))
        want = model(torch.cat([ids, torch.tensor([[4]])], 1)).logits[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
