"""``nnc``: the NNC tensor allocation algorithm as libnnc runs it today (since 2019).

``_ccv_nnc_tensor_alloc_prep_new_and_free_exec_dep``: each round, the largest unplaced blocks are the
candidates, ordered by how many unplaced blocks they interfere with (more first; then the lower block
index). The first candidate that fits an edge of the allocation graph goes on its *temporally
tightest* edge: the cost of ``(y, x)`` is ``hop(y) + hop(x)``, with the penalty ``R`` for the source or
the sink. A candidate that fits nowhere is marked *cannot insert* and skipped until a new group
opens; when no candidate fits, the first one opens a new group. Loop companions go in as one string.

Nothing here visits all blocks per round. The candidates of a size wait in two heaps (unmarked,
marked) keyed by their interference count: counted when the size's rounds begin (Fenwick trees over
the placed blocks' times), lowered in place as the size's units are placed, and refreshed in a heap
when a stale key surfaces. The tightest edge comes from the indexed allocation graph.
"""

from __future__ import annotations

import heapq

import numpy as np

from jaxalloc.allocators.allocation_graph import GraphPlanner
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.allocators.trees import CountTree


def nnc(problem: Problem) -> Allocation:
    """libnnc's allocator today: largest block first, on the temporally tightest edge."""
    plan = GraphPlanner(problem, open_ends=True, indexed=True)
    units = plan.units
    count = _Interference(plan)
    oc = np.zeros(units.count, np.int64)
    order = np.lexsort((np.arange(units.count), -units.size))
    order = order[units.size[order] > 0]
    first_round = True
    for run in np.split(order, np.flatnonzero(np.diff(units.size[order])) + 1):
        if not len(run):
            continue
        size = int(units.size[run[0]])
        cands = _Candidates(plan, count, oc, run)
        while cands.left:
            chosen = None
            while not first_round:
                u = cands.first(marked=False)
                if u is None:
                    break
                edge = plan.edge_for_unit(u, size)
                if edge is not None:
                    chosen = (u, edge)
                    break
                cands.mark(u)
            first_round = False
            if chosen is not None:
                cands.place(chosen[0], size, chosen[1])
                continue
            u = cands.first(marked=True)
            u = cands.first(marked=False) if u is None else u
            cands.place(u, size, None)
            cands.clear_marks(u)
    return plan.result("nnc")


_WAITING, _MARKED, _PLACED = 0, 1, 2


