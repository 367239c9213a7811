"""libnnc's allocation graph: the machinery both NNC selection rules place blocks with.

A weighted DAG over a dummy source, a dummy sink and the placed blocks. An edge ``(y, x)`` with
``{capacity, offset}`` says that the bytes ``[offset, offset + capacity)`` are used by ``y`` and then,
later, by ``x``, with nothing in between. Putting a block ``a`` on that edge needs ``a`` to start after
``y`` ends and to end before ``x`` starts; it takes the first ``size(a)`` bytes of the edge (the edge
keeps the rest) and adds the edges ``(y, a)`` and ``(a, x)``. Every byte of a group is therefore used
by a chain of blocks ordered in time, and ``a`` never overlaps in time with another user of its bytes.
Every placed block belongs to a group (one libnnc buffer): a new group is as large as its first block;
groups are laid end to end in one arena.

Schedule mapping: jaxalloc intervals are half-open ``[start, end)``; the spec's closed lifetimes are
``[start, end - 1]``. So ``a`` is *after* ``b`` when ``a.start >= b.end``, and the hop is
``a.start - b.end + 1`` (at least 1, as in libnnc); ``R = max(end) - min(start)``, the number of
schedule steps, exceeds every real hop. Explicit conflict pairs are never *after* each other, and an
edge is refused when a placed explicit partner of the block uses any of its bytes, so plans with
explicit pairs stay valid although explicit conflicts are not transitive like time order.

Among edges of equal cost the order of libnnc's search decides: ``(y, sink)`` edges first, then
``(source, x)``, then real edges by ascending hop of ``y``; equal hops go to the lower block index.
"""

from __future__ import annotations

import bisect
import heapq
from typing import NamedTuple

import numpy as np

from jaxalloc.allocators.conflicts import FOREVER, NEVER, Conflicts, Units
from jaxalloc.allocators.problem import Allocation, Problem
from jaxalloc.allocators.trees import EMPTY, MaxTree, raise_in_turn

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


class _ListGraph:
    """Edge fields in Python lists (one edge changes per step, where numpy's per-call cost dominates),
    with the time tables of the blocks that the indexed graphs bucket their edges by."""

    def __init__(self, conflicts: Conflicts) -> None:
        live, starts, ends = conflicts.live, conflicts.starts, conflicts.ends
        end_times, start_times = np.unique(ends[live]), np.unique(starts[live])
        self._end_at = np.searchsorted(end_times, ends).tolist()
        self._start_at = np.searchsorted(start_times, starts).tolist()
        self._ends, self._starts = ends.tolist(), starts.tolist()
        self._end_times, self._start_times = end_times.tolist(), start_times.tolist()
        # For a block, the last end time up to its start and the first start time from its end.
        self._last_end_by = (np.searchsorted(end_times, starts, side="right") - 1).tolist()
        self._first_start_from = np.searchsorted(start_times, ends, side="left").tolist()
        self._sizes = conflicts.sizes.tolist()
        self.y, self.x, self.cap, self.off, self.grp = [], [], [], [], []

    def _store(self, y: int, x: int, cap: int, off: int, grp: int) -> int:
        k = len(self.y)
        self.y.append(y)
        self.x.append(x)
        self.cap.append(cap)
        self.off.append(off)
        self.grp.append(grp)
        return k

    def _tightest_real(self, tree: MaxTree, buckets, first: int, last: int, size: int) -> int | None:
        """The cheapest real edge of capacity ``size`` or more in ``buckets`` (by the end of ``y``) whose
        window holds a string from block ``first`` to block ``last``; ties as in :meth:`GraphPlanner.edge_for`.

        An edge costs ``xstart - yend - (end - start) + 2``: walking the buckets of ``yend`` down from
        ``start``, the narrowest window wins, and the walk stops once no window can be narrower.
        """
        end = self._ends[last]
        end_times, starts, ys, xs, caps = self._end_times, self._starts, self.y, self.x, self.cap
        best, best_width, best_at = None, FOREVER, -1
        at = tree.rightmost(self._last_end_by[first], end)
        while at >= 0:
            for k in buckets[at]:
                width = starts[xs[k]] - end_times[at]
                if (
                    starts[xs[k]] >= end
                    and caps[k] >= size
                    and (
                        width < best_width
                        or (width == best_width and best_at == at and (ys[k], xs[k]) < (ys[best], xs[best]))
                    )
                ):
                    best, best_width, best_at = k, width, at
            # Further left every window is wider, or as wide with a longer hop from y.
            if at == 0 or end - end_times[at - 1] >= best_width:
                break
            at = tree.rightmost(at - 1, end)
        return best

    def _tightest_open(self, first: int, last: int, steps: int, sink: int, source: int, size: int) -> int | None:
        """Of the ``(y, sink)`` edges in sink bucket ``sink`` and the ``(source, x)`` edges in source bucket
        ``source`` (-1: none) that hold ``size`` bytes, the cheaper: a real edge costs at most ``steps - 1``,
        an open one ``steps`` plus its hop, so open edges only count when no real edge fits."""
        if sink < 0 and source < 0:
            return None
        start, end = self._starts[first], self._ends[last]
        sink_cost = steps + start - self._end_times[sink] + 1 if sink >= 0 else FOREVER
        source_cost = steps + self._start_times[source] - end + 1 if source >= 0 else FOREVER
        ys, xs, caps = self.y, self.x, self.cap
        if sink_cost <= source_cost:
            return min((k for k in self._sink_at[sink] if caps[k] >= size), key=lambda k: ys[k])
        return min((k for k in self._source_at[source] if caps[k] >= size), key=lambda k: xs[k])


