"""``nnc-2018``: the NNC selection rule as published in 2018 (libccv before commit ``664e45be``).

Each round the unplaced blocks with the most interference are the candidates; each is also paired
with every larger unplaced block it does not interfere with. The tuples go in order of their largest
size, then of their total interference count; the first tuple that fits an edge *between two placed
blocks* (never the source or the sink, in the published text) is inserted on its tightest such edge.
When none fits, the first tuple opens a new group as large as its largest block. Ties follow the
order the candidates were generated in: singles by block index, then pairs by candidate and partner
index.
"""

from __future__ import annotations

import numpy as np

from jaxalloc.allocators.allocation_graph import Edges, GraphPlanner
from jaxalloc.allocators.conflicts import NEVER, Units
from jaxalloc.allocators.problem import Allocation, Problem


def nnc_2018(problem: Problem, open_ends: bool = False) -> Allocation:
    """The published NNC selection: most interference first, paired with a larger free block.

    ``open_ends=False`` follows the published text: only edges between two placed blocks take a
    tuple. ``open_ends=True`` also lets tuples onto ``(source, x)`` and ``(y, sink)`` edges at libnnc's
    penalty of ``R`` steps, as the 2018 source code did.
    """
    plan = GraphPlanner(problem, open_ends=open_ends)
    while plan.unplaced.any():
        string, size, edge = _select_2018(plan)
        plan.place(string, size, edge)
    return plan.result("nnc-2018")


def _select_2018(plan: GraphPlanner) -> tuple[np.ndarray, int, int | None]:
    """The first candidate tuple, in the published order, that fits an edge between two blocks.

    Every candidate has the same (largest) interference count, so the order of the tuples is: by
    largest size (a *level*) descending; within a level by the partner's count descending, singles
    before pairs whose partner has none, then candidate index, then partner index.
    """
    units = plan.units
    live = np.flatnonzero(plan.unplaced)
    counts = plan.uoc[live]
    cands = live[counts == counts.max()]
    sizes = units.size[cands]
    pool = live[units.lone[live] & (units.size[live] > sizes.min())]
    edges = plan.graph.fitting(1)
    edges = edges.select(np.argsort(edges.yend, kind="stable"))
    caps = plan.graph.cap[edges.idx]
    any_fit = bool(np.any(_reach(edges, caps >= 1)(units.start[cands]) >= units.end[cands]))
    top = int(caps.max()) if len(caps) else 0
    first = None
    for level in np.unique(np.concatenate([sizes, units.size[pool]]))[::-1]:
        level = int(level)
        if first is None:
            first = _first_at_level(plan, cands, pool, level)
        if first is not None and not any_fit:
            break
        if level > top:
            continue
        found = _fitting_at_level(plan, cands, pool, level, edges, caps >= level)
        if found is not None:
            return found
    unit, partner, level = first
    return _string(plan, unit, partner), level, None


def _reach(edges: Edges, held: np.ndarray):
    """A function of ``t``: the latest ``x`` start among the ``held`` edges whose ``y`` ends by ``t``.

    ``edges`` are sorted by the end of ``y``. A block (or a pair) ``[start, end)`` lies inside some
    held edge exactly when ``reach(start) >= end``: the edges' time windows form a staircase, so the
    test needs no block-by-edge matrix.
    """
    ends = edges.yend
    latest = np.maximum.accumulate(np.where(held, edges.xstart, NEVER)) if len(ends) else np.zeros(0, np.int64)

    def reach(t: np.ndarray) -> np.ndarray:
        at = np.searchsorted(ends, t, side="right") - 1
        return np.where(at >= 0, latest[np.maximum(at, 0)] if len(latest) else NEVER, NEVER)

    return reach


def _first_at_level(plan: GraphPlanner, cands: np.ndarray, pool: np.ndarray, level: int):
    """The first tuple of largest size ``level`` as ``(unit, partner or -1, level)``, or None."""
    units = plan.units
    sizes = units.size[cands]
    singles = np.flatnonzero(sizes == level)
    partners = pool[units.size[pool] == level]
    small = np.flatnonzero(sizes < level)
    pair = None
    if len(partners) and len(small):
        free = ~_unit_conflicts(plan, partners, cands[small])
        pair = _first_pair(plan, partners, small, free)
    if pair is not None and (pair[0] > 0 or not len(singles)):
        return int(cands[pair[1]]), pair[2], level
    if len(singles):
        return int(cands[singles[0]]), -1, level
    return None


