"""Two small trees over positions ``0..n-1`` that answer a planner's per-round questions in O(log n).

A planner that asks "which placed edge ends latest before ``t``" or "how many placed blocks start
before ``t``" once per block must not scan all edges or blocks each time, or it becomes quadratic.
Both trees live in plain Python lists: they change one position at a time, where numpy's per-call
cost would dominate (a tree of known values is built at once, in numpy).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

EMPTY = -(2**63)


class MaxTree:
    """A value at every position (``EMPTY`` at first); finds the rightmost position ``<= p`` or the
    leftmost ``>= p`` whose value is at least ``v``, the largest value up to ``p``, and where the
    largest value of a range is."""

    def __init__(self, n: int, values=None) -> None:
        self.leaves = 1 << max(1, (n - 1).bit_length())
        if values is None:
            self.values = [EMPTY] * (2 * self.leaves)
            return
        # Built level by level in numpy: setting n positions one by one would cost O(n log n) in Python.
        tree = np.full(2 * self.leaves, EMPTY, np.int64)
        tree[self.leaves : self.leaves + len(values)] = values
        width = self.leaves // 2
        while width:
            tree[width : 2 * width] = np.maximum(tree[2 * width : 4 * width : 2], tree[2 * width + 1 : 4 * width : 2])
            width //= 2
        self.values = tree.tolist()

    def set(self, position: int, value: int) -> None:
        values = self.values
        node = position + self.leaves
        old, values[node] = values[node], value
        node >>= 1
        if value >= old:
            # A larger value only raises the maxima above it, up to the first that is already as large.
            while node and values[node] < value:
                values[node] = value
                node >>= 1
            return
        while node:
            left, right = values[2 * node], values[2 * node + 1]
            top = left if left > right else right
            if values[node] == top:
                return
            values[node] = top
            node >>= 1

    def get(self, position: int) -> int:
        return self.values[position + self.leaves]

    def rightmost(self, position: int, at_least: int) -> int:
        """The largest position ``<= position`` whose value is ``>= at_least``, or -1."""
        values, leaves = self.values, self.leaves
        if position < 0 or values[1] < at_least:
            return -1
        node = position + leaves
        if values[node] >= at_least:
            return position
        while node > 1:
            if node & 1 and values[node - 1] >= at_least:
                node -= 1
                while node < leaves:
                    node = 2 * node + 1 if values[2 * node + 1] >= at_least else 2 * node
                return node - leaves
            node >>= 1
        return -1

    def leftmost(self, position: int, at_least: int) -> int:
        """The smallest position ``>= position`` whose value is ``>= at_least``, or -1."""
        values, leaves = self.values, self.leaves
        if position >= leaves or values[1] < at_least:
            return -1
        node = max(position, 0) + leaves
        if values[node] >= at_least:
            return node - leaves
        while node > 1:
            if not node & 1 and values[node + 1] >= at_least:
                node += 1
                while node < leaves:
                    node = 2 * node if values[2 * node] >= at_least else 2 * node + 1
                return node - leaves
            node >>= 1
        return -1

    def upto(self, position: int) -> int:
        """The largest value at positions ``<= position`` (``EMPTY`` if there are none)."""
        values, best = self.values, EMPTY
        lo, hi = self.leaves, min(position + 1, self.leaves) + self.leaves
        while lo < hi:
            if lo & 1:
                best = max(best, values[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                best = max(best, values[hi])
            lo >>= 1
            hi >>= 1
        return best

    def argmax(self, lo: int, hi: int) -> int:
        """The position of the largest value in ``[lo, hi)``, or -1 if every value there is ``EMPTY``."""
        values, leaves = self.values, self.leaves
        best, top = EMPTY, 0
        lo, hi = lo + leaves, hi + leaves
        while lo < hi:
            if lo & 1:
                if values[lo] > best:
                    best, top = values[lo], lo
                lo += 1
            if hi & 1:
                hi -= 1
                if values[hi] > best:
                    best, top = values[hi], hi
            lo >>= 1
            hi >>= 1
        if not top:
            return -1
        while top < leaves:
            top = 2 * top if values[2 * top] == best else 2 * top + 1
        return top - leaves


def raise_in_turn(trees: Iterable[MaxTree], position: int, value: int) -> None:
    """Raises ``position`` to ``value`` in each of ``trees`` in turn, up to the first that already
    holds as large a value there (a planner's trees of nested edge sets: then so do the rest)."""
    for tree in trees:
        values = tree.values
        node = position + tree.leaves
        if values[node] >= value:
            return
        while node and values[node] < value:
            values[node] = value
            node >>= 1


class CountTree:
    """A count at every position (a Fenwick tree): add one, and count the positions below ``p``."""

    def __init__(self, n: int) -> None:
        self.counts = [0] * (n + 1)

    def add(self, position: int) -> None:
        counts = self.counts
        i = position + 1
        while i < len(counts):
            counts[i] += 1
            i += i & -i

    def below(self, position: int) -> int:
        """The total count at positions ``< position``."""
        counts, total, i = self.counts, 0, position
        while i:
            total += counts[i]
            i &= i - 1
        return total