class IndexedGraph(_ListGraph):
    """The allocation graph of a problem without explicit pairs, indexed for ``tightest`` in O(log n).

    Only the edges that can hold the current ``size`` are indexed (capacity and both real ends at
    least as large); the others wait in a heap until the size, which never grows, drops to them.
    Indexed edges sit in buckets by the end of ``y`` (real and sink edges) or the start of ``x``
    (source edges, mirrored so that the rightmost bucket is the earliest start), and a :class:`MaxTree`
    over each bucket list finds the buckets a block fits in: its value is the latest start of an ``x``
    (real edges), or the bucket's distance from the far end (open edges).
    """

    def __init__(self, conflicts: Conflicts) -> None:
        super().__init__(conflicts)
        self.size = FOREVER
        self._waiting: list[tuple[int, int]] = []
        self._indexed: list[bool] = []
        ne, ns = len(self._end_times), len(self._start_times)
        self._real, self._sink, self._source = MaxTree(ne), MaxTree(ne), MaxTree(ns)
        self._real_at = [[] for _ in range(ne)]
        self._sink_at = [[] for _ in range(ne)]
        self._source_at = [[] for _ in range(ns)]

    def add(self, y: int, x: int, cap: int, off: int, grp: int) -> None:
        """Adds the edge ``(y, x) {cap, off}`` of group ``grp`` (an empty one is not stored)."""
        if cap <= 0:
            return
        k = self._store(y, x, cap, off, grp)
        self._indexed.append(False)
        sizes = self._sizes
        self._wait_or_index(k, min(cap, FOREVER if y == SOURCE else sizes[y], FOREVER if x == SINK else sizes[x]))

    def take(self, k: int, size: int) -> None:
        """Uses the first ``size`` bytes of edge ``k``."""
        self.cap[k] -= size
        self.off[k] += size
        if self.cap[k] < self.size:
            self._unindex(k)
            self._wait_or_index(k, self.cap[k])

    def shrink_to(self, size: int) -> None:
        """Indexes the waiting edges that can hold ``size`` bytes (sizes only shrink)."""
        self.size = size
        waiting = self._waiting
        while waiting and -waiting[0][0] >= size:
            self._index(heapq.heappop(waiting)[1])

    def _wait_or_index(self, k: int, room: int) -> None:
        """Indexes edge ``k`` if its ``room`` (capacity, or a smaller real end) holds the current size."""
        if room >= self.size:
            self._index(k)
        elif room > 0:
            heapq.heappush(self._waiting, (-room, k))

    def _index(self, k: int) -> None:
        y, x = self.y[k], self.x[k]
        self._indexed[k] = True
        if y == SOURCE:
            at = self._start_at[x]
            self._source_at[at].append(k)
            self._source.set(len(self._source_at) - 1 - at, at)
        elif x == SINK:
            at = self._end_at[y]
            self._sink_at[at].append(k)
            self._sink.set(at, len(self._sink_at) - 1 - at)
        else:
            at = self._end_at[y]
            self._real_at[at].append(k)
            if self._starts[x] > self._real.get(at):
                self._real.set(at, self._starts[x])

    def _unindex(self, k: int) -> None:
        if not self._indexed[k]:
            return
        self._indexed[k] = False
        y, x = self.y[k], self.x[k]
        if y == SOURCE:
            at = self._start_at[x]
            self._source_at[at].remove(k)
            self._source.set(len(self._source_at) - 1 - at, at if self._source_at[at] else EMPTY)
        elif x == SINK:
            at = self._end_at[y]
            self._sink_at[at].remove(k)
            self._sink.set(at, len(self._sink_at) - 1 - at if self._sink_at[at] else EMPTY)
        else:
            at = self._end_at[y]
            bucket = self._real_at[at]
            bucket.remove(k)
            self._real.set(at, max((self._starts[self.x[j]] for j in bucket), default=EMPTY))

    def tightest(self, first: int, last: int, steps: int) -> int | None:
        """The edge libnnc picks for a string from block ``first`` to block ``last`` (in time): the
        cheapest indexed edge whose window holds it, ties as in :meth:`GraphPlanner.edge_for`."""
        best = self._tightest_real(self._real, self._real_at, first, last, self.size)
        if best is not None:
            return best
        # A bucket's value is its distance from the far end, so the root alone can tell that none fits.
        ends_by, starts_from = self._last_end_by[first], self._first_start_from[last]
        sink = self._sink.rightmost(ends_by, len(self._sink_at) - 1 - ends_by)
        mirrored = self._source.rightmost(len(self._source_at) - 1 - starts_from, starts_from)
        source = len(self._source_at) - 1 - mirrored if mirrored >= 0 else -1
        return self._tightest_open(first, last, steps, sink, source, self.size)