class _Candidates:
    """The units of one size (one run of rounds), unmarked or marked *cannot insert*, in two heaps
    ordered by their interference count (more first), then by index.

    Placing a unit lowers the count of the run's units it interferes with (found among the run's
    blocks sorted by start, in a window as long as the run's longest lifetime). Counts only fall, so
    a heap key is an upper bound: the top is checked against the count and pushed back when stale.
    A key is one integer, ``-count * units + index``, which heaps compare fastest.
    """

    def __init__(self, plan: GraphPlanner, count: _Interference, oc: np.ndarray, run: np.ndarray) -> None:
        self.plan, self.count = plan, count
        self.left = len(run)
        units, c = plan.units, plan.conflicts
        self.oc, self.scale = oc, units.count
        if len(run) > 1:
            oc[run] = [count.of(u) for u in run.tolist()]
        self.state = dict.fromkeys(run.tolist(), _WAITING)
        self.marked: set[int] = set()
        self.heaps: tuple[list[int], list[int]] = ((-oc[run] * self.scale + run).tolist(), [])
        heapq.heapify(self.heaps[_WAITING])
        self.tracked = len(run) > 1
        if self.tracked:
            blocks = np.concatenate([units.members[u] for u in run])
            blocks = blocks[c.live[blocks]]
            self.blocks = blocks[np.argsort(c.starts[blocks], kind="stable")]
            self.starts, self.ends = c.starts[self.blocks], c.ends[self.blocks]
            self.longest = int((c.ends[blocks] - c.starts[blocks]).max()) if len(blocks) else 0
            self.unique_hits = bool(units.lone[run].all())

    def first(self, marked: bool) -> int | None:
        """The unit of the most interference (then the lowest index) among the unmarked or the marked."""
        heap, oc, state, scale = self.heaps[marked], self.oc, self.state, self.scale
        while heap:
            u = heap[0] % scale
            key = -int(oc[u]) * scale + u
            if state[u] != marked:
                heapq.heappop(heap)
            elif heap[0] != key:
                heapq.heapreplace(heap, key)
            else:
                heapq.heappop(heap)
                return u
        return None

    def mark(self, u: int) -> None:
        self.marked.add(u)
        self._move(u, _MARKED)

    def clear_marks(self, opened: int) -> None:
        """A new group gives a new chance to the marked units that interfere with none of its blocks."""
        units, c = self.plan.units, self.plan.conflicts
        marked = list(self.marked)
        if not marked:
            return
        blocks = np.concatenate([units.members[u] for u in marked])
        hit = np.zeros(len(blocks), bool)
        for b in units.members[opened].tolist():
            hit |= c.among(b, blocks)
        cleared = set(marked) - set(units.of[blocks[hit]].tolist())
        self.marked -= cleared
        for u in cleared:
            self._move(u, _WAITING)

    def _move(self, u: int, state: int) -> None:
        self.state[u] = state
        heapq.heappush(self.heaps[state], -int(self.oc[u]) * self.scale + u)

    def place(self, u: int, size: int, edge: int | None) -> None:
        """Places unit ``u`` on ``edge`` (None: a new group) and lowers the counts it interferes with."""
        string = self.plan.units.members[u]
        self.plan.place(string, size, edge)
        self.state[u] = _PLACED
        self.marked.discard(u)
        self.left -= 1
        for b in string.tolist():
            self.count.placed(b)
            if self.tracked and self.plan.conflicts.live[b]:
                self._lower(b)

    def _lower(self, b: int) -> None:
        """Lowers the count of the run's units by one for each of their blocks that interferes with
        block ``b`` (placed units' counts are never read again, so they need no filtering)."""
        c, units = self.plan.conflicts, self.plan.units
        s, e = c.starts[b], c.ends[b]
        hits = self.blocks[:0]
        if c.timed:
            lo, hi = np.searchsorted(self.starts, (s - self.longest, e))
            hits = self.blocks[lo:hi][self.ends[lo:hi] > s]
        if c.has_pairs:
            partners = c.untimed_partners(b)
            hits = np.concatenate([hits, partners[[u in self.state for u in units.of[partners].tolist()]]])
        if self.unique_hits:
            self.oc[units.of[hits]] -= 1
        else:
            np.subtract.at(self.oc, units.of[hits], 1)


class _Interference:
    """libnnc's ``oc`` of an unplaced unit, on demand: how many unplaced blocks its blocks interfere with.

    A block's count is its degree less the placed blocks it conflicts with: the placed blocks that
    overlap it in time (those starting before its end less those ending by its start, counted in two
    Fenwick trees) and its placed explicit partners that do not overlap it.
    """

    def __init__(self, plan: GraphPlanner) -> None:
        c = self.conflicts = plan.conflicts
        self.plan = plan
        self.degree = c.degrees().tolist()
        self.live = c.live.tolist()
        starts, ends = np.unique(c.starts[c.live]), np.unique(c.ends[c.live])
        self.start_at = np.searchsorted(starts, c.starts).tolist()
        self.end_at = np.searchsorted(ends, c.ends).tolist()
        self.started_before = np.searchsorted(starts, c.ends, side="left").tolist()
        self.ended_by = np.searchsorted(ends, c.starts, side="right").tolist()
        self.started, self.ended = CountTree(len(starts)), CountTree(len(ends))
        self.lone_block = np.where(plan.units.lone, plan.units.first, -1).tolist()

    def placed(self, block: int) -> None:
        if self.live[block] and self.conflicts.timed:
            self.started.add(self.start_at[block])
            self.ended.add(self.end_at[block])

    def of(self, unit: int) -> int:
        b = self.lone_block[unit]
        if b >= 0:
            return self._of_block(b)
        return sum(self._of_block(b) for b in self.plan.units.members[unit].tolist())

    def _of_block(self, b: int) -> int:
        if not self.live[b]:
            return 0
        total = self.degree[b]
        if self.conflicts.timed:
            total -= self.started.below(self.started_before[b]) - self.ended.below(self.ended_by[b])
        if self.conflicts.has_pairs:
            total -= int(self.plan.block_placed[self.conflicts.untimed_partners(b)].sum())
        return total
