"""Today's allocators as they were before the near-linear rewrite: slow references for the tests only.

A verbatim copy of ``conflicts``, ``allocation_graph``, ``nnc``, ``nnc_2018``, ``greedy`` and ``beam`` at
commit 41e2d85 (module docstrings and imports between them dropped). The tests assert that the fast
allocators give exactly these offsets; never import this module from the package.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxalloc.allocators.problem import Allocation, Problem, make_allocation


# --- conflicts ---------------------------------------------------------------------------------
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

    def _overlaps(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return (self.starts[i] < self.ends[j]) & (self.starts[j] < self.ends[i])

    def partners(self, i: int) -> np.ndarray:
        """The blocks that form an explicit pair with block ``i``."""
        return self._partners[self._ptr[i] : self._ptr[i + 1]]

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

    def mask_any(self, blocks) -> np.ndarray:
        """Boolean mask of the blocks that conflict with any of ``blocks`` (a companion string)."""
        out = self.mask(int(blocks[0]))
        for b in blocks[1:]:
            out |= self.mask(int(b))
        return out

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
        grouped = {i: group for group in problem.companions for i in group}
        members: list[np.ndarray] = []
        for i in range(n):
            group = grouped.get(i)
            if group is None:
                members.append(np.array([i], np.int64))
            elif i == min(group):
                blocks = np.array(sorted(group), np.int64)
                members.append(blocks[np.argsort(conflicts.starts[blocks], kind="stable")])
        self.members = members
        self.count = len(members)
        self.of = np.empty(n, np.int64)
        for u, blocks in enumerate(members):
            self.of[blocks] = u
        sizes = conflicts.sizes
        self.size = np.array([sizes[b].max() for b in members], np.int64)
        self.first = np.array([b[0] for b in members], np.int64)
        self.last = np.array([b[-1] for b in members], np.int64)
        self.start = conflicts.starts[self.first]
        self.end = conflicts.ends[self.last]
        self.lone = np.array([len(b) == 1 for b in members], bool)


# --- allocation_graph --------------------------------------------------------------------------
SOURCE = -1
SINK = -2


class AllocationGraph:
    """The weighted edges ``(y, x, capacity, offset)`` in growable numpy arrays, with cached endpoints.

    ``yend``/``xstart`` hold the end of ``y`` and the start of ``x`` (minus and plus "infinity" for the
    source and the sink) so that the time test for a block is two vectorised comparisons.
    """

    _FIELDS = ("y", "x", "cap", "off", "grp", "yend", "xstart", "ysize", "xsize")

    def __init__(self, conflicts: Conflicts, open_ends: bool) -> None:
        self.conflicts = conflicts
        self.open_ends = open_ends
        self.m = 0
        self.dead = 0
        for name in self._FIELDS:
            setattr(self, name, np.empty(64, np.int64))
        self._kept_size: int | None = None
        self._kept = np.zeros((5, 64), np.int64)
        self._kept_count = 0

    def add(self, y: int, x: int, cap: int, off: int, grp: int) -> None:
        """Adds the edge ``(y, x) {cap, off}`` of group ``grp`` (an empty one, or an open end that the
        selection rule never uses, is not stored)."""
        if cap <= 0 or (not self.open_ends and (y == SOURCE or x == SINK)):
            return
        if self.m == len(self.y):
            for name in self._FIELDS:
                old = getattr(self, name)
                new = np.empty(2 * len(old), np.int64)
                new[: self.m] = old[: self.m]
                setattr(self, name, new)
        c, k = self.conflicts, self.m
        self.y[k], self.x[k], self.cap[k], self.off[k], self.grp[k] = y, x, cap, off, grp
        self.yend[k] = NEVER if y == SOURCE else c.ends[y]
        self.ysize[k] = FOREVER if y == SOURCE else c.sizes[y]
        self.xstart[k] = FOREVER if x == SINK else c.starts[x]
        self.xsize[k] = FOREVER if x == SINK else c.sizes[x]
        self.m += 1
        if self._kept_size is not None and min(cap, self.ysize[k], self.xsize[k]) >= self._kept_size:
            if self._kept_count == self._kept.shape[1]:
                self._kept = np.concatenate([self._kept, np.zeros_like(self._kept)], axis=1)
            self._kept[:, self._kept_count] = (k, y, x, self.yend[k], self.xstart[k])
            self._kept_count += 1

    def take(self, k: int, size: int) -> None:
        """Uses the first ``size`` bytes of edge ``k``."""
        self.cap[k] -= size
        self.off[k] += size
        if self.cap[k] == 0:
            self.dead += 1
        if self._kept_size is not None and self.cap[k] < self._kept_size:
            at = np.flatnonzero(self._kept[0, : self._kept_count] == k)
            if len(at):
                last = self._kept_count - 1
                self._kept[:, at[0]] = self._kept[:, last]
                self._kept_count = last
        if self.dead > 64 and 2 * self.dead > self.m:
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.cap[: self.m] > 0)
        for name in self._FIELDS:
            array = getattr(self, name)
            array[: len(keep)] = array[keep]
        self.m = len(keep)
        self.dead = 0
        self._kept_size = None

    def fitting(self, size: int) -> Edges:
        """The edges that can hold ``size`` bytes: enough capacity, and both real ends at least as large."""
        idx = np.flatnonzero(self.cap[: self.m] >= size)
        idx = idx[(self.ysize[idx] >= size) & (self.xsize[idx] >= size)]
        return Edges(idx, self.y[idx], self.x[idx], self.yend[idx], self.xstart[idx])

    def fitting_kept(self, size: int) -> Edges:
        """``fitting(size)``, kept up to date across rounds while ``size`` stays the same.

        ``nnc`` asks for one size round after round; a round changes one edge and adds a few, so the
        set is maintained by ``add`` and ``take`` instead of being filtered again from all edges.
        """
        if self._kept_size != size:
            fresh = self.fitting(size)
            self._kept = np.array(fresh, np.int64).reshape(5, -1)
            self._kept = np.concatenate([self._kept, np.zeros((5, 64), np.int64)], axis=1)
            self._kept_count = len(fresh.idx)
            self._kept_size = size
        return Edges(*self._kept[:, : self._kept_count])


class Edges(NamedTuple):
    """A snapshot of some edges' indices and endpoints, shared by the candidates of one round."""

    idx: np.ndarray
    y: np.ndarray
    x: np.ndarray
    yend: np.ndarray
    xstart: np.ndarray

    def select(self, keep) -> Edges:
        """The edges picked by a mask, an index array or a slice."""
        return Edges(*(field[keep] for field in self))


