"""Two small trees over positions ``0..n-1`` that answer a planner's per-round questions in O(log n).

A planner that asks "which placed edge ends latest before ``t``" or "how many placed blocks start
before ``t``" once per block must not scan all edges or blocks each time, or it becomes quadratic.
Both trees live in plain Python lists: they change one position at a time, where numpy's per-call
cost would dominate.
"""

from __future__ import annotations

EMPTY = -(2**63)


class MaxTree:
    """A value at every position (``EMPTY`` at first); finds the rightmost position ``<= p`` whose
    value is at least ``v``."""

    def __init__(self, n: int) -> None:
        self.leaves = 1 << max(1, (n - 1).bit_length())
        self.values = [EMPTY] * (2 * self.leaves)

    def set(self, position: int, value: int) -> None:
        values = self.values
        node = position + self.leaves
        values[node] = value
        node >>= 1
        while node:
            top = max(values[2 * node], values[2 * node + 1])
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
