"""Sudoku grids as flat lists: rows, columns, boxes and peers of a cell, and a backtracking search.

Pure functions on flat grids (0 = blank) of size 4 (2x2 boxes) or 9 (3x3 boxes), shared by the
puzzle generator and the environment in `teamrl.tasks.sudoku`.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Sequence

BOX = {4: 2, 9: 3}
"""Box side per grid size."""


@lru_cache(maxsize=None)
def units(size: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Row, column and box number of every flat cell index."""
    box = BOX[size]
    rows = tuple(i // size for i in range(size * size))
    cols = tuple(i % size for i in range(size * size))
    boxes = tuple((r // box) * box + c // box for r, c in zip(rows, cols))
    return rows, cols, boxes


@lru_cache(maxsize=None)
def peers(size: int) -> tuple[tuple[int, ...], ...]:
    """For every cell, the other cells sharing its row, column or box."""
    rows, cols, boxes = units(size)
    return tuple(
        tuple(
            j
            for j in range(size * size)
            if j != i and (rows[i] == rows[j] or cols[i] == cols[j] or boxes[i] == boxes[j])
        )
        for i in range(size * size)
    )


def search(
    grid: Sequence[int], size: int, limit: int = 2, rng: random.Random | None = None
) -> tuple[int, list[int] | None]:
    """Count the completions of a flat grid (0 = blank), stopping at `limit`.

    Returns (count, first completion found). Picks the blank with the fewest candidates first;
    with `rng` the candidate digits are tried in random order (used to draw full grids).
    A grid whose givens already clash has 0 completions.
    """
    rows_of, cols_of, boxes_of = units(size)
    full = (1 << size) - 1  # bit d-1 stands for digit d
    row_mask, col_mask, box_mask = [0] * size, [0] * size, [0] * size
    work = list(grid)
    for i, v in enumerate(work):
        if v:
            bit = 1 << (v - 1)
            r, c, b = rows_of[i], cols_of[i], boxes_of[i]
            if (row_mask[r] | col_mask[c] | box_mask[b]) & bit:
                return 0, None
            row_mask[r] |= bit
            col_mask[c] |= bit
            box_mask[b] |= bit
    blanks = [i for i, v in enumerate(work) if not v]
    count = 0
    first: list[int] | None = None

    def recurse() -> None:
        nonlocal count, first
        best, best_mask, best_n = -1, 0, size + 1
        for i in blanks:
            if work[i]:
                continue
            mask = full & ~(row_mask[rows_of[i]] | col_mask[cols_of[i]] | box_mask[boxes_of[i]])
            n = mask.bit_count()
            if n < best_n:
                best, best_mask, best_n = i, mask, n
                if n <= 1:
                    break
        if best < 0:
            count += 1
            if first is None:
                first = list(work)
            return
        digits = [d for d in range(size) if best_mask >> d & 1]
        if rng is not None:
            rng.shuffle(digits)
        r, c, b = rows_of[best], cols_of[best], boxes_of[best]
        for d in digits:
            bit = 1 << d
            work[best] = d + 1
            row_mask[r] |= bit
            col_mask[c] |= bit
            box_mask[b] |= bit
            recurse()
            work[best] = 0
            row_mask[r] &= ~bit
            col_mask[c] &= ~bit
            box_mask[b] &= ~bit
            if count >= limit:
                return

    recurse()
    return count, first


def other_solution_exists(puzzle: list[int], cell: int, answer: int, size: int) -> bool:
    """Whether blanking `cell` of a uniquely solvable puzzle lets another digit complete it.

    The puzzle before blanking had one solution, so a second one must differ at `cell`: trying
    each other digit there is cheaper than counting solutions from scratch.
    """
    neighbours = peers(size)[cell]
    for digit in range(1, size + 1):
        if digit == answer or any(puzzle[p] == digit for p in neighbours):
            continue
        puzzle[cell] = digit
        found = search(puzzle, size, limit=1)[0] > 0
        puzzle[cell] = 0
        if found:
            return True
    return False
