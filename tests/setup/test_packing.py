"""Packed SFT rows: the layout by hand, and a packed row scores each demo exactly as alone."""

from __future__ import annotations

import pytest
import torch

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.setup.sft_packing import pack_rows, packed_nll
from teamrl.setup.sft import demo_loss, encode_demos

PAD = 0
# Three hand-made demos (prompt ids, response ids): 3+2, 2+1 and 4+3 tokens.
DEMOS = [([5, 6, 7], [8, 9]), ([10, 11], [12]), ([13, 14, 15, 16], [17, 18, 19])]


@pytest.fixture(scope="module")
def model():
    tok = build_char_tokenizer()
    return build_tiny_model(tok, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=3).eval()


def test_layout_by_hand():
    rows = pack_rows(DEMOS, 8, PAD)
    # Longest first, first fit: row 0 = demo 2 (7 tokens) + 1 pad; row 1 = demo 0 (5) + demo 1 (3).
    assert rows.input_ids.tolist() == [[13, 14, 15, 16, 17, 18, 19, PAD], [5, 6, 7, 8, 9, 10, 11, 12]]
    assert rows.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 0], [0, 1, 2, 3, 4, 0, 1, 2]]
    # The last prompt token predicts the first response token; the last response token predicts nothing.
    assert rows.loss_mask.tolist() == [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 0, 0, 1, 0]]
    assert rows.targets.tolist() == [[PAD, PAD, PAD, 17, 18, 19, PAD, PAD], [PAD, PAD, 8, 9, PAD, PAD, 12, PAD]]
    assert rows.demos == 3


def alone_nll(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """Summed response NLL of one demo in its own forward pass (no padding, no neighbours)."""
    logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1: -1], dim=-1)
    return -logp.gather(-1, torch.tensor(response)[:, None]).sum()


@torch.no_grad()
def test_a_packed_row_scores_each_demo_as_if_alone(model):
    rows = pack_rows(DEMOS, 15, PAD)  # all three (7 + 5 + 3 tokens) in one full row
    assert rows.input_ids.shape == (1, 15)
    nll, count = packed_nll(model, rows)
    expected = sum(alone_nll(model, p, r) for p, r in DEMOS)
    assert count.item() == 6
    torch.testing.assert_close(nll, expected, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_check_sees_demos_attending_across_a_boundary(model):
    """Without the position restarts the demos of a row see each other: the loss must differ."""
    rows = pack_rows(DEMOS, 15, PAD)
    rows.position_ids = torch.arange(15)[None]
    nll, _ = packed_nll(model, rows)
    expected = sum(alone_nll(model, p, r) for p, r in DEMOS)
    assert abs(nll.item() - expected.item()) > 1e-3


@torch.no_grad()
def test_packed_and_padded_layouts_give_the_same_mean_loss(model):
    tok = build_char_tokenizer()
    policy = Policy("t", model, tok, use_chat_template=False)
    encoded = encode_demos(policy, [("tool\n#.G\n>", "print(1)"), ("plan\n>", "RRD"), ("q:2+3\n>", "5")])
    torch.testing.assert_close(demo_loss(policy, encoded, 64), demo_loss(policy, encoded, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sequences, width, needle", [
    ([], 8, "at least one"),
    (DEMOS, 1, "row_tokens must be >= 2"),
    ([([1, 2], [])], 8, "empty response"),
    ([([1] * 6, [2, 3, 4])], 8, "9 tokens, more than a row's 8: raise row_tokens"),
])
def test_bad_input_says_what_to_fix(sequences, width, needle):
    with pytest.raises(ValueError, match=needle):
        pack_rows(sequences, width, PAD)
