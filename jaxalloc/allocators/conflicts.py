"""Conflict queries shared by the allocators: which blocks may not share memory, vectorised.

A block conflicts with another when their half-open intervals overlap or when they form an explicit
pair. Size-0 blocks take no memory and conflict with nothing. Companion groups become *units*: the
blocks of a unit are placed together at one offset, so the allocators place units, not blocks.

Problems without intervals get a stand-in schedule for the algorithms that need an order (block ``i``
lives on ``[i, i + 1)``); it orders blocks but creates no conflicts.
"""

from __future__ import annotations

import numpy as np

from jaxalloc.allocators.intervals import IntervalIndex
from jaxalloc.allocators.problem import Problem

NEVER = np.int64(-(2**62))
FOREVER = np.int64(2**62)


class Conflicts:
    """The conflict relation of one problem, with vectorised queries against all blocks."""

    def __init__(self, problem: Problem) -> None:
        n = problem.n
        self.n = n
        self.sizes = problem.padded_sizes
        self.live = self.sizes > 0
        self.timed = problem.has_intervals
        if self.timed:
            self.starts = problem.starts
            self.ends = problem.ends
        else:
            self.starts = np.arange(n, dtype=np.int64)
            self.ends = self.starts + 1
        self.steps = int(self.ends.max() - self.starts.min()) if n else 1
        pairs = problem.pairs
        keep = self.live[pairs[:, 0]] & self.live[pairs[:, 1]] if len(pairs) else np.zeros(0, bool)
        pairs = pairs[keep]
        self.has_pairs = len(pairs) > 0
        both = np.concatenate([pairs, pairs[:, ::-1]]) if len(pairs) else np.zeros((0, 2), np.int64)
        both = both[np.lexsort((both[:, 1], both[:, 0]))]
        self._ptr = np.searchsorted(both[:, 0], np.arange(n + 1)) if n else np.zeros(1, np.int64)
        self._partners = both[:, 1].copy()
        self._pair_codes = np.unique(both[:, 0] * max(n, 1) + both[:, 1])
        if self.timed and len(pairs):
            overlap = self._overlaps(pairs[:, 0], pairs[:, 1])
            self._untimed_pairs = pairs[~overlap]
        else:
            self._untimed_pairs = pairs
        self._index: IntervalIndex | None = None

    def _overlaps(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return (self.starts[i] < self.ends[j]) & (self.starts[j] < self.ends[i])

    def partners(self, i: int) -> np.ndarray:
        """The blocks that form an explicit pair with block ``i``."""
        return self._partners[self._ptr[i] : self._ptr[i + 1]]

    def untimed_partners(self, i: int) -> np.ndarray:
        """The explicit partners of block ``i`` whose intervals do not overlap its own: the conflicts
        that counting interval overlaps misses."""
        found = self.partners(i)
        if not self.timed:
            return found
        return found[(self.starts[found] >= self.ends[i]) | (self.ends[found] <= self.starts[i])]

    def mask(self, i: int) -> np.ndarray:
        """Boolean mask of the blocks that conflict with block ``i`` (never ``i`` itself)."""
        if self.timed:
            out = (self.starts < self.ends[i]) & (self.ends > self.starts[i]) & self.live
        else:
            out = np.zeros(self.n, bool)
        out[self.partners(i)] = True
        out[i] = False
        if not self.live[i]:
            out[:] = False
        return out

    def conflicting(self, blocks) -> np.ndarray:
        """The blocks that conflict with any of ``blocks`` (a companion string), found through an
        interval index in time proportional to their number, not to all blocks as a mask would."""
        if self.timed and self._index is None:
            self._index = IntervalIndex(self.starts, self.ends, np.flatnonzero(self.live))
        found = []
        for b in np.asarray(blocks).tolist():
            if not self.live[b]:
                continue
            if self.timed:
                found.append(self._index.overlapping(b))
            if self.has_pairs:
                found.append(self.partners(b))
        if not found:
            return np.zeros(0, np.int64)
        if len(found) == 1:
            return found[0]
        return np.unique(np.concatenate(found))

    def among(self, i: int, cols: np.ndarray) -> np.ndarray:
        """Boolean mask over ``cols``: which of those blocks conflict with block ``i``."""
        if self.timed:
            out = (self.starts[cols] < self.ends[i]) & (self.ends[cols] > self.starts[i])
        else:
            out = np.zeros(len(cols), bool)
        out |= np.isin(cols, self.partners(i))
        return out & self.live[cols] & (cols != i) & bool(self.live[i])

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Boolean ``len(rows) x len(cols)`` matrix: does block ``rows[a]`` conflict with ``cols[b]``."""
        if self.timed:
            out = (self.starts[rows][:, None] < self.ends[cols][None, :]) & (
                self.starts[cols][None, :] < self.ends[rows][:, None]
            )
        else:
            out = np.zeros((len(rows), len(cols)), bool)
        if self.has_pairs and len(rows) and len(cols):
            codes = rows[:, None] * max(self.n, 1) + cols[None, :]
            out |= np.isin(codes, self._pair_codes)
        out &= self.live[rows][:, None] & self.live[cols][None, :]
        out &= rows[:, None] != cols[None, :]
        return out

    def degrees(self) -> np.ndarray:
        """Number of blocks each block conflicts with (libnnc's initial ``oc``)."""
        degree = np.zeros(self.n, np.int64)
        live = np.flatnonzero(self.live)
        if self.timed and len(live):
            starts = np.sort(self.starts[live])
            ends = np.sort(self.ends[live])
            later = len(live) - np.searchsorted(starts, self.ends[live], side="left")
            earlier = np.searchsorted(ends, self.starts[live], side="right")
            degree[live] = len(live) - later - earlier - 1
        pairs = self._untimed_pairs
        if len(pairs):
            degree += np.bincount(pairs.ravel(), minlength=self.n)
        return degree


class Units:
    """Companion groups and lone blocks as placement units, in order of their lowest block index.

    Attributes:
        members: the blocks of every unit, in time order.
        of: the unit of every block.
        size: padded size of every unit (its largest block).
        start, end: start of its first block, end of its last block.
        first, last: its first and last block in time.
    """

    def __init__(self, problem: Problem, conflicts: Conflicts) -> None:
        n = problem.n
        leader = np.arange(n, dtype=np.int64)
        for group in problem.companions:
            leader[list(group)] = min(group)
        heads = np.flatnonzero(leader == np.arange(n))
        self.of = np.searchsorted(heads, leader)
        self.count = len(heads)
        self.members = list(heads.reshape(-1, 1))
        self.first, self.last = heads.copy(), heads.copy()
        for group in problem.companions:
            blocks = np.array(sorted(group), np.int64)
            blocks = blocks[np.argsort(conflicts.starts[blocks], kind="stable")]
            u = self.of[group[0]]
            self.members[u], self.first[u], self.last[u] = blocks, blocks[0], blocks[-1]
        self.size = np.zeros(self.count, np.int64)
        np.maximum.at(self.size, self.of, conflicts.sizes)
        self.start = conflicts.starts[self.first]
        self.end = conflicts.ends[self.last]
        self.lone = np.bincount(self.of, minlength=self.count) == 1
