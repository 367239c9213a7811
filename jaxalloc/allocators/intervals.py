"""Which blocks' half-open intervals overlap a given block, in time proportional to the answer.

A block ``b`` overlaps ``[s, e)`` when it starts inside it (a slice of the blocks sorted by start) or
when it started before ``s`` and is still live at ``s`` (a stabbing query). Stabbing uses a static
segment tree over the distinct times: each interval is stored at the O(log n) nodes that cover its
open range ``(start, end)``, so the intervals live at ``s`` are the lists on the path from the leaf of
``s`` to the root. Building costs O(n log n); a query costs O(log n) slices plus the answer, where a
mask over all blocks would cost O(n) and make a planner quadratic.
"""

from __future__ import annotations

import numpy as np


class IntervalIndex:
    """Overlap queries over fixed intervals ``[starts[i], ends[i])`` of the blocks in ``blocks``."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, blocks: np.ndarray) -> None:
        by_start = blocks[np.argsort(starts[blocks], kind="stable")]
        self._by_start = by_start
        sorted_starts = starts[by_start]
        times = np.unique(np.concatenate([starts[blocks], ends[blocks]]))
        leaves = 1 << max(1, int(len(times) - 1).bit_length())
        self._leaves = leaves
        # The open range (start, end) in time indices, as leaves [lo, hi) of the tree.
        lo = np.searchsorted(times, starts[blocks]) + 1 + leaves
        hi = np.searchsorted(times, ends[blocks]) + leaves
        nodes, owners = [], []
        who = blocks
        while len(who):
            left = (lo & 1 == 1) & (lo < hi)
            right = (hi & 1 == 1) & (lo < hi)
            nodes += [lo[left], hi[right] - 1]
            owners += [who[left], who[right]]
            lo = (lo + (lo & 1)) >> 1
            hi = (hi - (hi & 1)) >> 1
            keep = lo < hi
            lo, hi, who = lo[keep], hi[keep], who[keep]
        nodes_flat = np.concatenate(nodes) if nodes else np.zeros(0, np.int64)
        order = np.argsort(nodes_flat, kind="stable")
        self._members = (np.concatenate(owners) if owners else np.zeros(0, np.int64))[order]
        self._ptr = np.searchsorted(nodes_flat[order], np.arange(2 * leaves + 1)).tolist()
        # Per block: its leaf, and the slice of ``by_start`` that starts inside it, split around itself.
        self._leaf = np.zeros(len(starts), np.int64)
        self._leaf[blocks] = np.searchsorted(times, starts[blocks]) + leaves
        self._leaf = self._leaf.tolist()
        first = np.zeros(len(starts), np.int64)
        first[blocks] = np.searchsorted(sorted_starts, starts[blocks])
        rank = np.zeros(len(starts), np.int64)
        rank[by_start] = np.arange(len(by_start))
        last = np.zeros(len(starts), np.int64)
        last[blocks] = np.searchsorted(sorted_starts, ends[blocks])
        self._first, self._rank, self._last = first.tolist(), rank.tolist(), last.tolist()

    def _live_parts(self, node: int) -> list[np.ndarray]:
        """The lists on the path from leaf ``node`` to the root: the blocks live strictly across its time."""
        ptr, members, parts = self._ptr, self._members, []
        while node:
            if ptr[node] != ptr[node + 1]:
                parts.append(members[ptr[node] : ptr[node + 1]])
            node >>= 1
        return parts

    def overlapping(self, block: int) -> np.ndarray:
        """The indexed blocks whose intervals overlap indexed block ``block``'s, without ``block`` itself."""
        parts = self._live_parts(self._leaf[block])
        rank = self._rank[block]
        parts.append(self._by_start[self._first[block] : rank])
        parts.append(self._by_start[rank + 1 : self._last[block]])
        return np.concatenate(parts)
