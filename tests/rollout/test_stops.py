"""The stop-string table: which tokens can complete a stop string (a superset, never a miss)."""

import torch

from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.rollout.stops import StopScanner, may_complete_table


def test_table_marks_the_tokens_that_add_a_stop_strings_last_character():
    tok = build_char_tokenizer()
    table = may_complete_table(tok, ["ab", "\n\n"], len(tok) + 3)  # 3 ids beyond the tokenizer
    marked = {tok.convert_ids_to_tokens(v) for v in range(len(tok)) if table[v]}
    assert marked == {"b", "\n"}
    assert not table[tok.pad_token_id] and not table[tok.eos_token_id]  # special: add no text
    assert table[len(tok):].all()  # unknown ids: possible


def test_scanner_decodes_only_candidate_rows_and_finds_the_stop():
    tok = build_char_tokenizer()
    scanner = StopScanner.of(tok, ["ab"], len(tok))
    assert StopScanner.of(tok, ["ab"], len(tok)).table is scanner.table  # cached per tokenizer
    rows = [tok.convert_tokens_to_ids(list(text)) for text in ("xab", "xbb", "aaa")]
    tokens = torch.tensor(rows)
    chosen = tokens[:, 2]
    done = scanner.completed(tokens, torch.arange(3), chosen, step=2)
    assert done.tolist() == [True, False, False]


def test_a_new_stop_set_reads_no_vocabulary_and_tables_are_bounded(monkeypatch):
    """A gateway client may send new stop strings with every request: after the first table per tokenizer
    each costs an index lookup (no decode of the vocabulary), and at most TABLES_PER_TOKENIZER are kept."""
    from teamrl.rollout import stops

    tok = build_char_tokenizer()
    decoded = []
    original = type(tok).batch_decode
    monkeypatch.setattr(type(tok), "batch_decode", lambda self, *a, **k: decoded.append(1) or original(self, *a, **k))
    StopScanner.of(tok, ["ab"], len(tok))
    first = len(decoded)
    characters = sorted({c for c in (tok.convert_ids_to_tokens(v) for v in range(len(tok))) if len(c) == 1})
    for i in range(100):
        stop = characters[i % len(characters)] * (1 + i // len(characters))
        table = StopScanner.of(tok, [stop], len(tok)).table
        assert {tok.convert_ids_to_tokens(v) for v in range(len(tok)) if table[v] and v not in tok.all_special_ids} \
            == {stop[-1]}
    assert len(decoded) == first  # the vocabulary was decoded for the first table only
    assert len(stops._TABLES[tok]) == stops.TABLES_PER_TOKENIZER < 100
