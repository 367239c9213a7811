"""``nnc``: the NNC tensor allocation algorithm as libnnc runs it today (since 2019).

``_ccv_nnc_tensor_alloc_prep_new_and_free_exec_dep``: each round, the largest unplaced blocks are the
candidates, ordered by how many unplaced blocks they interfere with (more first; then the lower block
index). The first candidate that fits an edge of the allocation graph goes on its *temporally
tightest* edge: the cost of ``(y, x)`` is ``hop(y) + hop(x)``, with the penalty ``R`` for the source or
the sink. A candidate that fits nowhere is marked *cannot insert* and skipped until a new group
opens; when no candidate fits, the first one opens a new group. Loop companions go in as one string.
"""

from __future__ import annotations

import numpy as np

from jaxalloc.allocators.allocation_graph import GraphPlanner
from jaxalloc.allocators.problem import Allocation, Problem


def nnc(problem: Problem) -> Allocation:
    """libnnc's allocator today: largest block first, on the temporally tightest edge."""
    plan = GraphPlanner(problem, open_ends=True)
    units = plan.units
    order = np.lexsort((np.arange(units.count), -units.size))
    order = order[units.size[order] > 0]
    run_end = _run_ends(units.size[order])
    cannot_insert = np.zeros(units.count, bool)
    ptr, first_round = 0, True
    while True:
        while ptr < len(order) and not plan.unplaced[order[ptr]]:
            ptr += 1
        if ptr == len(order):
            break
        size = int(units.size[order[ptr]])
        same = order[ptr : run_end[ptr]]
        cand = same[plan.unplaced[same]]
        cand = cand[np.lexsort((cand, -plan.uoc[cand]))]
        chosen = None
        if not first_round:
            edges = plan.graph.fitting_kept(size)
            for u in cand[~cannot_insert[cand]]:
                edge = plan.edge_for(units.members[u], size, edges)
                if edge is not None:
                    chosen = (int(u), edge)
                    break
                cannot_insert[u] = True
        first_round = False
        if chosen is not None:
            plan.place(units.members[chosen[0]], size, chosen[1])
            continue
        string = units.members[cand[0]]
        plan.place(string, size, None)
        _clear_marks(plan, cannot_insert, string, size)
    return plan.result("nnc")


def _run_ends(sorted_sizes: np.ndarray) -> np.ndarray:
    """For each position of a size-sorted array, the end of its run of equal sizes."""
    if not len(sorted_sizes):
        return np.zeros(0, np.int64)
    change = np.flatnonzero(np.diff(sorted_sizes)) + 1
    ends = np.append(change, len(sorted_sizes))
    return np.repeat(ends, np.diff(np.concatenate([[0], ends])))


def _clear_marks(plan: GraphPlanner, cannot_insert: np.ndarray, string: np.ndarray, size: int) -> None:
    """A new group gives a new chance to the smaller unplaced units that interfere with none of its blocks."""
    c, units = plan.conflicts, plan.units
    clear = np.bincount(units.of[c.mask_any(string)], minlength=units.count) == 0
    cannot_insert[plan.unplaced & cannot_insert & (units.size <= size) & clear] = False
