"""The planners people use today: one pass over the blocks in a fixed order, each put in a gap.

Each block (each companion unit) is placed in turn at the lowest address of a gap between the placed
blocks it conflicts with; the orders and gap rules are those of the production planners:

- ``greedy-size``: size descending, then longer lifetime, best-fit gap (TFLite's ArenaPlanner, XLA's
  ``GlobalDecreasingSizeBestFitHeap`` with ``kSpatial``);
- ``greedy-duration``: lifetime descending, then size, best-fit gap (XLA's ``kTemporal``);
- ``first-fit``, ``best-fit``, ``worst-fit``: the classic planner in order of birth, with the lowest,
  the tightest or the widest gap that fits.

A gap is a free address range between the conflicting placed blocks; above them all lies an unbounded
gap, used when no bounded one fits (worst-fit takes the widest *bounded* gap, or it would never reuse).
Ties go to the lower address, and blocks with equal sort keys to the lower index.
"""

from __future__ import annotations

import numpy as np

from jaxalloc.allocators.conflicts import Conflicts, Units
from jaxalloc.allocators.problem import Allocation, Problem, make_allocation

UNBOUNDED = np.int64(2**62)


def fit(lo: np.ndarray, hi: np.ndarray, size: int, rule: str) -> int:
    """The offset a gap rule picks for ``size`` bytes among busy ranges ``[lo, hi)``.

    Gap ``i`` ends at the ``i``-th lowest ``lo`` and starts at 0 or at the highest ``hi`` below it;
    one is unbounded above them all.
    """
    if not len(lo):
        return 0
    order = lo.argsort(kind="stable")
    lo = lo[order]
    reach = np.maximum.accumulate(hi[order])
    room = np.empty(len(lo), np.int64)
    room[0] = lo[0]
    np.subtract(lo[1:], reach[:-1], out=room[1:])
    fits = room >= size
    if rule == "first":
        i = int(fits.argmax())
    elif rule == "best":
        i = int(np.where(fits, room, UNBOUNDED).argmin())
    elif rule == "worst":
        i = int(np.where(fits, room, -1).argmax())
    else:
        raise ValueError(f"unknown gap rule {rule!r}")
    if not fits[i]:
        return int(reach[-1])
    return 0 if i == 0 else int(reach[i - 1])


def place_in_order(problem: Problem, order_by, rule: str, name: str) -> Allocation:
    """Places the units one by one in the order ``order_by(units, ids)`` gives, each in the gap ``rule`` picks."""
    conflicts = Conflicts(problem)
    units = Units(problem, conflicts)
    sizes, unit_sizes = conflicts.sizes, units.size.tolist()
    offsets = np.zeros(problem.n, np.int64)
    placed = np.zeros(problem.n, bool)
    for u in order_by(units, np.flatnonzero(units.size > 0)).tolist():
        members = units.members[u]
        busy = conflicts.conflicting(members)
        busy = busy[placed[busy]]
        lo = offsets[busy]
        offsets[members] = fit(lo, lo + sizes[busy], unit_sizes[u], rule)
        placed[members] = True
    return make_allocation(problem, offsets, name)


def by_size(units: Units, ids: np.ndarray) -> np.ndarray:
    """Size descending, then longer lifetime, then index."""
    life = units.end[ids] - units.start[ids]
    return ids[np.lexsort((ids, -life, -units.size[ids]))]


def by_duration(units: Units, ids: np.ndarray) -> np.ndarray:
    """Lifetime descending, then size descending, then index."""
    life = units.end[ids] - units.start[ids]
    return ids[np.lexsort((ids, -units.size[ids], -life))]


def by_birth(units: Units, ids: np.ndarray) -> np.ndarray:
    """Start of the first block ascending, then index."""
    return ids[np.lexsort((ids, units.start[ids]))]


def greedy_size(problem: Problem) -> Allocation:
    """Size descending, then longer lifetime, best-fit gap (TFLite ArenaPlanner / XLA kSpatial)."""
    return place_in_order(problem, by_size, "best", "greedy-size")


def greedy_duration(problem: Problem) -> Allocation:
    """Lifetime descending, then size, best-fit gap (XLA kTemporal)."""
    return place_in_order(problem, by_duration, "best", "greedy-duration")


def first_fit(problem: Problem) -> Allocation:
    """The classic planner: in order of birth, the lowest gap that fits."""
    return place_in_order(problem, by_birth, "first", "first-fit")


def best_fit(problem: Problem) -> Allocation:
    """The classic planner: in order of birth, the tightest gap that fits."""
    return place_in_order(problem, by_birth, "best", "best-fit")


def worst_fit(problem: Problem) -> Allocation:
    """The classic planner: in order of birth, the widest bounded gap that fits."""
    return place_in_order(problem, by_birth, "worst", "worst-fit")
