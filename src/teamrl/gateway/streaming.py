"""Streamed text: what part of a response may be sent while its tokens are still being drawn.

The rule: send only text that is certain to begin the final answer's content, so that the streamed
deltas join to exactly the content a request without `stream` gets. Three things can still change the
end of the text decoded so far, and are held back until the next tokens settle them:

- an incomplete UTF-8 character: a byte-level tokenizer splits one character over several tokens, and
  the text of the first ones ends in U+FFFD (held until the character is whole);
- a stop string being written: the content ends before the first stop string (as in OpenAI's API), so a
  suffix that is the start of a stop string waits, and nothing from a completed stop string on is sent;
- a trailing space, for a tokenizer that cleans up spaces when decoding (" ." becomes "."): the next
  token may remove it.

The text is decoded whole at each update (the answers of a team are at most a few hundred tokens; one
decode of them costs microseconds next to a decode step), so a tokenizer whose decode of a prefix is not
a prefix of the whole, beyond these three cases, is caught: nothing is sent until the texts agree again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future

from teamrl.policies.loading import Policy

log = logging.getLogger("teamrl.gateway")


def without_stop(text: str, stops: Sequence[str]) -> str:
    """The content of a sampled text: the text without the stop string it ends with (the longest, when
    several stop strings end it). A sampled text ends at its first stop string (`builtin_engine`).

    >>> without_stop("2+2=4\\nEND", ["END"])
    '2+2=4\\n'
    >>> without_stop("x ab", ["b", "ab"]), without_stop("no stop", ["END"])
    ('x ', 'no stop')
    """
    ends = [len(s) for s in stops if s and text.endswith(s)]
    return text[: len(text) - max(ends)] if ends else text


def stop_hold(text: str, stops: Sequence[str]) -> int:
    """How much of `text` may be sent with respect to `stops`: up to the first stop string in it, and
    short of a final suffix that a later token could extend into a stop string.

    >>> stop_hold("abc ST", ["STOP"]), stop_hold("abc STOP de", ["STOP"]), stop_hold("abc", ["STOP"])
    (4, 4, 3)
    """
    found = [text.find(s) for s in stops if s in text]
    if found:
        return min(found)
    for start in range(max(0, len(text) - max((len(s) for s in stops), default=0) + 1), len(text)):
        if any(s.startswith(text[start:]) for s in stops):
            return start  # the longest such suffix: the first start that matches
    return len(text)


class StreamText:
    """One response's streamed text: `add` its tokens as they are drawn, send what it returns; `finish` with
    the final content returns the rest."""

    def __init__(
        self,
        decode: Callable[[list[int]], str],
        stop_ids: set[int],
        stops: Sequence[str] = (),
        hold_space: bool = False,
    ) -> None:
        self.decode, self.stop_ids, self.stops, self.hold_space = decode, stop_ids, tuple(stops), hold_space
        self.ids: list[int] = []
        self.sent = ""
        self.ended = False  # a stop token was drawn: the response is complete

    @classmethod
    def of(cls, policy: Policy, stops: Sequence[str]) -> StreamText:
        """The streamed text of a response of `policy`, decoded as the engine decodes its Generations."""
        tokenizer = policy.tokenizer
        return cls(
            lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
            set(policy.stop_token_ids()),
            stops,
            hold_space=bool(getattr(tokenizer, "clean_up_tokenization_spaces", False)),
        )

    def add(self, tokens: Sequence[int]) -> str:
        """The text that may be sent now after `tokens` (possibly empty)."""
        for token in tokens:
            if self.ended:
                break
            if token in self.stop_ids:  # the final stop token is trained, not decoded
                self.ended = True
            else:
                self.ids.append(token)
        text = self.decode(self.ids)
        safe = text.rstrip("\ufffd")
        if self.hold_space:
            safe = safe.rstrip()
        if self.stops:
            safe = safe[: stop_hold(safe, self.stops)]
        if not safe.startswith(self.sent):  # a decode that changed earlier text: wait until it agrees again
            return ""
        delta, self.sent = safe[len(self.sent) :], safe
        return delta

    def finish(self, content: str) -> str:
        """The rest of the final `content` after what was sent."""
        if not content.startswith(self.sent):  # the hold-back rules above make this unreachable
            log.error("gateway: streamed text %r is not a prefix of the answer %r", self.sent, content)
        return content[len(self.sent) :]


class TokenFeed:
    """Tokens drawn on the sampling thread, read on the request's event loop: `put` is the worker's
    per-token callback (`SamplingWorker.submit(on_token=...)`); `deltas` yields the text to send."""

    def __init__(self, text: StreamText) -> None:
        self.text = text
        self._loop = asyncio.get_running_loop()
        self._drawn: asyncio.Queue[int] = asyncio.Queue()

    def put(self, token: int) -> None:
        """On the sampling thread: hand the token to the request's loop."""
        self._loop.call_soon_threadsafe(self._drawn.put_nowait, token)

    async def deltas(self, future: Future) -> AsyncIterator[str]:
        """The text deltas while `future` (the request's Generation) is not done; the rest of the answer
        is then sent from the Generation (`StreamText.finish`), so tokens still queued need not be read."""
        waiting = asyncio.wrap_future(future)
        while not waiting.done():
            next_token = asyncio.ensure_future(self._drawn.get())
            await asyncio.wait({next_token, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not next_token.done():
                next_token.cancel()
                return
            tokens = [next_token.result()]
            while not self._drawn.empty():  # what arrived meanwhile goes out as one delta
                tokens.append(self._drawn.get_nowait())
            delta = self.text.add(tokens)
            if delta:
                yield delta
