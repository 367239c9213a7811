"""An independent plan checker: is a set of offsets a valid plan for a problem?

It shares no code with the allocators (only the plain :class:`Problem` type) so that a bug in their
conflict logic cannot hide itself. It checks, and names each failure kind:

- ``shape``: one offset per block;
- ``negative``: every offset is at least 0;
- ``misaligned``: every offset is a multiple of the alignment;
- ``companions``: the blocks of a companion group share one offset;
- ``overlap``: blocks that conflict (overlapping half-open intervals, or an explicit pair) occupy
  disjoint byte ranges ``[offset, offset + padded size)``; size-0 blocks occupy nothing;
- ``peak``: the claimed peak is the end of the highest block.

Interval conflicts are enumerated after a sort by start: the blocks that overlap block ``i`` and start
after it form one contiguous run, so all overlapping pairs come out in vectorised chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxalloc.allocators.problem import Allocation, Problem

_CHUNK = 2_000_000


@dataclass(frozen=True)
class Violation:
    """One reason a plan is invalid."""

    kind: str
    blocks: tuple[int, ...]
    message: str


class InvalidPlanError(AssertionError):
    """A plan breaks a constraint of its problem (an allocator bug, never a user error)."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        shown = "; ".join(v.message for v in violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        super().__init__(f"invalid plan: {shown}{more}")


def find_violations(problem: Problem, offsets, peak: int | None = None, limit: int = 100) -> list[Violation]:
    """Every way (up to ``limit`` per kind) in which ``offsets`` is not a valid plan of ``problem``."""
    offsets = np.asarray(offsets)
    n = len(problem.sizes)
    if offsets.shape != (n,):
        return [Violation("shape", (), f"{offsets.shape} offsets for {n} blocks")]
    if n and not np.issubdtype(offsets.dtype, np.integer):
        return [Violation("shape", (), f"offsets must be integers, not {offsets.dtype}")]
    offsets = offsets.astype(np.int64)
    align = int(problem.alignment)
    sizes = np.asarray(problem.sizes, np.int64)
    reserved = (sizes + align - 1) // align * align
    found: list[Violation] = []
    for i in np.flatnonzero(offsets < 0)[:limit]:
        found.append(Violation("negative", (int(i),), f"block {i} has offset {offsets[i]} < 0"))
    for i in np.flatnonzero(offsets % align != 0)[:limit]:
        found.append(Violation("misaligned", (int(i),), f"block {i} offset {offsets[i]} is not a multiple of {align}"))
    for group in problem.companions:
        values = {int(offsets[i]) for i in group}
        if len(values) > 1:
            found.append(Violation("companions", tuple(group), f"companions {tuple(group)} have offsets {sorted(values)}"))
    found.extend(_overlaps(problem, offsets, reserved, limit))
    if peak is not None:
        top = int((offsets + reserved).max()) if n else 0
        if int(peak) != top:
            found.append(Violation("peak", (), f"claimed peak {peak} but the highest block ends at {top}"))
    return found


def _overlaps(problem: Problem, offsets: np.ndarray, reserved: np.ndarray, limit: int) -> list[Violation]:
    found: list[Violation] = []
    for i, j in _conflicting_pairs(problem, reserved):
        clash = (offsets[i] < offsets[j] + reserved[j]) & (offsets[j] < offsets[i] + reserved[i])
        for a, b in zip(i[clash][: limit - len(found)], j[clash][: limit - len(found)]):
            found.append(
                Violation(
                    "overlap",
                    (int(a), int(b)),
                    f"conflicting blocks {a} [{offsets[a]}, {offsets[a] + reserved[a]}) and "
                    f"{b} [{offsets[b]}, {offsets[b] + reserved[b]}) overlap in memory",
                )
            )
        if len(found) >= limit:
            break
    return found


def _conflicting_pairs(problem: Problem, reserved: np.ndarray):
    """Yields chunks ``(i, j)`` of conflicting block pairs with memory, each pair at least once."""
    occupied = reserved > 0
    pairs = np.asarray(problem.pairs, np.int64).reshape(-1, 2)
    if len(pairs):
        pairs = pairs[occupied[pairs[:, 0]] & occupied[pairs[:, 1]]]
        yield pairs[:, 0], pairs[:, 1]
    if problem.starts is None:
        return
    ids = np.flatnonzero(occupied)
    starts = np.asarray(problem.starts, np.int64)[ids]
    ends = np.asarray(problem.ends, np.int64)[ids]
    order = np.argsort(starts, kind="stable")
    ids, starts, ends = ids[order], starts[order], ends[order]
    stop = np.searchsorted(starts, ends, side="left")
    count = stop - np.arange(len(ids)) - 1
    row = 0
    while row < len(ids):
        total = np.cumsum(count[row:])
        last = row + max(1, int(np.searchsorted(total, _CHUNK, side="right")))
        rows = np.arange(row, last)
        counts = count[rows]
        first = np.repeat(rows, counts)
        step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        yield ids[first], ids[first + 1 + step]
        row = last


def check_plan(problem: Problem, offsets, peak: int | None = None) -> None:
    """Raises :class:`InvalidPlanError` naming the violations if ``offsets`` is not a valid plan."""
    found = find_violations(problem, offsets, peak)
    if found:
        raise InvalidPlanError(found)


def check_allocation(problem: Problem, allocation: Allocation) -> None:
    """Checks an allocator's answer, its peak included."""
    check_plan(problem, allocation.offsets, allocation.peak)