class GraphPlanner:
    """The state of one NNC run: the allocation graph, groups, offsets and interference counts."""

    def __init__(self, problem: Problem, open_ends: bool) -> None:
        self.conflicts = Conflicts(problem)
        self.units = Units(problem, self.conflicts)
        self.graph = AllocationGraph(self.conflicts, open_ends)
        n = problem.n
        self.group = np.full(n, -1, np.int64)
        self.local = np.zeros(n, np.int64)
        self.group_sizes: list[int] = []
        self.block_placed = ~self.conflicts.live
        self.unplaced = self.units.size > 0
        degrees = self.conflicts.degrees()
        self.uoc = np.bincount(self.units.of, weights=degrees, minlength=self.units.count).astype(np.int64)
        self.steps = self.conflicts.steps

    def edge_for(self, string: np.ndarray, size: int, edges: Edges) -> int | None:
        """The tightest of ``edges`` that can take ``string`` (blocks in time order, ``size`` bytes)."""
        c = self.conflicts
        first_start = c.starts[string[0]]
        last_end = c.ends[string].max()
        ok = (edges.yend <= first_start) & (edges.xstart >= last_end)
        partners = self._placed_partners(string) if c.has_pairs else None
        if partners is not None and len(partners[0]):
            ok &= ~np.isin(edges.y, partners[0]) & ~np.isin(edges.x, partners[0])
        at = np.flatnonzero(ok)
        if not len(at):
            return None
        idx, y, x = edges.idx[at], edges.y[at], edges.x[at]
        hop_y = np.where(y == SOURCE, self.steps, first_start - edges.yend[at] + 1)
        hop_x = np.where(x == SINK, self.steps, edges.xstart[at] - last_end + 1)
        cost = hop_y + hop_x
        phase = np.where(x == SINK, 0, np.where(y == SOURCE, 1, 2))
        if partners is None or not len(partners[0]):
            tied = np.flatnonzero(cost == cost.min())
            if len(tied) == 1:
                return int(idx[tied[0]])
            order = np.lexsort((x[tied], y[tied], hop_y[tied], phase[tied]))
            return int(idx[tied[order[0]]])
        for k in np.lexsort((x, y, hop_y, phase, cost)):
            if self._bytes_free(int(idx[k]), partners):
                return int(idx[k])
        return None

    def _placed_partners(self, string: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Placed explicit partners of the string's blocks, with the size of the block they meet."""
        c = self.conflicts
        found, sizes = [], []
        for b in string:
            p = c.partners(int(b))
            p = p[self.block_placed[p] & c.live[p]]
            found.append(p)
            sizes.append(np.full(len(p), c.sizes[b]))
        return np.concatenate(found), np.concatenate(sizes)

    def _bytes_free(self, k: int, partners: tuple[np.ndarray, np.ndarray]) -> bool:
        """Whether no placed explicit partner uses the first bytes of edge ``k`` the string would take."""
        g, c = self.graph, self.conflicts
        blocks, sizes = partners
        same = self.group[blocks] == g.grp[k]
        lo, hi = self.local[blocks], self.local[blocks] + c.sizes[blocks]
        return not np.any(same & (lo < g.off[k] + sizes) & (hi > g.off[k]))

    def place(self, string: np.ndarray, size: int, edge: int | None) -> None:
        """Inserts ``string`` (blocks in time order, sharing one offset) on ``edge``, or in a new group."""
        g, sizes = self.graph, self.conflicts.sizes
        if edge is None:
            grp, y, x, off = len(self.group_sizes), SOURCE, SINK, 0
            self.group_sizes.append(int(size))
        else:
            grp, y, x, off = int(g.grp[edge]), int(g.y[edge]), int(g.x[edge]), int(g.off[edge])
            g.take(edge, size)
        blocks = [int(b) for b in string]
        consumed = 0
        for b in blocks:
            if sizes[b] > consumed:
                g.add(y, b, int(sizes[b]) - consumed, off + consumed, grp)
                consumed = int(sizes[b])
            if consumed == size:
                break
        for i, b in enumerate(blocks):
            own, consumed = int(sizes[b]), 0
            for later in blocks[i + 1 :]:
                shared = min(own, int(sizes[later]))
                if shared > consumed:
                    g.add(b, later, shared - consumed, off + consumed, grp)
                    consumed = shared
                if consumed == own:
                    break
            g.add(b, x, own - consumed, off + consumed, grp)
        for b in blocks:
            self.group[b] = grp
            self.local[b] = off
            self.block_placed[b] = True
            self._forget(b)
        self.unplaced[self.units.of[blocks]] = False

    def _forget(self, block: int) -> None:
        """A placed block no longer counts in the interference count of the unplaced ones."""
        hit = np.flatnonzero(self.conflicts.mask(block) & ~self.block_placed)
        np.subtract.at(self.uoc, self.units.of[hit], 1)

    def result(self, name: str) -> Allocation:
        """The plan: groups end to end, in the order they were opened."""
        sizes = np.array(self.group_sizes, np.int64)
        base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        live = self.group >= 0
        offsets = np.zeros(len(self.group), np.int64)
        offsets[live] = base[self.group[live]] + self.local[live]
        for array in (offsets, sizes):
            array.setflags(write=False)
        groups = self.group.copy()
        groups.setflags(write=False)
        return Allocation(offsets=offsets, peak=int(sizes.sum()), allocator=name, groups=groups, group_sizes=sizes)


# --- nnc ---------------------------------------------------------------------------------------
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


# --- nnc_2018 ----------------------------------------------------------------------------------
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


# --- greedy ------------------------------------------------------------------------------------
UNBOUNDED = np.int64(2**62)


def gaps(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Free ranges ``[start, end)`` between busy ranges ``[lo, hi)``; the last one is unbounded."""
    order = np.argsort(lo, kind="stable")
    reach = np.maximum.accumulate(hi[order]) if len(lo) else np.zeros(0, np.int64)
    starts = np.concatenate([[0], reach]).astype(np.int64)
    ends = np.concatenate([lo[order], [UNBOUNDED]]).astype(np.int64)
    return starts, ends


def choose_gap(starts: np.ndarray, ends: np.ndarray, size: int, rule: str) -> int:
    """The offset a gap rule picks for a block of ``size`` bytes."""
    room = ends - starts
    fits = np.flatnonzero(room[:-1] >= size)
    if not len(fits):
        return int(starts[-1])
    if rule == "first":
        return int(starts[fits[0]])
    if rule == "best":
        return int(starts[fits[np.argmin(room[fits])]])
    if rule == "worst":
        return int(starts[fits[np.argmax(room[fits])]])
    raise ValueError(f"unknown gap rule {rule!r}")


def place_in_order(problem: Problem, order_by, rule: str, name: str) -> Allocation:
    """Places the units one by one in the order ``order_by(units, ids)`` gives, each in the gap ``rule`` picks."""
    conflicts = Conflicts(problem)
    units = Units(problem, conflicts)
    sizes = conflicts.sizes
    offsets = np.zeros(problem.n, np.int64)
    placed = np.zeros(problem.n, bool)
    for u in order_by(units, np.flatnonzero(units.size > 0)):
        members = units.members[u]
        busy = np.flatnonzero(conflicts.mask_any(members) & placed)
        starts, ends = gaps(offsets[busy], offsets[busy] + sizes[busy])
        offsets[members] = choose_gap(starts, ends, int(units.size[u]), rule)
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


# --- beam --------------------------------------------------------------------------------------
def beam(problem: Problem, width: int = 4) -> Allocation:
    """Keeps the ``width`` partial birth-order plans with the smallest peak."""
    if int(width) != width or width < 1:
        raise ValueError(f"beam width must be a positive integer, got {width!r}")
    width = int(width)
    conflicts = Conflicts(problem)
    units = Units(problem, conflicts)
    order = by_birth(units, np.flatnonzero(units.size > 0))
    steps = len(order)
    release = _release_steps(conflicts, units, order)
    sizes = conflicts.sizes
    slot_of = np.full(units.count, -1, np.int64)
    free_slots: list[int] = []
    slots = np.zeros((width, 16), np.int64)
    free_slots.extend(range(15, -1, -1))
    peaks = np.zeros(1, np.int64)
    parents = np.zeros((steps, width), np.int64)
    chosen = np.zeros((steps, width), np.int64)
    placed = np.zeros(problem.n, bool)
    for t, u in enumerate(order):
        for done in release.get(t, ()):
            free_slots.append(int(slot_of[done]))
        members = units.members[u]
        busy = np.flatnonzero(conflicts.mask_any(members) & placed)
        size = int(units.size[u])
        k = len(peaks)
        lo = slots[:k][:, slot_of[units.of[busy]]]
        parent, offset, peak = _extend(lo, lo + sizes[busy][None, :], size, peaks, width)
        if not free_slots:
            free_slots.extend(range(2 * slots.shape[1] - 1, slots.shape[1] - 1, -1))
            slots = np.concatenate([slots, np.zeros_like(slots)], axis=1)
        slot = free_slots.pop()
        slot_of[u] = slot
        slots[: len(parent)] = slots[parent]
        slots[: len(parent), slot] = offset
        parents[t, : len(parent)] = parent
        chosen[t, : len(parent)] = offset
        peaks = peak
        placed[members] = True
    offsets = np.zeros(problem.n, np.int64)
    state = 0
    for t in range(steps - 1, -1, -1):
        offsets[units.members[order[t]]] = chosen[t, state]
        state = parents[t, state]
    return make_allocation(problem, offsets, "beam")


def _extend(lo: np.ndarray, hi: np.ndarray, size: int, peaks: np.ndarray, width: int):
    """The best ``width`` extensions of ``k`` plans whose conflicting blocks occupy ``[lo, hi)``."""
    k, m = lo.shape
    order = np.argsort(lo, axis=1, kind="stable")
    lo = np.take_along_axis(lo, order, axis=1)
    reach = np.maximum.accumulate(np.take_along_axis(hi, order, axis=1), axis=1)
    starts = np.concatenate([np.zeros((k, 1), np.int64), reach], axis=1)
    ends = np.concatenate([lo, np.full((k, 1), UNBOUNDED)], axis=1)
    room = ends - starts
    plan, gap = np.nonzero(room >= size)
    offset = starts[plan, gap]
    peak = np.maximum(peaks[plan], offset + size)
    best = np.lexsort((offset, room[plan, gap], plan, peak))[:width]
    return plan[best], offset[best], peak[best]


def _release_steps(conflicts: Conflicts, units: Units, order: np.ndarray) -> dict[int, list[int]]:
    """For each step, the units whose offsets no later unit can conflict with from then on."""
    births = units.start[order]
    rank = np.full(units.count, -1, np.int64)
    rank[order] = np.arange(len(order))
    release: dict[int, list[int]] = {}
    for u in order:
        step = int(rank[u]) + 1
        if conflicts.timed:
            step = max(step, int(np.searchsorted(births, units.end[u], side="left")))
        if conflicts.has_pairs:
            for b in units.members[u]:
                partners = conflicts.partners(int(b))
                if len(partners):
                    step = max(step, int(rank[units.of[partners]].max()) + 1)
        release.setdefault(step, []).append(int(u))
    return release
