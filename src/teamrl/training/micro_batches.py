"""How the update lays a loss part out for the model: by length (little padding), within a token budget.

A part's samples are padded to the longest prompt and the longest response of each forward pass,
and the padded positions cost as much compute as real ones. Sorting by length and cutting the
sorted list into runs ("buckets") makes each forward's rows about equally long. More buckets
mean less padding but more forward calls, each with a fixed cost (framework glue, kernel launch),
so the cut points minimise

    sum over buckets of (rows x longest length in the bucket) + call_cost x (number of buckets)

exactly, by dynamic programming over the sorted lengths (`length_buckets`).

The update cuts each part twice: into micro-batches of whole prompt groups by prompt length, each
holding at most `token_budget` real tokens (prompt once plus its responses; each micro-batch is
backpropagated on its own, so activation memory is bounded by the budget), and inside
`shared_prefix_logprobs` each micro-batch's responses into buckets by response length, all
reading the one encoding of their prompts.
"""

from __future__ import annotations

from dataclasses import dataclass


def length_buckets(
    lengths: list[int], call_cost: float, sizes: list[int] | None = None, budget: int = 0
) -> list[list[int]]:
    """Indices of `lengths` cut into buckets of similar length at the least padded-cells + calls cost.

    A bucket is a run of the lengths sorted ascending; its cost is its row count times its
    largest length, plus `call_cost`. With `budget` > 0 a bucket's `sizes` (default: the lengths)
    may sum to at most `budget`, except that an item larger than the budget forms a bucket alone.
    Buckets come out shortest first; the order inside a bucket is ascending length, ties in input order.

    >>> length_buckets([5, 1, 5, 2], call_cost=0.0)
    [[1], [3], [0, 2]]
    >>> length_buckets([10, 1, 1, 1], call_cost=5.0)  # 3 x 1 + 5 + 1 x 10 + 5 = 23 < 4 x 10 + 5
    [[1, 2, 3], [0]]
    >>> length_buckets([5, 1, 5, 2], call_cost=100.0)
    [[1, 3, 0, 2]]
    """
    if call_cost < 0:
        raise ValueError(f"call_cost must be >= 0, got {call_cost}")
    if sizes is not None and len(sizes) != len(lengths):
        raise ValueError(f"need one size per length, got {len(sizes)} sizes for {len(lengths)} lengths")
    if not lengths:
        return []
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    size_of = [lengths[i] if sizes is None else sizes[i] for i in order]
    sorted_lengths = [lengths[i] for i in order]
    n = len(order)
    # best[j]: least cost of the first j sorted items; cut[j]: where the last bucket of that starts.
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        width, total = sorted_lengths[j - 1], 0
        for i in range(j, 0, -1):  # the last bucket is sorted items i-1 .. j-1
            total += size_of[i - 1]
            if budget > 0 and total > budget and i < j:
                break
            # Without a budget, a cut between equal lengths never pays: skip those starts.
            if budget <= 0 and i > 1 and sorted_lengths[i - 2] == sorted_lengths[i - 1]:
                continue
            cost = best[i - 1] + (j - i + 1) * width + call_cost
            if cost < best[j]:
                best[j], cut[j] = cost, i - 1
    buckets, end = [], n
    while end > 0:
        start = cut[end]
        buckets.append(order[start:end])
        end = start
    return buckets[::-1]


@dataclass
class PromptGroup:
    """Samples (by position in their part) that share one prompt, laid out together."""

    prompt_len: int
    members: list[int]  # positions in the part
    tokens: int  # real tokens: the prompt once plus every member's response


def prompt_groups(prompts: list[tuple[int, ...]], response_lens: list[int], token_budget: int = 0) -> list[PromptGroup]:
    """Samples grouped by prompt; a group over `token_budget` is split into runs of similar response length.

    Each run carries the prompt again (it is encoded once per micro-batch that holds it).
    """
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for position, prompt in enumerate(prompts):
        by_prompt.setdefault(prompt, []).append(position)
    groups = []
    for prompt, members in by_prompt.items():
        p = len(prompt)
        if token_budget <= 0 or p + sum(response_lens[m] for m in members) <= token_budget:
            groups.append(PromptGroup(p, members, p + sum(response_lens[m] for m in members)))
            continue
        run: list[int] = []
        tokens = p
        for m in sorted(members, key=lambda m: response_lens[m]):
            if run and tokens + response_lens[m] > token_budget:
                groups.append(PromptGroup(p, run, tokens))
                run, tokens = [], p
            run.append(m)
            tokens += response_lens[m]
        groups.append(PromptGroup(p, run, tokens))
    return groups


def plan_micro_batches(
    prompts: list[tuple[int, ...]], response_lens: list[int], token_budget: int, call_cost: float | None
) -> list[list[int]]:
    """A part's samples (by position) cut into micro-batches: prompt groups bucketed by prompt length.

    token_budget: at most this many real tokens per micro-batch (0 = no limit); a single prompt
    with a response that is longer on its own forms a micro-batch alone. call_cost: the padded
    positions one more forward call is worth (None = no length bucketing: one micro-batch, or the
    fewest that fit the budget in first-appearance order).
    """
    if len(prompts) != len(response_lens):
        raise ValueError(f"need one response length per prompt, got {len(response_lens)} for {len(prompts)}")
    groups = prompt_groups(prompts, response_lens, token_budget)
    if call_cost is None:
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for group in groups:
            if current and token_budget > 0 and tokens + group.tokens > token_budget:
                batches.append(current)
                current, tokens = [], 0
            current.extend(group.members)
            tokens += group.tokens
        return batches + [current] if current else batches
    buckets = length_buckets([g.prompt_len for g in groups], call_cost, [g.tokens for g in groups], token_budget)
    return [[m for g in bucket for m in groups[g].members] for bucket in buckets]


def padded_cells(prompt_lens: list[int], response_lens: list[int]) -> int:
    """Positions a [G, P_max] prompt forward plus an [N, T_max] response forward compute."""
    if not prompt_lens or not response_lens:
        return 0
    return len(prompt_lens) * max(prompt_lens) + len(response_lens) * max(max(response_lens), 1)


def layout_cells(
    prompts: list[tuple[int, ...]], response_lens: list[int], token_budget: int, call_cost: float | None
) -> tuple[int, int, int]:
    """(computed positions, real positions, forward calls) of one part as the update lays it out.

    Real positions count each distinct prompt once per micro-batch that holds it, plus the responses.
    """
    computed = real = calls = 0
    for rows in plan_micro_batches(prompts, response_lens, token_budget, call_cost):
        distinct = list(dict.fromkeys(prompts[i] for i in rows))
        lens = [response_lens[i] for i in rows]
        computed += len(distinct) * max(len(p) for p in distinct)
        real += sum(len(p) for p in distinct) + sum(lens)
        buckets = [list(range(len(rows)))] if call_cost is None else length_buckets(lens, call_cost)
        computed += sum(len(b) * max(max(lens[i] for i in b), 1) for b in buckets)
        calls += 1 + len(buckets)
    return computed, real, calls