LEVEL_TREES = 32
"""At most this many capacity thresholds get trees of their own in :class:`LeveledGraph`."""


class LeveledGraph(_ListGraph):
    """The allocation graph indexed at every block size at once, for ``nnc-2018``: its rounds ask at
    many sizes (levels) in turn, larger and smaller, where :class:`IndexedGraph` follows one size down.

    Edges sit in buckets as in :class:`IndexedGraph`, one set of buckets for all levels; every
    capacity threshold has its own trees over them, valued by the edges of that capacity or more.
    With up to ``LEVEL_TREES`` distinct sizes the thresholds are the sizes themselves; otherwise
    they are sizes spread over the sorted blocks, and a question at a size between two thresholds
    skips, bucket by bucket, the edges of the lower threshold's tree that are too small. An edge
    joins the trees of the thresholds its capacity reaches and leaves them as its bytes are used:
    O(thresholds x log n) per edge, and a round never passes over all edges.
    """

    def __init__(self, conflicts: Conflicts, open_ends: bool, sizes: np.ndarray) -> None:
        super().__init__(conflicts)
        self.open_ends = open_ends
        positive = np.sort(sizes[sizes > 0])
        self.levels = np.unique(positive).tolist()
        if len(self.levels) <= LEVEL_TREES:
            thresholds = self.levels
        else:
            picks = positive[(np.arange(LEVEL_TREES) * len(positive)) // LEVEL_TREES]
            thresholds = np.unique(picks).tolist()
        self._thresholds = thresholds
        self._tree_of = (np.searchsorted(thresholds, self.levels, side="right") - 1).tolist()
        ne, ns = len(self._end_times), len(self._start_times)
        self._real = [MaxTree(ne) for _ in thresholds]
        self._real_at: dict[int, list[int]] = {}
        if open_ends:
            self._sink = [MaxTree(ne) for _ in thresholds]
            self._source = [MaxTree(ns) for _ in thresholds]
        self._sink_at: dict[int, list[int]] = {}
        self._source_at: dict[int, list[int]] = {}

    def _place(self, k: int) -> tuple[dict, int, int, list[MaxTree]]:
        """Edge ``k``'s buckets, bucket, tree position and trees."""
        y, x = self.y[k], self.x[k]
        if y == SOURCE:
            at = self._start_at[x]
            return self._source_at, at, len(self._start_times) - 1 - at, self._source
        at = self._end_at[y]
        if x == SINK:
            return self._sink_at, at, at, self._sink
        return self._real_at, at, at, self._real

    def add(self, y: int, x: int, cap: int, off: int, grp: int) -> None:
        """Adds the edge ``(y, x) {cap, off}`` of group ``grp`` (an empty one, or an open end that the
        selection rule never uses, is not stored)."""
        if cap <= 0 or (not self.open_ends and (y == SOURCE or x == SINK)):
            return
        k = self._store(y, x, cap, off, grp)
        if y != SOURCE and x != SINK and self._starts[x] <= self._ends[y]:
            return  # an empty window holds no block: never indexed, never taken
        buckets, at, position, trees = self._place(k)
        buckets.setdefault(at, []).append(k)
        value = self._value_of(k)
        # Lower thresholds hold more edges: once a tree already has as large a value here, so do those below.
        raise_in_turn(reversed(trees[: bisect.bisect_right(self._thresholds, cap)]), position, value)

    def _value_of(self, k: int) -> int:
        """Edge ``k``'s value in its trees: the start of ``x``, or (open edges) the bucket's mark."""
        if self.y[k] == SOURCE:
            return self._start_at[self.x[k]]
        if self.x[k] == SINK:
            return len(self._end_times) - 1 - self._end_at[self.y[k]]
        return self._starts[self.x[k]]

    def take(self, k: int, size: int) -> None:
        """Uses the first ``size`` bytes of edge ``k``; it leaves the trees of the thresholds it no longer reaches."""
        old = self.cap[k]
        self.cap[k] -= size
        self.off[k] += size
        caps, thresholds = self.cap, self._thresholds
        lo, hi = bisect.bisect_right(thresholds, caps[k]), bisect.bisect_right(thresholds, old)
        buckets, at, position, trees = self._place(k)
        bucket = buckets[at]
        if caps[k] == 0:
            bucket.remove(k)
        if lo == hi:
            return
        value = self._value_of(k)
        # The bucket's value at each threshold from the top down: the largest over its edges that reach
        # it. Once another edge holds as large a value, the trees below keep theirs.
        others = sorted(((caps[j], self._value_of(j)) for j in bucket), reverse=True)
        best, i = EMPTY, 0
        for t in range(hi - 1, lo - 1, -1):
            while i < len(others) and others[i][0] >= thresholds[t]:
                best = max(best, others[i][1])
                i += 1
            if best >= value:
                break
            if trees[t].get(position) == value:
                trees[t].set(position, best)

    def _level(self, level: int) -> tuple[int, int, bool]:
        """Level ``level``'s size, its tree, and whether that tree holds exactly the edges of that size or more."""
        size, t = self.levels[level], self._tree_of[level]
        return size, t, self._thresholds[t] == size

    def _holds(self, bucket: list[int], size: int, end: int) -> bool:
        starts, xs, caps = self._starts, self.x, self.cap
        return any(caps[k] >= size and starts[xs[k]] >= end for k in bucket)

    def _any(self, bucket: list[int], size: int) -> bool:
        caps = self.cap
        return any(caps[k] >= size for k in bucket)

    def _sink_by(self, t: int, size: int, ends_by: int) -> int:
        """The latest sink bucket ending by position ``ends_by`` with an edge of ``size`` bytes, or -1."""
        if not self.open_ends:
            return -1
        tree, last = self._sink[t], len(self._end_times) - 1
        at = tree.rightmost(ends_by, last - ends_by)
        while at >= 0 and not self._any(self._sink_at[at], size):
            at = tree.rightmost(at - 1, last - at + 1)
        return at

    def _sink_first(self, t: int, size: int) -> int:
        """The earliest sink bucket with an edge of ``size`` bytes, or -1."""
        if not self.open_ends:
            return -1
        tree = self._sink[t]
        at = tree.leftmost(0, 0)
        while at >= 0 and not self._any(self._sink_at[at], size):
            at = tree.leftmost(at + 1, 0)
        return at

    def _source_from(self, t: int, size: int, starts_from: int) -> int:
        """The earliest source bucket (a start position) from ``starts_from`` on with an edge of
        ``size`` bytes, or -1; ``starts_from=-1`` asks for the latest one anywhere."""
        if not self.open_ends:
            return -1
        tree, last = self._source[t], len(self._start_times) - 1
        if starts_from < 0:
            mirrored = tree.leftmost(0, 0)
            while mirrored >= 0 and not self._any(self._source_at[last - mirrored], size):
                mirrored = tree.leftmost(mirrored + 1, 0)
        else:
            mirrored = tree.rightmost(last - starts_from, starts_from)
            while mirrored >= 0 and not self._any(self._source_at[last - mirrored], size):
                mirrored = tree.rightmost(mirrored - 1, starts_from)
        return last - mirrored if mirrored >= 0 else -1

    def fits(self, first: int, last: int, level: int) -> bool:
        """Whether an edge of level ``level``'s size or more has a window holding blocks ``first`` to ``last``."""
        t = self._tree_of[level]
        end, ends_by = self._ends[last], self._last_end_by[first]
        tree = self._real[t]
        at = tree.rightmost(ends_by, end)
        if at >= 0 and self._thresholds[t] == self.levels[level]:
            return True
        size = self.levels[level]
        while at >= 0:
            if self._holds(self._real_at[at], size, end):
                return True
            at = tree.rightmost(at - 1, end)
        return self._sink_by(t, size, ends_by) >= 0 or self._source_from(t, size, self._first_start_from[last]) >= 0

    def reach(self, first: int, level: int) -> int:
        """The latest start of an ``x`` over the edges of level ``level``'s size or more whose ``y`` ends by
        the start of block ``first`` (``NEVER`` if none): a block after ``first`` shares a window with it
        exactly when it ends by then."""
        size, t, exact = self._level(level)
        ends_by = self._last_end_by[first]
        if self._sink_by(t, size, ends_by) >= 0:
            return FOREVER
        source = self._source_from(t, size, -1)
        best = self._start_times[source] if source >= 0 else NEVER
        tree = self._real[t]
        if exact:
            return max(best, tree.upto(ends_by))
        starts, xs, caps, lowered = self._starts, self.x, self.cap, []
        while True:
            value = tree.upto(ends_by)
            if value <= best:
                break
            at = tree.rightmost(ends_by, value)
            held = max((starts[xs[k]] for k in self._real_at[at] if caps[k] >= size), default=EMPTY)
            if held == value:
                best = value
                break
            # Too small for this level, though not for the tree's threshold: hidden for this question.
            lowered.append((at, value))
            tree.set(at, held)
        for at, value in lowered:
            tree.set(at, value)
        return best

    def back(self, last: int, level: int) -> int:
        """The earliest end of a ``y`` over the edges of level ``level``'s size or more whose ``x`` starts
        from the end of block ``last`` on (``FOREVER`` if none): a block before ``last`` shares a window
        with it exactly when it starts from then on."""
        size, t, exact = self._level(level)
        end = self._ends[last]
        if self._source_from(t, size, self._first_start_from[last]) >= 0:
            return NEVER
        sink = self._sink_first(t, size)
        best = self._end_times[sink] if sink >= 0 else FOREVER
        tree = self._real[t]
        at = tree.leftmost(0, end)
        while at >= 0 and self._end_times[at] < best:
            if exact or self._holds(self._real_at[at], size, end):
                return self._end_times[at]
            at = tree.leftmost(at + 1, end)
        return best

    def tightest(self, first: int, last: int, level: int, steps: int) -> int | None:
        """The edge of level ``level``'s size or more that libnnc picks for a string from block ``first``
        to block ``last`` (in time), as :meth:`GraphPlanner.edge_for` would among those edges."""
        size, t, _ = self._level(level)
        best = self._tightest_real(self._real[t], self._real_at, first, last, size)
        if best is not None:
            return best
        sink = self._sink_by(t, size, self._last_end_by[first])
        source = self._source_from(t, size, self._first_start_from[last])
        return self._tightest_open(first, last, steps, sink, source, size)


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
    """The state of one NNC run: the allocation graph, groups, offsets and interference counts.

    ``indexed`` (``nnc``) asks for the :class:`IndexedGraph` and :meth:`edge_for_unit`'s O(log n)
    search, which is used when the problem has no explicit pairs (their byte test needs every edge),
    and leaves ``uoc`` to the caller. Otherwise ``uoc``, the interference count of every unplaced unit,
    is kept up to date (``nnc-2018``); ``leveled`` asks for the :class:`LeveledGraph` there, again only
    without explicit pairs.
    """

    def __init__(self, problem: Problem, open_ends: bool, indexed: bool = False, leveled: bool = False) -> None:
        self.conflicts = Conflicts(problem)
        self.units = Units(problem, self.conflicts)
        self.indexed = indexed and open_ends and not self.conflicts.has_pairs
        self.leveled = leveled and not indexed and not self.conflicts.has_pairs
        if self.indexed:
            self.graph = IndexedGraph(self.conflicts)
        elif self.leveled:
            self.graph = LeveledGraph(self.conflicts, open_ends, self.units.size)
        else:
            self.graph = AllocationGraph(self.conflicts, open_ends)
        n = problem.n
        self.group = np.full(n, -1, np.int64)
        self.local = np.zeros(n, np.int64)
        self.group_sizes: list[int] = []
        self.block_placed = ~self.conflicts.live
        self.unplaced = self.units.size > 0
        self._sizes = self.conflicts.sizes.tolist()
        self._first, self._last = self.units.first.tolist(), self.units.last.tolist()
        self.uoc = None
        self._lone = bool(self.units.lone.all())
        if not indexed:
            degrees = self.conflicts.degrees()
            self.uoc = np.bincount(self.units.of, weights=degrees, minlength=self.units.count).astype(np.int64)
        self.steps = self.conflicts.steps

    def edge_for_unit(self, unit: int, size: int) -> int | None:
        """The tightest edge that can take ``unit`` (``size`` bytes), as :meth:`edge_for` finds it."""
        if self.indexed:
            self.graph.shrink_to(size)
            return self.graph.tightest(self._first[unit], self._last[unit], self.steps)
        return self.edge_for(self.units.members[unit], size, self.graph.fitting_kept(size))

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
        g = self.graph
        if edge is None:
            grp, y, x, off = len(self.group_sizes), SOURCE, SINK, 0
            self.group_sizes.append(int(size))
        else:
            grp, y, x, off = int(g.grp[edge]), int(g.y[edge]), int(g.x[edge]), int(g.off[edge])
            g.take(edge, size)
        blocks = string.tolist()
        if len(blocks) == 1:
            g.add(y, blocks[0], self._sizes[blocks[0]], off, grp)
            g.add(blocks[0], x, self._sizes[blocks[0]], off, grp)
        else:
            self._add_string(blocks, y, x, off, size, grp)
        for b in blocks:
            self.group[b] = grp
            self.local[b] = off
            self.block_placed[b] = True
            if self.uoc is not None:
                self._forget(b)
        self.unplaced[self.units.of[blocks[0]] if len(blocks) == 1 else self.units.of[blocks]] = False

    def _add_string(self, blocks: list[int], y: int, x: int, off: int, size: int, grp: int) -> None:
        """The edges of a string of blocks in time order put on the bytes of ``(y, x)`` from ``off``."""
        g, sizes = self.graph, self._sizes
        consumed = 0
        for b in blocks:
            if sizes[b] > consumed:
                g.add(y, b, sizes[b] - consumed, off + consumed, grp)
                consumed = sizes[b]
            if consumed == size:
                break
        for i, b in enumerate(blocks):
            own, consumed = sizes[b], 0
            for later in blocks[i + 1 :]:
                shared = min(own, sizes[later])
                if shared > consumed:
                    g.add(b, later, shared - consumed, off + consumed, grp)
                    consumed = shared
                if consumed == own:
                    break
            g.add(b, x, own - consumed, off + consumed, grp)

    def _forget(self, block: int) -> None:
        """A placed block no longer counts in the interference count of the unplaced ones."""
        hit = self.conflicts.conflicting([block])
        hit = self.units.of[hit[~self.block_placed[hit]]]
        if self._lone:
            self.uoc[hit] -= 1  # the hit blocks are distinct, and so are their units
        else:
            np.subtract.at(self.uoc, hit, 1)

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