def _first_pair(plan: GraphPlanner, partners: np.ndarray, small: np.ndarray, allowed: np.ndarray):
    """Among the allowed ``partners x small`` pairs, the first: ``(partner count, candidate rank, partner)``."""
    has = allowed.any(axis=1)
    if not has.any():
        return None
    count = np.where(has, plan.uoc[partners], -1)
    rows = np.flatnonzero(count == count.max())
    first_c = allowed[rows].argmax(axis=1)
    o = np.lexsort((partners[rows], small[first_c]))[0]
    return int(count[rows[o]]), int(small[first_c[o]]), int(partners[rows[o]])


def _fitting_at_level(plan: GraphPlanner, cands, pool, level: int, edges: Edges, held: np.ndarray):
    """The first tuple of largest size ``level`` that a ``held`` edge takes: ``(string, level, edge)``."""
    units = plan.units
    reach = _reach(edges, held)
    sizes = units.size[cands]
    fitting = reach(units.start[cands]) >= units.end[cands]
    if not fitting.any():
        return None
    singles = np.flatnonzero((sizes == level) & fitting)
    partners = pool[units.size[pool] == level]
    partners = partners[reach(units.start[partners]) >= units.end[partners]]
    small = np.flatnonzero((sizes < level) & fitting)
    shared = np.zeros((len(partners), len(small)), bool)
    if len(partners) and len(small):
        shared = _shared(units, reach, partners, cands[small])
        rows, cols = np.flatnonzero(shared.any(axis=1)), np.flatnonzero(shared.any(axis=0))
        if len(rows):
            shared[np.ix_(rows, cols)] &= ~_unit_conflicts(plan, partners[rows], cands[small[cols]])
    if not len(singles) and not shared.any():
        return None
    held_edges = edges.select(np.flatnonzero(held))
    if not plan.conflicts.has_pairs:
        # Without explicit pairs a tuple inside an edge's window always fits it: take the first.
        pair = _first_pair(plan, partners, small, shared)
        if pair is not None and (pair[0] > 0 or not len(singles)):
            unit, partner = int(cands[pair[1]]), pair[2]
        elif len(singles):
            unit, partner = int(cands[singles[0]]), -1
        else:
            return None
        string = _string(plan, unit, partner)
        edge = plan.edge_for(string, level, held_edges)
        if edge is not None:
            return string, level, edge
    k_at, c_at = np.nonzero(shared)
    pair_k, pair_c = partners[k_at], small[c_at]
    rank = np.concatenate([singles, pair_c])
    partner_ids = np.concatenate([np.full(len(singles), -1), pair_k])
    kinds = np.concatenate([np.zeros(len(singles), np.int64), np.ones(len(pair_k), np.int64)])
    partner_count = np.concatenate([np.zeros(len(singles), np.int64), plan.uoc[pair_k]])
    for k in np.lexsort((partner_ids, rank, kinds, -partner_count)):
        string = _string(plan, int(cands[rank[k]]), int(partner_ids[k]))
        edge = plan.edge_for(string, level, held_edges)
        if edge is not None:
            return string, level, edge
    return None


def _shared(units: Units, reach, partners: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``len(partners) x len(others)``: do both lie inside one edge (each already lies inside one).

    The pair spans ``[min start, max end)``; as ``reach`` never decreases, the pair fits exactly when
    the later-starting block ends by the reach of the earlier-starting one.
    """
    ks, ke = units.start[partners][:, None], units.end[partners][:, None]
    cs, ce = units.start[others][None, :], units.end[others][None, :]
    k_reach = reach(units.start[partners])[:, None]
    c_reach = reach(units.start[others])[None, :]
    return np.where(cs >= ks, ce <= k_reach, ke <= c_reach)


def _string(plan: GraphPlanner, unit: int, partner: int) -> np.ndarray:
    """The blocks of a tuple in time order."""
    blocks = plan.units.members[unit]
    if partner < 0:
        return blocks
    blocks = np.append(blocks, plan.units.first[partner])
    return blocks[np.argsort(plan.conflicts.starts[blocks], kind="stable")]


def _unit_conflicts(plan: GraphPlanner, lone: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``len(lone) x len(others)``: does lone unit ``lone[a]`` conflict with any block of ``others[b]``."""
    units, c = plan.units, plan.conflicts
    blocks = units.first[lone]
    if units.lone[others].all():
        return c.matrix(blocks, units.first[others])
    members = [units.members[u] for u in others]
    flat = np.concatenate(members)
    starts = np.concatenate([[0], np.cumsum([len(m) for m in members])[:-1]])
    return np.logical_or.reduceat(c.matrix(blocks, flat), starts, axis=1)
