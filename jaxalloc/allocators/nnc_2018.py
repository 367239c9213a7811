"""``nnc-2018``: the NNC selection rule as published in 2018 (libccv before commit ``664e45be``).

Each round the unplaced blocks with the most interference are the candidates; each is also paired
with every larger unplaced block it does not interfere with. The tuples go in order of their largest
size, then of their total interference count; the first tuple that fits an edge *between two placed
blocks* (never the source or the sink, in the published text) is inserted on its tightest such edge.
When none fits, the first tuple opens a new group as large as its largest block. Ties follow the
order the candidates were generated in: singles by block index, then pairs by candidate and partner
index.

Every candidate has the same count, so a tuple's place in that order is the key
``(-size, -partner count, pair, candidate, partner)``: singles count 0 and come before the pairs of
their size whose partner has none. Nothing here visits all blocks per round:

- the candidates are the units of the largest count, collected from a heap of counts that only
  fall (a stale count is refreshed when it surfaces), and replaced when none is left;
- every candidate's best fitting tuple is cached in a heap by its key. Keys only get worse as
  blocks are placed (partners go or lose interference, edges lose bytes, and an edge put on another
  lies inside it), so a surfacing key that still holds is the round's answer, and one that does not
  is recomputed. Only a new group adds windows, so it sends the candidates inside them back to be
  recomputed;
- a candidate's best partner of a size comes from trees over the lone blocks of that size sorted by
  start and by end: those inside the part of the window before or after the candidate (the window
  at that size is read from :class:`LeveledGraph`). The start (or end) range holds them and the
  few blocks that overlap the candidate, which are skipped;
- when nothing fits, the first tuple comes from the partners in key order (each takes the lowest
  candidate free of it), or, where that is longer, from every candidate's best free partner.

A recomputed candidate walks the sizes between its own and the largest that fits it: few on real
traces, but with thousands of distinct sizes (random ones) time grows faster than linearly. Problems
with explicit pairs keep the exhaustive search: their byte test can refuse an edge for one tuple and
not for the next, so keys do not only get worse.
"""

from __future__ import annotations

import bisect
import heapq

import numpy as np

from jaxalloc.allocators.allocation_graph import SINK, SOURCE, Edges, GraphPlanner
from jaxalloc.allocators.conflicts import FOREVER, NEVER, Units
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.allocators.trees import EMPTY, MaxTree


def nnc_2018(problem: Problem, open_ends: bool = False) -> Allocation:
    """The published NNC selection: most interference first, paired with a larger free block.

    ``open_ends=False`` follows the published text: only edges between two placed blocks take a
    tuple. ``open_ends=True`` also lets tuples onto ``(source, x)`` and ``(y, sink)`` edges at libnnc's
    penalty of ``R`` steps, as the 2018 source code did.
    """
    plan = GraphPlanner(problem, open_ends=open_ends, leveled=True)
    if not plan.leveled:
        while plan.unplaced.any():
            string, size, edge = _select_2018(plan)
            plan.place(string, size, edge)
        return plan.result("nnc-2018")
    rounds = _Rounds(plan)
    while rounds.left:
        units, size, edge = rounds.choose()
        before = len(plan.graph.y)
        plan.place(_string(plan, *units), size, edge)
        rounds.placed(units, edge is None, before)
    return plan.result("nnc-2018")


_MISSING = ()
"""A unit's cached tuple before it is first computed (``None``: no tuple of it fits)."""

_BOUND, _LEVEL, _EXACT = 0, 1, 2


