"""``nnc``: the NNC tensor allocation algorithm as libnnc runs it today (since 2019).

``_ccv_nnc_tensor_alloc_prep_new_and_free_exec_dep``: each round, the largest unplaced blocks are the
candidates, ordered by how many unplaced blocks they interfere with (more first; then the lower block
index). The first candidate that fits an edge of the allocation graph goes on its *temporally
tightest* edge: the cost of ``(y, x)`` is ``hop(y) + hop(x)``, with the penalty ``R`` for the source or
the sink. A candidate that fits nowhere is marked *cannot insert* and skipped until a new group
opens; when no candidate fits, the first one opens a new group. Loop companions go in as one string.

The candidates of a size wait in two heaps (unmarked, marked) keyed by their interference count.
Counts only fall as blocks are placed, so a stale key is an upper bound: the top is checked against
its true count and pushed back when it fell, and no count is updated eagerly.
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
    order = np.lexsort((np.arange(units.count), -units.size))
    order = order[units.size[order] > 0]
    first_round = True
    for run in np.split(order, np.flatnonzero(np.diff(units.size[order])) + 1):
        if not len(run):
            continue
        size = int(units.size[run[0]])
        run = run.tolist()
        waiting = [(-count.of(u), u) for u in run] if len(run) > 1 else [(0, run[0])]
        heapq.heapify(waiting)
        marked: list[tuple[int, int]] = []
        while waiting or marked:
            chosen = None
            while waiting and not first_round:
                key, u = _pop_first(waiting, count)
                edge = plan.edge_for_unit(u, size)
                if edge is not None:
                    chosen = (u, edge)
                    break
                heapq.heappush(marked, (key, u))
            first_round = False
            if chosen is not None:
                _place(plan, count, chosen[0], size, chosen[1])
                continue
            u = _pop_first(marked if marked else waiting, count)[1]
            _place(plan, count, u, size, None)
            waiting, marked = _clear_marks(plan, u, waiting, marked)
    return plan.result("nnc")


def _pop_first(heap: list[tuple[int, int]], count: _Interference) -> tuple[int, int]:
    """Pops the unit with the most interference (then the lowest index), refreshing stale keys."""
    while len(heap) > 1:
        key, u = heap[0]
        true = -count.of(u)
        if true == key:
            break
        heapq.heapreplace(heap, (true, u))
    return heapq.heappop(heap)


def _place(plan: GraphPlanner, count: _Interference, unit: int, size: int, edge: int | None) -> None:
    string = plan.units.members[unit]
    plan.place(string, size, edge)
    for b in string:
        count.placed(int(b))


def _clear_marks(plan: GraphPlanner, unit: int, waiting: list, marked: list) -> tuple[list, list]:
    """A new group gives a new chance to the marked units that interfere with none of its blocks."""
    hit = set(plan.units.of[plan.conflicts.conflicting(plan.units.members[unit])].tolist())
    still = [entry for entry in marked if entry[1] in hit]
    for entry in marked:
        if entry[1] not in hit:
            heapq.heappush(waiting, entry)
    heapq.heapify(still)
    return waiting, still


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

    def placed(self, block: int) -> None:
        if self.live[block] and self.conflicts.timed:
            self.started.add(self.start_at[block])
            self.ended.add(self.end_at[block])

    def of(self, unit: int) -> int:
        c, total = self.conflicts, 0
        for b in self.plan.units.members[unit].tolist():
            if not self.live[b]:
                continue
            total += self.degree[b]
            if c.timed:
                total -= self.started.below(self.started_before[b]) - self.ended.below(self.ended_by[b])
            if c.has_pairs:
                partners = c.partners(b)
                partners = partners[self.plan.block_placed[partners]]
                if c.timed:
                    partners = partners[(c.starts[partners] >= c.ends[b]) | (c.ends[partners] <= c.starts[b])]
                total -= len(partners)
        return total
