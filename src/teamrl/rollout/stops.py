"""Spotting, during decoding, the rows whose text has just completed a stop string.

The check only ends a row early (the engine's `_collect` finds the exact cut on the whole response),
but it runs at every step, and decoding every live row's tail costs a tokenizer call per row per
step. Most tokens cannot complete a stop string: a stop string ends with its last character, so the
token that completes it must add that character to the text. A table over the vocabulary says which
tokens can; only rows that sampled one are decoded. The vocabulary's text is decoded once per tokenizer
and indexed by character, so a new set of stop strings (a gateway client may send any) costs a lookup,
not a pass over the vocabulary, and the tables kept per tokenizer are bounded.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence

import torch

TABLES_PER_TOKENIZER = 64
"""Stop-string tables kept per tokenizer (least recently used dropped): each is one bool per token."""

_VOCABS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {vocab_size: _VocabText}
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> LRU {(stops, vocab): table}


class _VocabText:
    """What each token adds to a text, indexed by character: read once per (tokenizer, vocabulary size).

    Decoding the whole vocabulary is the expensive part of a table (about a second for a 49k vocabulary);
    with this index a table for any stop strings is a union of the tokens holding their last characters.
    """

    def __init__(self, tokenizer, vocab_size: int) -> None:
        known = min(len(tokenizer), vocab_size)
        alone = tokenizer.batch_decode([[v] for v in range(known)], skip_special_tokens=True)
        anchor_ids = tokenizer("a", add_special_tokens=False)["input_ids"][-1:]
        anchor = tokenizer.decode(anchor_ids, skip_special_tokens=True)
        after = tokenizer.batch_decode([anchor_ids + [v] for v in range(known)], skip_special_tokens=True)
        special = set(tokenizer.all_special_ids)
        self.unclear = torch.ones(vocab_size, dtype=torch.bool)  # [V] may add any character
        holding: dict[str, list[int]] = {}
        for v in range(known):
            added = after[v].removeprefix(anchor)
            text = alone[v] + added
            if v in special:
                self.unclear[v] = False  # skipped when decoding: adds no text
            elif text and "\ufffd" not in text:
                self.unclear[v] = False
                for c in set(text):
                    holding.setdefault(c, []).append(v)
        self.holding = {c: torch.tensor(ids, dtype=torch.long) for c, ids in holding.items()}

    def table(self, characters: set[str]) -> torch.Tensor:
        table = self.unclear.clone()
        for c in characters:
            if c in self.holding:
                table[self.holding[c]] = True
        return table


def may_complete_table(tokenizer, stops: Sequence[str], vocab_size: int) -> torch.Tensor:
    """[V] bool: token v may complete one of `stops` (adds a stop's last character to the text).

    Conservative where a token's text is unclear: a token that decodes to nothing, to a replacement
    character (a piece of a multi-byte character), or that lies beyond the tokenizer's vocabulary.
    A token's text is read alone and after an ordinary token (SentencePiece drops a leading space
    at the start of a text, not after another token). The vocabulary's text is read once per tokenizer;
    later tables cost an index lookup per stop string.
    """
    vocabs = _VOCABS.setdefault(tokenizer, {})
    if vocab_size not in vocabs:
        vocabs[vocab_size] = _VocabText(tokenizer, vocab_size)
    return vocabs[vocab_size].table({s[-1] for s in stops})


class StopScanner:
    """Per decode step: which rows' responses now contain a stop string (early exit only)."""

    def __init__(self, tokenizer, stops: Sequence[str], table: torch.Tensor) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.table = table  # [V] bool, see may_complete_table
        # a stop string of L characters spans at most L tokens (+1 for a leading space some tokenizers drop)
        self.span = max(len(s) for s in self.stops) + 2

    @classmethod
    def of(cls, tokenizer, stops: Sequence[str], vocab_size: int) -> StopScanner:
        """The scanner of `stops`, its table cached per tokenizer (the TABLES_PER_TOKENIZER latest used)."""
        tables: OrderedDict = _TABLES.setdefault(tokenizer, OrderedDict())
        key = (tuple(stops), vocab_size)
        if key in tables:
            tables.move_to_end(key)
        else:
            tables[key] = may_complete_table(tokenizer, stops, vocab_size)
            while len(tables) > TABLES_PER_TOKENIZER:
                tables.popitem(last=False)
        return cls(tokenizer, stops, tables[key])

    def completed(self, tokens: torch.Tensor, rows: torch.Tensor, chosen: torch.Tensor, step: int) -> torch.Tensor:
        """[n] bool: row rows[j] of tokens [N, T], which just sampled chosen[j] at `step`, holds a stop."""
        done = torch.zeros(len(chosen), dtype=torch.bool, device=chosen.device)
        if self.table.device != chosen.device:  # once per call's device, not per step
            self.table = self.table.to(chosen.device)
        candidates = self.table[chosen].nonzero().squeeze(-1).tolist()
        if not candidates:
            return done
        start = max(0, step + 1 - self.span)
        tails = tokens[rows[candidates], start : step + 1].tolist()
        for j, tail in zip(candidates, tails):
            text = self.tokenizer.decode(tail, skip_special_tokens=True)
            done[j] = any(s in text for s in self.stops)
        return done