class _Rounds:
    """The candidates of the current count and the cached keys that pick each round's tuple."""

    def __init__(self, plan: GraphPlanner) -> None:
        self.plan, self.graph = plan, plan.graph
        units, c = plan.units, plan.conflicts
        n = units.count
        self.n = n
        self.uoc, self.unplaced = plan.uoc, plan.unplaced
        self.left = int(self.unplaced.sum())
        levels = self.graph.levels
        self.levels = levels
        self.size = units.size.tolist()
        self.level = np.searchsorted(levels, units.size).tolist()
        self.first, self.last = units.first.tolist(), units.last.tolist()
        self.start, self.end = units.start.tolist(), units.end.tolist()
        self.lone = units.lone.tolist()
        # A partner may not overlap a block of the candidate that takes memory (a size-0 block
        # conflicts with nothing): where those start and end, and the gaps between them.
        self.spans = _live_spans(units, c)
        self.live_start, self.live_end = list(self.start), list(self.end)
        for u, spans in self.spans.items():
            self.live_start[u], self.live_end[u] = spans[0][0], spans[-1][1]
        self.gaps = {u: [(a[1], b[0]) for a, b in zip(spans, spans[1:])] for u, spans in self.spans.items()}
        # The candidates: units of count M; the others wait in a heap of (possibly stale) counts.
        self.M = -1
        self.members: list[int] = []
        self.waiting = [(-k, u) for u, k in enumerate(self.uoc.tolist()) if self.size[u] > 0]
        heapq.heapify(self.waiting)
        self.fit_heap: list = []
        self.by_size: list[tuple[int, int]] = []
        self.by_index: list[int] = []
        self.cache: list = [_MISSING] * n
        self.version = [0] * n
        self.most: dict[int, int] = {}
        self.stale = np.zeros(n, bool)
        # Units by start, to find those inside a new window.
        live = np.flatnonzero(units.size > 0)
        self.by_start = live[np.argsort(units.start[live], kind="stable")]
        self.sorted_starts = units.start[self.by_start]
        self._init_partners(units)

    def _init_partners(self, units: Units) -> None:
        """Trees over the lone units: by size class then start, by size class then end (a class is
        a contiguous range), and over all of them by start and by end."""
        n = self.n
        lone = np.flatnonzero(units.lone & (units.size > 0))
        level = np.asarray(self.level, np.int64)[lone]
        start, end = units.start[lone], units.end[lone]
        oc = self.uoc[lone]
        self.top_count = int(self.uoc.max()) + 1 if n else 1
        by_class_start = np.lexsort((lone, start, level))
        by_class_end = np.lexsort((lone, end, level))
        by_start, by_end = np.lexsort((lone, start)), np.lexsort((lone, end))
        class_key = oc * n + (n - 1 - lone)
        overall_key = (level * self.top_count + oc) * n + (n - 1 - lone)
        m = len(lone)
        self.cs, self.cs_starts = lone[by_class_start].tolist(), start[by_class_start].tolist()
        self.ce, self.ce_ends = lone[by_class_end].tolist(), end[by_class_end].tolist()
        self.gs, self.gs_starts = lone[by_start].tolist(), start[by_start].tolist()
        self.ge, self.ge_ends = lone[by_end].tolist(), end[by_end].tolist()
        self.cs_tree = MaxTree(m, class_key[by_class_start])
        self.ce_tree = MaxTree(m, class_key[by_class_end])
        self.gs_tree = MaxTree(m, overall_key[by_start])
        self.ge_tree = MaxTree(m, overall_key[by_end])
        sorted_level = level[by_class_start]
        count = len(self.levels)
        self.class_lo = np.searchsorted(sorted_level, np.arange(count), side="left").tolist()
        self.class_hi = np.searchsorted(sorted_level, np.arange(count), side="right").tolist()
        self.class_left = np.bincount(level, minlength=count).tolist()
        self.top_class = count - 1
        self._drop_empty_classes()

    def _drop_empty_classes(self) -> None:
        while self.top_class >= 0 and not self.class_left[self.top_class]:
            self.top_class -= 1

    # --- keys -------------------------------------------------------------------------------------
    def _class_key(self, u: int) -> int:
        if not self.unplaced.item(u):
            return EMPTY
        return self.uoc.item(u) * self.n + (self.n - 1 - u)

    def _overall_key(self, u: int) -> int:
        if not self.unplaced.item(u):
            return EMPTY
        return (self.level[u] * self.top_count + self.uoc.item(u)) * self.n + (self.n - 1 - u)

    def _is_candidate(self, u: int) -> bool:
        return self.unplaced.item(u) and self.uoc.item(u) == self.M

    def _top(self, tree: MaxTree, order: list[int], lo: int, hi: int, key, accept) -> int:
        """The unit of the largest current key among ``order[lo:hi]`` that ``accept`` admits, or -1.

        Tree values are keys when last seen; counts only fall, so a value is an upper bound, put
        right when it surfaces. Units ``accept`` refuses are hidden for the rest of the search.
        """
        hidden, found, values, leaves = [], -1, tree.values, tree.leaves
        while lo < hi:
            at = tree.argmax(lo, hi)
            if at < 0:
                break
            u = order[at]
            now = key(u)
            if now != values[at + leaves]:
                tree.set(at, now)
                continue
            if accept(u):
                found = u
                break
            hidden.append((at, now))
            tree.set(at, EMPTY)
        for at, now in hidden:
            tree.set(at, now)
        return found

    # --- rounds -----------------------------------------------------------------------------------
    def choose(self) -> tuple[tuple[int, int], int, int | None]:
        """This round's tuple as ``(candidate, partner or -1)``, its size, and its edge (None: a new group)."""
        self.most = {}
        if not self._any_candidate():
            self._next_count()
        key = self._fitting()
        if key is None:
            key = self._opening()
            edge = None
        else:
            first, last, level = self._span(key[3], key[4])
            edge = self.graph.tightest(first, last, level, self.plan.steps)
        return (key[3], key[4]), -key[0], edge

    def placed(self, units: tuple[int, int], new_group: bool, first_edge: int) -> None:
        """Accounts for the units just placed; a new group's edges are new windows."""
        for u in units:
            if u < 0:
                continue
            self.left -= 1
            if self.lone[u]:
                self.class_left[self.level[u]] -= 1
        self._drop_empty_classes()
        if new_group:
            for k in range(first_edge, len(self.graph.y)):
                self._reopen(k)

    def _span(self, u: int, p: int) -> tuple[int, int, int]:
        """The first and last block of a tuple in time, and its level."""
        if p < 0:
            return self.first[u], self.last[u], self.level[u]
        first = self.first[p] if self.start[p] < self.start[u] else self.first[u]
        last = self.last[p] if self.end[p] > self.end[u] else self.last[u]
        return first, last, self.level[p]

    def _any_candidate(self) -> bool:
        members = self.members
        while members:
            u = members[-1]
            if self._is_candidate(u):
                return True
            members.pop()
            if self.unplaced.item(u):
                heapq.heappush(self.waiting, (-self.uoc.item(u), u))
        return False

    def _next_count(self) -> None:
        """Collects the units of the now largest count (M) and queues their cached tuples."""
        waiting, members = self.waiting, []
        self.M = -1
        while waiting:
            neg, u = waiting[0]
            if not self.unplaced.item(u):
                heapq.heappop(waiting)
                continue
            k = self.uoc.item(u)
            if k != -neg:
                heapq.heapreplace(waiting, (-k, u))
                continue
            if k < self.M:
                break
            self.M = k
            members.append(heapq.heappop(waiting))
        self.members = [u for _, u in members]
        self.by_size = [(-self.size[u], u) for u in self.members]
        self.by_index = sorted(self.members)
        heapq.heapify(self.by_size)
        self.fit_heap = []
        for u in self.members:
            cached = self.cache[u]
            if cached is _MISSING or self.stale[u]:
                self.fit_heap.append((self._bound(u), _BOUND, self.version[u], u))
            elif cached is not None and cached[2] and (self.M == 0 or -cached[1] > self.M):
                # Its partner now counts at most M: no better than a bound at the same level.
                self.fit_heap.append((self._bound(u, self._level_of(cached)), _BOUND, self.version[u], u))
            elif cached is not None:
                self.fit_heap.append((cached, _EXACT, self.version[u], u))
        heapq.heapify(self.fit_heap)

    def _level_of(self, key: tuple) -> int:
        return bisect.bisect_left(self.levels, -key[0])

    def _bound(self, u: int, level: int = -1) -> tuple:
        """A key that no tuple of candidate ``u`` can beat, when it fits at no level above ``level``
        (-1: any): a pair with a partner of the largest count among those at the highest level with
        partners left, or its single if no partner is larger than ``u``."""
        top = self.top_class if level < 0 else level
        while top > self.level[u] and not self.class_left[top]:
            top -= 1
        if self.M == 0 or top <= self.level[u]:
            return (-self.size[u], 0, 0, u, -1)
        return (-self.levels[top], -self._most(top), 1, u, -1)

    def _most(self, level: int) -> int:
        """The largest count among the partners of ``level``'s size, seen this round (counts only fall,
        so an older value is still an upper bound, but a looser one)."""
        seen = self.most.get(level)
        if seen is None:
            lo, hi = self.class_lo[level], self.class_hi[level]
            seen = self.most[level] = self.uoc.item(self._top(self.cs_tree, self.cs, lo, hi, self._class_key, _any))
        return seen

    def _reopen(self, k: int) -> None:
        """A new window: the unplaced units inside it that it can hold may have better tuples now."""
        g, c = self.graph, self.plan.conflicts
        lo = NEVER if g.y[k] == SOURCE else c.ends[g.y[k]]
        hi = FOREVER if g.x[k] == SINK else c.starts[g.x[k]]
        i, j = np.searchsorted(self.sorted_starts, [lo, hi])
        inside = self.by_start[i:j]
        units = self.plan.units
        inside = inside[(units.end[inside] <= hi) & (units.size[inside] <= g.cap[k]) & self.unplaced[inside]]
        self.stale[inside] = True
        for u in inside[self.uoc[inside] == self.M].tolist():
            self.version[u] += 1
            heapq.heappush(self.fit_heap, (self._bound(u), _BOUND, self.version[u], u))

    # --- the best fitting tuple -------------------------------------------------------------------
    def _fitting(self) -> tuple | None:
        """The least key of a tuple that fits an edge, or None.

        A heap entry is ``(key, stage, version, unit)``: stage ``_BOUND`` holds a bound (no tuple of
        the unit above its level), stage ``_LEVEL`` a bound at the highest level the unit fits at,
        stage ``_EXACT`` the unit's best tuple when it was computed. Keys only get worse, so each is
        a bound on the unit's best tuple now.
        """
        heap = self.fit_heap
        while heap:
            key, stage, version, u = heap[0]
            if version != self.version[u] or not self._is_candidate(u):
                heapq.heappop(heap)
                continue
            if stage == _EXACT and self._holds(key):
                return key
            if stage == _LEVEL:
                fresh = self._fit_at(u, self._level_of(key))
            else:
                level = self._fit_level(u, self._level_of(key))
                bound = self._bound(u, level) if level > self.level[u] else None
                if bound is not None and bound[2] and len(heap) > 1 and _after(heap, bound):
                    self.version[u] += 1
                    heapq.heapreplace(heap, (bound, _LEVEL, self.version[u], u))
                    continue
                fresh = self._fit_at(u, level) if level >= 0 else None
            self.version[u] += 1
            self.cache[u] = fresh
            self.stale[u] = False
            if fresh is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (fresh, _EXACT, self.version[u], u))
        return None

    def _holds(self, key: tuple) -> bool:
        """Whether a cached tuple still fits, with its partner's count unchanged."""
        u, p = key[3], key[4]
        if p >= 0 and (self.M == 0 or not self.unplaced.item(p) or self.uoc.item(p) != -key[1]):
            return False
        return self.graph.fits(*self._span(u, p))

    def _fit_level(self, u: int, below: int) -> int:
        """The highest level up to ``below`` that has partners for candidate ``u`` and an edge that
        holds ``u`` (fitting is monotone in the level); else ``u``'s own level if its single fits;
        else -1. With M = 0 every pair loses to its partner's own single: only the single counts."""
        g = self.graph
        own, first, last = self.level[u], self.first[u], self.last[u]
        top = min(below, self.top_class)
        if self.M > 0 and top > own:
            if g.fits(first, last, top):
                return top
            if g.fits(first, last, own + 1):
                lo, hi = own + 1, top - 1
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if g.fits(first, last, mid):
                        lo = mid
                    else:
                        hi = mid - 1
                return lo
        return own if g.fits(first, last, own) else -1

    def _fit_at(self, u: int, level: int) -> tuple | None:
        """Candidate ``u``'s best fitting tuple, knowing it fits at ``level`` and at no higher one that
        has partners: a pair at the highest level with a partner in a shared window, else its single."""
        g, own = self.graph, self.level[u]
        widest = None
        for at in range(level, own, -1):
            if self.class_left[at]:
                if widest is None:
                    widest = g.back(self.last[u], own + 1), g.reach(self.first[u], own + 1)
                p = self._partner(u, at, *widest)
                if p >= 0:
                    return (-self.levels[at], -self.uoc.item(p), 1, u, p)
        if level == own or g.fits(self.first[u], self.last[u], own):
            return (-self.size[u], 0, 0, u, -1)
        return None

    def _partner(self, u: int, level: int, widest_back: int, widest_reach: int) -> int:
        """The partner of ``level``'s size with the most interference (then the lowest index) that
        shares a window of that size with candidate ``u``, which fits one, or -1.

        Before ``u`` it must start from ``back`` (the earliest end of a ``y`` whose window reaches past
        ``u``) and end by ``u``'s first live block; after ``u``, start from its last live block's end
        and end by ``reach``; or lie between two live blocks of ``u``. No window at a size above
        ``u``'s is wider than the one just above it (``widest_back`` to ``widest_reach``): a side
        with no block of this size there needs no window of its own.
        """
        g = self.graph
        lo, hi = self.class_lo[level], self.class_hi[level]
        ends, starts = self.end, self.start
        first_start, last_end = self.live_start[u], self.live_end[u]
        best = -1
        j = bisect.bisect_left(self.cs_starts, first_start, lo, hi)
        i = bisect.bisect_left(self.cs_starts, widest_back, lo, j)
        if i < j:
            i = bisect.bisect_left(self.cs_starts, g.back(self.last[u], level), i, j)
            best = self._top(self.cs_tree, self.cs, i, j, self._class_key, lambda p: ends[p] <= first_start)
        i = bisect.bisect_right(self.ce_ends, last_end, lo, hi)
        j = bisect.bisect_right(self.ce_ends, widest_reach, i, hi)
        if i < j:
            j = bisect.bisect_right(self.ce_ends, g.reach(self.first[u], level), i, j)
            after = self._top(self.ce_tree, self.ce, i, j, self._class_key, lambda p: starts[p] >= last_end)
            best = self._better(best, after)
        for gap_start, gap_end in self.gaps.get(u, ()):
            i = bisect.bisect_left(self.cs_starts, gap_start, lo, hi)
            j = bisect.bisect_left(self.cs_starts, gap_end, lo, hi)
            inside = self._top(self.cs_tree, self.cs, i, j, self._class_key, lambda p: ends[p] <= gap_end)
            best = self._better(best, inside)
        return best

    def _better(self, p: int, q: int) -> int:
        """The partner of the larger class key (count, then lower index) of two, either -1 for none."""
        if p < 0 or q < 0:
            return max(p, q)
        return p if self._class_key(p) > self._class_key(q) else q

    # --- the first tuple, when none fits ----------------------------------------------------------
    def _opening(self) -> tuple:
        """The least key of any tuple: it opens a new group."""
        heap = self.by_size
        while not self._is_candidate(heap[0][1]):
            heapq.heappop(heap)
        single = (heap[0][0], 0, 0, heap[0][1], -1)
        if self.M == 0:
            return single
        pair = self._first_pair(single)
        return pair if pair is not None and pair < single else single

    def _first_pair(self, single: tuple) -> tuple | None:
        """The least pair key that beats ``single``: partners in key order, each with the lowest
        candidate free of it, until a class of (size, count) has a pair. When more partners go by
        than there are candidates, every candidate's best free partner is cheaper."""
        tree, order = self.gs_tree, self.gs
        hidden, best, kind = [], None, None
        budget = len(self.members)
        while True:
            at = tree.argmax(0, len(order))
            if at < 0:
                break
            p = order[at]
            now = self._overall_key(p)
            if now != tree.get(at):
                tree.set(at, now)
                continue
            head = (-self.size[p], -self.uoc.item(p), 1)
            if head > single[:3] or (kind is not None and head != kind):
                break
            hidden.append((at, now))
            tree.set(at, EMPTY)
            if len(hidden) > budget:
                best = None
                break
            c, lowest = self._lowest_free(p)
            if c >= 0:
                key = (*head, c, p)
                best, kind = min(best or key, key), head
                if c == lowest:
                    break
        for at, now in hidden:
            tree.set(at, now)
        if len(hidden) > budget:
            return self._first_pair_by_candidate()
        return best

    def _lowest_free(self, p: int) -> tuple[int, int]:
        """The lowest candidate smaller than partner ``p`` and free of it, and the lowest smaller one."""
        heap, size, skipped = self.by_index, self.size[p], []
        free = lowest = -1
        while heap:
            u = heap[0]
            if not self._is_candidate(u):
                heapq.heappop(heap)
                continue
            if self.size[u] < size:
                lowest = u if lowest < 0 else lowest
                if self._free(u, p):
                    free = u
                    break
            skipped.append(heapq.heappop(heap))
        for u in skipped:
            heapq.heappush(heap, u)
        return free, lowest

    def _free(self, u: int, p: int) -> bool:
        """Whether lone unit ``p`` overlaps no live block of unit ``u``."""
        a, b = self.start[p], self.end[p]
        if self.lone[u]:
            return self.end[u] <= a or self.start[u] >= b
        return all(end <= a or start >= b for start, end in self.spans[u])

    def _first_pair_by_candidate(self) -> tuple | None:
        best = None
        for u in self.members:
            if not self._is_candidate(u):
                continue
            p = self._best_free(u)
            if p >= 0 and self.size[p] > self.size[u]:
                key = (-self.size[p], -self.uoc.item(p), 1, u, p)
                best = min(best or key, key)
        return best

    def _best_free(self, u: int) -> int:
        """The partner of the largest size, then count, then lowest index, that overlaps no live block of ``u``."""
        before = bisect.bisect_right(self.ge_ends, self.live_start[u])
        after = bisect.bisect_left(self.gs_starts, self.live_end[u])
        found = [
            self._top(self.ge_tree, self.ge, 0, before, self._overall_key, _any),
            self._top(self.gs_tree, self.gs, after, len(self.gs), self._overall_key, _any),
        ]
        ends = self.end
        for gap_start, gap_end in self.gaps.get(u, ()):
            i = bisect.bisect_left(self.gs_starts, gap_start)
            j = bisect.bisect_left(self.gs_starts, gap_end)
            found.append(self._top(self.gs_tree, self.gs, i, j, self._overall_key, lambda p: ends[p] <= gap_end))
        return max(found, key=lambda p: self._overall_key(p) if p >= 0 else EMPTY)


def _any(_: int) -> bool:
    return True


def _after(heap: list, key: tuple) -> bool:
    """Whether another entry of ``heap`` (whose first entry is being replaced) comes before ``key``."""
    return heap[1][0] < key or (len(heap) > 2 and heap[2][0] < key)


def _live_spans(units: Units, c) -> dict[int, list[tuple[int, int]]]:
    """For every companion unit with a block that takes memory, the time spans of those blocks."""
    starts, ends, live = c.starts.tolist(), c.ends.tolist(), c.live.tolist()
    spans = {}
    for u in np.flatnonzero(~units.lone & (units.size > 0)).tolist():
        spans[u] = [(starts[b], ends[b]) for b in units.members[u].tolist() if live[b]]
    return spans


# --- explicit pairs: the exhaustive search ---------------------------------------------------------
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
    # The byte test of explicit pairs may refuse any edge: try the tuples in order.
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
