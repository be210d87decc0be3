"""Streamed text on real tokenizers: characters split over byte-level tokens (SmolLM2) or byte-fallback
pieces (Gemma 3) are sent whole, and the deltas join to the decoded answer."""

import pytest
from transformers import AutoTokenizer

from teamrl.gateway.streaming import StreamText, without_stop

TEXT = "Café au lait, 世界 and 🎉🎉 — naïve ÅΩ≈ «quotes» END trailing"


@pytest.mark.parametrize("checkpoint", ["smollm2", "gemma3"])
def test_deltas_of_real_tokens_join_to_the_answer(checkpoint, request):
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(checkpoint))
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    stops = ["END"]
    text = StreamText(lambda i: tokenizer.decode(i, skip_special_tokens=True), set(), stops,
                      hold_space=bool(getattr(tokenizer, "clean_up_tokenization_spaces", False)))
    sent = [d for d in (text.add([i]) for i in ids) if d]
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    answer = without_stop(decoded[: decoded.index("END") + 3], stops)
    assert all("\ufffd" not in d and "END" not in d for d in sent)
    assert len(sent) > 5 and "".join(sent) + text.finish(answer) == answer
    assert answer.startswith("Café au lait, 世界 and 🎉🎉")
