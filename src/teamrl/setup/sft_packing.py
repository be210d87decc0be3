"""Packed supervised batches: several (prompt, response) demos per row, no compute on padding.

A row holds whole demos one after another; each demo's position ids restart at 0, which is how
transformers recognises packed sequences (`attention_mask=None` + position ids that restart): it
builds a block-diagonal causal mask, so no token attends across a demo boundary and a packed row
scores every demo exactly as if it were alone (tested against demos scored one by one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel


@dataclass
class PackedRows:
    """Demos packed into rows of equal width; the loss is on response tokens (EOS included) only."""

    input_ids: torch.Tensor  # [B, L] demo tokens back to back, pad at the row's end
    position_ids: torch.Tensor  # [B, L] restart at 0 at every demo (and at the padding)
    targets: torch.Tensor  # [B, L] the token each position predicts (the next one), pad elsewhere
    loss_mask: torch.Tensor  # [B, L] 1.0 where the position predicts a response token
    demos: int  # how many demos the rows hold


def pack_rows(sequences: list[tuple[list[int], list[int]]], row_tokens: int, pad_id: int) -> PackedRows:
    """Pack (prompt ids, response ids) pairs into rows of `row_tokens` tokens, first fit by length.

    A demo longer than `row_tokens` is refused (it would be cut, and the cut changes its loss).
    """
    if not sequences:
        raise ValueError("pack_rows needs at least one (prompt, response) pair")
    if row_tokens < 2:
        raise ValueError(f"row_tokens must be >= 2, got {row_tokens}")
    rows: list[list[int]] = []  # demo indices per row
    room: list[int] = []
    # First fit, longest first: few rows, and little padding left at their ends.
    for i in sorted(range(len(sequences)), key=lambda j: -sum(map(len, sequences[j]))):
        prompt, response = sequences[i]
        length = len(prompt) + len(response)
        if not response:
            raise ValueError(f"demo {i} has an empty response: nothing to learn from it")
        if length > row_tokens:
            raise ValueError(
                f"demo {i} has {length} tokens, more than a row's {row_tokens}: "
                "raise row_tokens (the warm-up recipe's pack_tokens)"
            )
        slot = next((r for r, free in enumerate(room) if free >= length), None)
        if slot is None:
            rows.append([])
            room.append(row_tokens)
            slot = len(rows) - 1
        rows[slot].append(i)
        room[slot] -= length
    ids = torch.full((len(rows), row_tokens), pad_id, dtype=torch.long)
    positions = torch.zeros_like(ids)
    targets = torch.full_like(ids, pad_id)
    loss_mask = torch.zeros((len(rows), row_tokens), dtype=torch.float32)
    for r, members in enumerate(rows):
        col = 0
        for i in members:
            prompt, response = sequences[i]
            seq = prompt + response
            n = len(seq)
            ids[r, col : col + n] = torch.tensor(seq)
            positions[r, col : col + n] = torch.arange(n)
            # position t predicts token t+1: the response tokens are predicted from the last prompt
            # token up to the second-to-last response token.
            start = col + len(prompt) - 1
            targets[r, start : start + len(response)] = torch.tensor(response)
            loss_mask[r, start : start + len(response)] = 1.0
            col += n
        # The padding is one more "sequence" (positions from 0), so it never joins the last demo.
        positions[r, col:] = torch.arange(row_tokens - col)
    return PackedRows(ids, positions, targets, loss_mask, len(sequences))


def packed_nll(model: PreTrainedModel, rows: PackedRows) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed response NLL of the packed rows and the number of response tokens it sums over.

    Logits are computed only where a response token is predicted: the LM head runs on [N, H], not
    on [B, L, H].
    """
    device = next(model.parameters()).device
    hidden = model.get_decoder()(
        input_ids=rows.input_ids.to(device),
        position_ids=rows.position_ids.to(device),
        attention_mask=None,
        use_cache=False,
    ).last_hidden_state  # [B, L, H]
    where = rows.loss_mask.to(device).bool()
    logits = model.get_output_embeddings()(hidden[where]).float()  # [N, V]
    nll = torch.nn.functional.cross_entropy(logits, rows.targets.to(device)[where], reduction="sum")
    return nll, where.sum()
