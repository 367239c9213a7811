"""``search``: a complete search over canonical plans that closes the gap between a greedy plan and the bound.

Greedy planners land within a few percent of the max-live bound on real traces but 30-40 % above the
optimum on hard ones (MiniMalloc's challenging suite), where the optimum usually *is* the bound. This
allocator starts from the best plan of the fast allocators and then asks a decision question, "do the
blocks fit in ``C`` bytes?", for capacities from the bound upward, keeping every smaller plan it finds.
It always returns the best plan found and says (``Allocation.proven_optimal``) whether it is proven
optimal: its peak equals the bound, or the search proved that ``peak - alignment`` bytes do not fit.

The decision procedure is a depth-first search over *canonical* plans, the idea of MiniMalloc (Moffitt,
ASPLOS 2023), written here from the paper's ideas:

- Canonical plans. Take any valid plan and drop its blocks, lowest first, as far as they go: each then
  sits at 0 or on the top of a conflicting block, no block rose, so some optimal plan is canonical.
  Built in order of offset, a canonical block's offset is forced: the highest top among the placed
  blocks it conflicts with (its *low*). The search branches only on which block comes next.
- Symmetry. Offsets never decrease along a branch, and equal offsets go in a fixed rank order, so each
  canonical plan is built along one branch only.
- Dominance. A block is never placed at or above ``min(low + size)`` over the unplaced blocks: the block
  reaching that top would fit entirely below it and can go first.
- Cliques. Blocks live in one time section (or forming a clique of explicit pairs) stack up; the
  unplaced ones lie above both the highest placed one (the clique's *floor*) and the last offset, so
  ``max(floor, offset) + their total size <= C`` must hold in every clique, or the branch is dead.
- Hatless blocks. If the block just placed conflicts with no unplaced block, it influences nothing
  that follows; when its subtree fails, no other choice at this node can succeed.
- Decomposition. When no unplaced block spans a section boundary, the blocks on either side are
  independent: they are solved one after the other, and a failure of either side fails the branch.

Companion groups are placed as one unit at one offset (the canonical argument holds for units: a
unit drops until one of its blocks lands on a conflicting block). Explicit pairs only change who
conflicts with whom; with pairs that are not interval overlaps, greedy cliques of the conflict graph
stand in for the time sections and decomposition is off.

Search times are heavy-tailed: one order of ties finds a plan in a thousand nodes where another
thrashes for a million. So the driver runs rounds with a node budget that doubles each round, and in
each round asks for the bound with MiniMalloc's three static orders in turn, then bisects between
the bound and the best peak with a smaller budget. A search that ran out of nodes only skips that
capacity for the round. An exhausted search refutes its capacity for good, and more: every pruning
test that failed knows the capacity from which it would pass, and below the smallest of those the
search would have built the same tree, so the lower bound jumps there.
"""

from __future__ import annotations

import itertools
import sys
import time

import numpy as np

from jaxalloc.allocators.bound import lower_bound
from jaxalloc.allocators.conflicts import Conflicts, Units
from jaxalloc.allocators.problem import Allocation, Problem, make_allocation

DEFAULT_TIME_LIMIT = 10.0
"""Seconds. Real traces end far sooner (resnet50 is proven optimal in 0.6 s) and a planner inside a
compiler should not stall for minutes; the hardest challenging instances that reach the bound take
up to 10 s, so ``benchmarks/traces.py`` gives search 60 s."""

_FIRST_NODE_BUDGET = 256
_MAX_CLIQUES_FROM_PAIRS = 256
_LARGEST = {"nnc-2018": 5000}
"""Start-plan allocators whose time grows faster than ``greedy-size``'s on some problems, run only up
to this many blocks. ``nnc-2018`` walks the sizes between a candidate's own and the largest that fits
it: near-linear with few distinct sizes, but with thousands (random sizes) it takes 21 times as long
as ``greedy-size`` on 3,000 blocks (1.1 s) and 30 times on 5,000 (3.2 s)."""

_FASTEST = "greedy-size"
_RELATIVE_COST = {"nnc": 3.0, "beam": 3.5, "nnc-2018": 30.0}
"""Planning time relative to ``greedy-size`` on the scaling benchmark (``benchmarks/traces.py
--scaling``); the other greedies take about as long. ``nnc-2018``'s is its worst up to its size
limit (random sizes); on the scaling benchmark it takes about 8 times as long."""

_SECONDS_PER_PAIR = 1e-6
"""Building the search model takes about 0.8 s per million overlapping pairs (13.8 s for the 17.5
million of the 100,000-buffer scaling trace); rounded up, so that search skips a model it cannot finish."""

_PLACED = np.int64(2**62)
"""The low of a placed unit (and of the sentinel member of every clique): above any capacity."""

_FOUND, _REFUTED, _UNDECIDED = "found", "refuted", "undecided"

HEURISTICS = (("width", "area", "total"), ("total", "area", "width"), ("total", "width", "area"))
"""MiniMalloc's static orders: the rank of units at equal offsets, by these keys, larger first.

``width`` is the lifetime, ``area`` the size times the lifetime, ``total`` the largest total size of
the unplaced units in a section the unit lives in (recomputed for every independent part).
"""


def search(problem: Problem, time_limit: float = DEFAULT_TIME_LIMIT) -> Allocation:
    """The smallest plan found in ``time_limit`` seconds, starting from the fast allocators' best.

    On any size it returns within the limit plus the time of one ``greedy-size`` plan (the start-up
    cost: a plan is needed before anything else). On a terminal, stderr shows its progress.
    """
    if not time_limit > 0:
        raise ValueError(f"search time_limit must be a positive number of seconds, got {time_limit!r}")
    progress = _Progress(time.perf_counter())
    deadline = progress.began + float(time_limit)
    align = problem.alignment
    progress.low = bound = -(-lower_bound(problem) // align) * align
    start = _start_plan(problem, deadline, float(time_limit), progress)
    if start.peak <= bound:
        return progress.done(make_allocation(problem, start.offsets, "search", proven_optimal=True))
    if time.perf_counter() + _model_seconds(problem) >= deadline:
        return progress.done(make_allocation(problem, start.offsets, "search", proven_optimal=False))
    bracket = _Bracket(_Model(problem), start.offsets, bound, start.peak, align, progress)
    bracket.narrow(deadline)
    return progress.done(make_allocation(problem, bracket.offsets, "search", proven_optimal=bracket.proven))


def _start_plan(problem: Problem, deadline: float, time_limit: float, progress: _Progress) -> Allocation:
    """The best plan of the fast registered allocators (``best``'s portfolio), within half the time limit.

    ``greedy-size``, the fastest, runs first and always; each other allocator starts only if its
    expected time (``greedy-size``'s times its relative cost) ends within the first half of the limit,
    so that a huge problem still leaves the search some time and ends on time. Those whose relative
    time grows run only up to a size. Equal peaks go to the allocator registered first, as in ``best``.
    """
    from jaxalloc.allocators import portfolio

    runs = portfolio()
    names = [name for name in runs if problem.n <= _LARGEST.get(name, problem.n)]
    began = time.perf_counter()
    plans = {_FASTEST: runs[_FASTEST](problem)}
    unit = time.perf_counter() - began
    progress.report(plans[_FASTEST].peak)
    for name in names:
        if name in plans:
            continue
        if time.perf_counter() + unit * _RELATIVE_COST.get(name, 1.0) > deadline - time_limit / 2:
            continue
        plans[name] = runs[name](problem)
        progress.report(min(plan.peak for plan in plans.values()))
    return min(plans.values(), key=lambda plan: (plan.peak, names.index(plan.allocator)))


def _model_seconds(problem: Problem) -> float:
    """About how long building the search's model takes: it holds every pair of overlapping blocks."""
    if not problem.has_intervals:
        return 0.0
    starts = np.sort(problem.starts)
    pairs = int((np.searchsorted(starts, problem.ends) - np.searchsorted(starts, problem.starts) - 1).sum())
    return pairs * _SECONDS_PER_PAIR


class _Progress:
    """Elapsed time, best peak and bound on one stderr line, refreshed once a second; only on a terminal."""

    def __init__(self, began: float) -> None:
        self.began = began
        self.low = 0
        self.high: int | None = None
        self.shown = began
        self.on = sys.stderr.isatty()

    def report(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high if high is not None else self.high
        self.low = low if low is not None else self.low
        now = time.perf_counter()
        if self.on and now - self.shown >= 1.0 and self.high is not None:
            self.shown = now
            print(
                f"\rsearch: {now - self.began:5.1f} s, best peak {self.high:,} B, bound {self.low:,} B",
                end="",
                file=sys.stderr,
                flush=True,
            )

    def done(self, plan: Allocation) -> Allocation:
        if self.on and self.shown > self.began:
            print(file=sys.stderr)
        return plan


class _Bracket:
    """The optimum lies in ``[low, high]``: ``low`` is not refuted, ``high`` is the peak of ``offsets``."""

    def __init__(
        self, model: _Model, offsets: np.ndarray, low: int, high: int, align: int, progress: _Progress
    ) -> None:
        self.model = model
        self.progress = progress
        self.offsets = offsets
        self.low = low
        self.high = high
        self.align = align

    @property
    def proven(self) -> bool:
        """Whether the best plan is proven optimal (no capacity below its peak fits)."""
        return self.low >= self.high

    def narrow(self, deadline: float) -> None:
        """Rounds of decisions until the bracket closes or the time is up.

        Every round doubles the node budget. It first climbs from ``low`` with each heuristic, since
        on most hard instances the bound is the optimum; then, with an eighth of the budget per
        question, it bisects between ``low`` and ``high``, so that a short time limit or an instance
        above the bound still gets smaller plans.
        """
        budget = max(_FIRST_NODE_BUDGET, 2 * self.model.count)
        for round_ in itertools.count():
            for heuristic in HEURISTICS:
                self.climb(heuristic, budget, deadline)
                if self.proven or time.perf_counter() >= deadline:
                    return
            self.bisect(round_, max(budget // 8, _FIRST_NODE_BUDGET), deadline)
            if self.proven or time.perf_counter() >= deadline:
                return
            budget *= 2

    def climb(self, heuristic, budget: int, deadline: float) -> None:
        """Asks for ``low``; while refuted, asks twice as far above the raised ``low`` as the last time.

        A refutation proves every capacity below it infeasible, so when the bound is far below the
        optimum (a weak clique bound, companions), a few refutations close the gap.
        """
        step = 0
        while not self.proven and time.perf_counter() < deadline:
            capacity = min(self.low + step, self.high - self.align)
            if self.ask(heuristic, capacity, budget, deadline) != _REFUTED:
                return
            step = 2 * step or self.align

    def bisect(self, turn: int, budget: int, deadline: float) -> None:
        """Asks for capacities between ``low`` (just asked) and ``high``, halving the unknown range.

        An undecided capacity is skipped with everything below it; the range ends at ``high``. The
        heuristics take turns, starting with the ``turn``-th.
        """
        skip = self.low + self.align
        for ask in itertools.count(turn):
            if skip >= self.high or time.perf_counter() >= deadline:
                return
            probe = skip + (self.high - self.align - skip) // (2 * self.align) * self.align
            if self.ask(HEURISTICS[ask % len(HEURISTICS)], probe, budget, deadline) != _FOUND:
                skip = max(self.low, probe + self.align)

    def ask(self, heuristic, capacity: int, budget: int, deadline: float) -> str:
        """One decision: a plan lowers ``high``, a refutation raises ``low`` to the next capacity that
        could change the search's answer (``capacity`` + alignment at least)."""
        status, found = _decide(self.model, heuristic, capacity, budget, deadline, self.progress)
        if status == _FOUND:
            self.offsets = self.model.block_offsets(found)
            self.high = int((self.offsets + self.model.padded).max())
        elif status == _REFUTED:
            self.low = max(self.low, found)
        self.progress.report(self.high, self.low)
        return status


def _decide(
    model: _Model, heuristic, capacity: int, budget: int, deadline: float, progress: _Progress | None = None
):
    """Does the problem fit in ``capacity`` bytes?

    Returns found with the unit offsets, refuted with the smallest capacity that is not refuted with
    it, or undecided (out of nodes or time) with None.
    """
    decision = _Decision(model, heuristic, capacity, budget, deadline, progress)
    try:
        found = decision.run()
    except _OutOfBudget:
        return _UNDECIDED, None
    if not found:
        return _REFUTED, max(decision.retry, capacity + model.align)
    return _FOUND, decision.solution


class _OutOfBudget(Exception):
    """The decision ran out of nodes or time: neither a plan nor a proof."""


class _Model:
    """The problem as placement units with their conflicts and cliques, independent of order and capacity.

    Only units with memory take part, numbered ``0..count-1`` in unit order. Per unit it keeps the
    arrays one placement touches: the neighbours and how far each rises (``o + rise`` when the unit
    sits at ``o``), and the cliques it lives in (a slice for a lone block's run of time sections) with
    the bytes it puts in each. Cliques are the time sections (in time order) followed by greedy
    cliques grown from the explicit pairs that are not interval overlaps.

    Attributes:
        count, size: the number of units and their padded sizes (a unit's largest block).
        total: the total bytes of every clique.
        members, member_bounds: the units of every clique, clique by clique, each list ending with the
            sentinel ``count``, whose low is the capacity: the lowest low of a clique without unplaced
            units is then the capacity, which passes the room check, and no clique's list is empty.
        decomposable: no untimed pairs, so time ranges that no unplaced unit spans are independent;
            ``first``/``end`` are every unit's first and past-the-last section, ``cuts`` the number of
            units spanning every boundary between sections ``k`` and ``k + 1``.
        check_tops: explicit pairs may lift a unit above the capacity without any clique noticing.
    """

    def __init__(self, problem: Problem) -> None:
        conflicts = Conflicts(problem)
        units = Units(problem, conflicts)
        self.units = units
        self.padded = problem.padded_sizes
        self.align = problem.alignment
        self.active = np.flatnonzero(units.size > 0)
        local = np.full(units.count, -1, np.int64)
        local[self.active] = np.arange(len(self.active))
        unit_of = local[units.of]
        n = self.count = len(self.active)
        self.size = units.size[self.active]
        live = np.flatnonzero(conflicts.live)
        untimed = _untimed_pairs(problem, conflicts.live)
        timed = _overlapping_pairs(problem, live) if problem.has_intervals else np.zeros((0, 2), np.int64)
        pairs = np.concatenate([timed, untimed]) if len(untimed) else timed
        src, dst, rise = self._edges(pairs, unit_of, len(problem.companions) > 0)
        self.neighbours, self.rises = _split(src, (dst, rise), n)
        self.neighbour_sizes = [self.size[v] for v in self.neighbours]
        self.sections = 0
        parts = []
        if problem.has_intervals:
            parts.append(self._sections(problem, live, unit_of[live]))
        if len(untimed):
            parts.append(self._pair_cliques(conflicts, untimed, unit_of, self.sections))
        empty = (np.zeros(0, np.int64),) * 3
        unit, clique, amount = (np.concatenate(column) for column in zip(*parts)) if parts else empty
        self.cliques_count = k = int(clique.max()) + 1 if len(clique) else 0
        self.total = np.bincount(clique, weights=amount, minlength=k).astype(np.int64)
        cliques, amounts = _split(unit, (clique, amount), n)
        self.cliques = [_as_slice(c) for c in cliques]
        self.amounts = [_as_scalar(a) if isinstance(c, slice) else a for c, a in zip(self.cliques, amounts)]
        by_clique = np.argsort(np.concatenate([clique, np.arange(k)]), kind="stable")
        self.members = np.concatenate([unit, np.full(k, n, np.int64)])[by_clique]
        self.member_bounds = np.searchsorted(np.concatenate([clique, np.arange(k)])[by_clique], np.arange(k + 1))
        # Every unit's cliques, unit by unit, each list ending with the always-empty clique ``k``.
        by_unit = np.argsort(np.concatenate([unit, np.arange(n)]), kind="stable")
        self.unit_cliques = np.concatenate([clique, np.full(n, k, np.int64)])[by_unit]
        self.unit_bounds = np.searchsorted(np.concatenate([unit, np.arange(n)])[by_unit], np.arange(n + 1))
        self.width = self._lifetimes(problem, live, unit_of[live], src)
        self.area = self.size * self.width
        self.decomposable = problem.has_intervals and not len(untimed) and self.sections > 0
        if self.decomposable:
            first = np.full(n, self.sections, np.int64)
            last = np.full(n, -1, np.int64)
            np.minimum.at(first, unit, clique)
            np.maximum.at(last, unit, clique)
            self.first, self.end = first, last + 1
            across = np.zeros(self.sections + 1, np.int64)
            np.add.at(across, first, 1)
            np.add.at(across, last, -1)
            self.cuts = np.cumsum(across)[: self.sections - 1]
            # The sections where placing a unit can change a floor or a lowest low: its neighbours' span.
            reach_first, reach_end = first.copy(), self.end.copy()
            np.minimum.at(reach_first, src, first[dst])
            np.maximum.at(reach_end, src, self.end[dst])
            self.reach_first, self.reach_end = reach_first.tolist(), reach_end.tolist()
        self.check_tops = len(src) > 0 and not self.decomposable

    def _edges(self, pairs: np.ndarray, unit_of: np.ndarray, grouped: bool):
        """Directed unit edges ``(u, v, rise)`` with the largest rise for each ``(u, v)``, from block pairs.

        The block pairs are distinct, so only companion groups can make two edges join the same units.
        """
        i, j = pairs[:, 0], pairs[:, 1]
        src = np.concatenate([unit_of[i], unit_of[j]])
        dst = np.concatenate([unit_of[j], unit_of[i]])
        rise = np.concatenate([self.padded[i], self.padded[j]])
        if not grouped:
            return src, dst, rise
        order = np.lexsort((-rise, dst, src))
        src, dst, rise = src[order], dst[order], rise[order]
        first = np.ones(len(src), bool)
        first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
        return src[first], dst[first], rise[first]

    def _sections(self, problem: Problem, live: np.ndarray, owner: np.ndarray):
        """Time sections between consecutive event times; every block covers a contiguous run of them."""
        starts, ends = problem.starts[live], problem.ends[live]
        times = np.unique(np.concatenate([starts, ends]))
        self.sections = len(times) - 1
        first = np.searchsorted(times, starts)
        counts = np.searchsorted(times, ends) - first
        block = np.repeat(np.arange(len(live)), counts)
        clique = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + first[block]
        return owner[block], clique, self.padded[live][block]

    def _pair_cliques(self, conflicts: Conflicts, untimed: np.ndarray, unit_of: np.ndarray, offset: int):
        """Greedy cliques of the whole conflict graph grown from the blocks of untimed pairs, heaviest first.

        Each grows by the heaviest block that conflicts with all its members; duplicates are dropped.
        They stand in for the time sections where explicit pairs make the graph non-interval.
        """
        sizes = conflicts.sizes
        seeds = np.unique(untimed.ravel())
        seeds = seeds[np.argsort(-sizes[seeds], kind="stable")][:_MAX_CLIQUES_FROM_PAIRS]
        found: dict[tuple[int, ...], None] = {}
        for seed in seeds.tolist():
            members = [seed]
            candidates = np.flatnonzero(conflicts.mask(seed))
            while len(candidates):
                pick = int(candidates[np.argmax(sizes[candidates])])
                members.append(pick)
                candidates = candidates[conflicts.among(pick, candidates)]
            found.setdefault(tuple(sorted(members)), None)
        blocks = [np.array(members, np.int64) for members in found]
        cliques = [np.full(len(b), offset + k, np.int64) for k, b in enumerate(blocks)]
        return unit_of[np.concatenate(blocks)], np.concatenate(cliques), sizes[np.concatenate(blocks)]

    def _lifetimes(self, problem: Problem, live: np.ndarray, owner: np.ndarray, src: np.ndarray) -> np.ndarray:
        """Total lifetime of every unit (its number of neighbours when there are no intervals)."""
        if problem.has_intervals:
            span = problem.ends[live] - problem.starts[live]
            return np.bincount(owner, weights=span, minlength=self.count).astype(np.int64)
        return np.bincount(src, minlength=self.count).astype(np.int64)

    def block_offsets(self, unit_offsets: np.ndarray) -> np.ndarray:
        """Block offsets from the offsets of the units (0 for blocks without memory)."""
        per_unit = np.zeros(self.units.count, np.int64)
        per_unit[self.active] = unit_offsets
        return per_unit[self.units.of]


def _untimed_pairs(problem: Problem, live: np.ndarray) -> np.ndarray:
    """The explicit pairs of blocks with memory whose intervals do not already overlap."""
    pairs = problem.pairs[live[problem.pairs[:, 0]] & live[problem.pairs[:, 1]]]
    if problem.has_intervals and len(pairs):
        i, j = pairs[:, 0], pairs[:, 1]
        pairs = pairs[(problem.starts[i] >= problem.ends[j]) | (problem.starts[j] >= problem.ends[i])]
    return pairs


def _overlapping_pairs(problem: Problem, blocks: np.ndarray) -> np.ndarray:
    """All pairs of ``blocks`` whose half-open intervals overlap, as a ``(k, 2)`` array of block ids."""
    starts, ends = problem.starts[blocks], problem.ends[blocks]
    order = np.argsort(starts, kind="stable")
    blocks, starts, ends = blocks[order], starts[order], ends[order]
    later = np.searchsorted(starts, ends, side="left") - np.arange(len(blocks)) - 1
    first = np.repeat(np.arange(len(blocks)), later)
    step = np.arange(int(later.sum())) - np.repeat(np.cumsum(later) - later, later)
    return np.stack([blocks[first], blocks[first + 1 + step]], axis=1)


def _split(keys: np.ndarray, columns: tuple[np.ndarray, ...], n: int) -> tuple[list[np.ndarray], ...]:
    """Groups ``columns`` by ``keys`` in ``0..n-1``: one array per key and column."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1))
    out = []
    for column in columns:
        values = column[order]
        out.append([values[bounds[k] : bounds[k + 1]] for k in range(n)])
    return tuple(out)


def _as_slice(cliques: np.ndarray) -> slice | np.ndarray:
    """A contiguous ascending run of clique ids as a slice (faster to read and write), else the array."""
    if len(cliques) and int(cliques[-1]) - int(cliques[0]) + 1 == len(cliques) and np.all(np.diff(cliques) == 1):
        return slice(int(cliques[0]), int(cliques[-1]) + 1)
    return cliques


def _as_scalar(amounts: np.ndarray) -> int | np.ndarray:
    """One number when all amounts are equal (a lone block), else the array (a companion unit)."""
    if len(amounts) and np.all(amounts == amounts[0]):
        return int(amounts[0])
    return amounts


class _Decision:
    """One depth-first search for a plan within ``capacity`` bytes.

    State: the low of every unit (``_PLACED`` once placed), the floor and the room (capacity minus the
    unplaced total) of every clique, how many unplaced neighbours every unit has, the rank of every
    unit in the part being solved, and the offsets (``solution``; stale entries of abandoned branches
    are overwritten on the way to a plan). The budget counts nodes; the clock is read before every
    placement (a placement on a huge problem can take milliseconds).
    """

    def __init__(
        self, model: _Model, heuristic, capacity: int, budget: int, deadline: float, progress: _Progress | None
    ) -> None:
        self.model = model
        self.progress = progress
        self.heuristic = heuristic
        self.capacity = int(capacity)
        self.budget = budget
        self.deadline = deadline
        n = model.count
        self.low = np.zeros(n + 1, np.int64)
        self.low[n] = self.capacity
        self.free = np.ones(n, bool)
        self.solution = np.zeros(n, np.int64)
        self.rank = np.zeros(n, np.int64)
        self.open = np.array([len(v) for v in model.neighbours], np.int64)
        self.floor = np.zeros(model.cliques_count, np.int64)
        self.room = self.capacity - np.append(model.total, 0)
        self.cuts = model.cuts.copy() if model.decomposable else None
        self.nodes = 0
        self.retry = _PLACED

    def run(self) -> bool:
        """True with ``solution`` set if a plan fits; False if none does; raises when out of budget."""
        model = self.model
        if model.count == 0:
            return True
        if model.size.max() > self.capacity or self.room.min() < 0:
            self.retry = max(int(model.size.max()), self.capacity - int(self.room.min()))
            return False
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 3 * model.count + 1000))  # up to three frames per placement
        try:
            units, end = np.arange(model.count), model.cliques_count
            if self.cuts is None:
                self._rank(units)
                return self._search(units, 0, end, (-1, -1))
            return self._apart(units, [0, *(np.flatnonzero(self.cuts == 0) + 1).tolist(), end])
        finally:
            sys.setrecursionlimit(limit)

    def _rank(self, units: np.ndarray) -> None:
        """Ranks ``units`` by the heuristic's keys (larger first, then the lower unit id)."""
        model = self.model
        keys = {"width": -model.width[units], "area": -model.area[units]}
        if "total" in self.heuristic:
            # The largest unplaced total of a unit's cliques is the capacity minus their smallest room.
            room = np.minimum.reduceat(self.room[model.unit_cliques], model.unit_bounds[:-1])
            keys["total"] = room[units]
        order = np.lexsort([units] + [keys[name] for name in reversed(self.heuristic)])
        self.rank[units[order]] = np.arange(len(units))

    def _search(self, units: np.ndarray, first: int, end: int, last: tuple[int, int]) -> bool:
        """Places the unplaced ``units`` (whose cliques are ``first:end``) after the last placement.

        ``last`` is the last placement's offset and rank, ``(-1, -1)`` before any.
        """
        self.nodes += 1
        if self.nodes > self.budget:
            raise _OutOfBudget
        choices = self._choices(units, first, end, last)
        if choices is None:
            return True
        for u in map(int, choices):
            if time.perf_counter() > self.deadline:
                raise _OutOfBudget
            if self.progress is not None:
                self.progress.report()
            offset = int(self.low[u])
            key = (offset, int(self.rank[u]))
            saved = self._place(u, offset)
            if saved is not None and self._cliques_fit(u, first, end, offset):
                if self._next(units, first, end, offset, u, key):
                    self._undo(u, saved)
                    return True
            if saved is not None:
                self._undo(u, saved)
            if not self.open[u]:
                break
        return False

    def _choices(self, units: np.ndarray, first: int, end: int, last: tuple[int, int]) -> np.ndarray | None:
        """The units that may come next, in order of offset and rank; None when all are placed.

        A separate function so that every level of the recursion keeps only this array alive (on a
        20,000-block problem, Python lists of candidates would take gigabytes along one branch).
        """
        rest = units[self.free[units]]
        if not len(rest):
            return None
        low = self.low[rest]
        # Dominance: nothing goes at or above the lowest top an unplaced unit can reach. Offsets never
        # decrease, so the fullest clique still to fill must fit above the next offset: a candidate
        # higher than that is *cramped*. (x[x.argmin()] is much faster than x.min() on small arrays.)
        tops = low + self.model.size[rest]
        lowest_top = int(tops[tops.argmin()])
        rank = self.rank[rest]
        last_low, last_rank = last
        allowed = (low < lowest_top) & ((low > last_low) | ((low == last_low) & (rank > last_rank)))
        if first < end:
            room = self.room[first:end]
            fill = self.capacity - int(room[room.argmin()])
            cramped = allowed & (low > self.capacity - fill)
            if cramped.any():
                self._retry_at(int(low[cramped].min()) + fill)
                allowed &= ~cramped
        choices = rest[allowed]
        if len(choices) > 1:
            choices = choices[np.lexsort((rank[allowed], low[allowed]))]
        return choices

    def _next(self, units: np.ndarray, first: int, end: int, offset: int, u: int, key: tuple[int, int]) -> bool:
        """Goes on after placing ``u``, solving apart the time ranges that placing it made independent."""
        if self.cuts is None:
            return self._search(units, first, end, key)
        model = self.model
        across = self.cuts[model.first[u] : model.end[u] - 1]
        across -= 1
        try:
            if across.all():
                return self._search(units, first, end, key)
            cut = np.flatnonzero(across == 0)
            return self._apart(units, [first, *(cut + model.first[u] + 1).tolist(), end])
        finally:
            across += 1

    def _apart(self, units: np.ndarray, points: list[int]) -> bool:
        """Solves one after the other the section ranges between ``points``, which no unplaced unit spans.

        Each range is ranked afresh (the ``total`` key has changed) and searched from offset 0; the
        ranks of the caller's units are restored afterwards.
        """
        rest = units[self.free[units]]
        ranks = self.rank[rest]
        starts, ends = self.model.first[rest], self.model.end[rest]
        try:
            for a, b in zip(points, points[1:]):
                inside = rest[(starts < b) & (ends > a)]
                if not len(inside):
                    continue
                self._rank(inside)
                if not self._search(inside, a, b, (-1, -1)):
                    return False
            return True
        finally:
            self.rank[rest] = ranks

    def _place(self, u: int, offset: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Places ``u`` at ``offset``; returns what to undo, or None (nothing changed) if a neighbour
        would rise above the capacity (only checked with explicit pairs; cliques catch it otherwise)."""
        model = self.model
        neighbours = model.neighbours[u]
        old_low = self.low[neighbours]
        new_low = np.maximum(old_low, offset + model.rises[u])
        if model.check_tops and len(neighbours):
            tops = np.where(new_low < _PLACED, new_low + model.neighbour_sizes[u], 0)
            highest = int(tops[tops.argmax()])
            if highest > self.capacity:
                self._retry_at(highest)
                return None
        self.low[neighbours] = new_low
        self.open[neighbours] -= 1
        cliques, amounts = model.cliques[u], model.amounts[u]
        old_floor = self.floor[cliques].copy()
        self.floor[cliques] = offset + amounts
        self.room[cliques] += amounts
        self.free[u] = False
        self.low[u] = _PLACED
        self.solution[u] = offset
        return old_low, old_floor

    def _undo(self, u: int, saved: tuple[np.ndarray, np.ndarray]) -> None:
        model = self.model
        neighbours = model.neighbours[u]
        self.low[neighbours] = saved[0]
        self.open[neighbours] += 1
        cliques, amounts = model.cliques[u], model.amounts[u]
        self.floor[cliques] = saved[1]
        self.room[cliques] -= amounts
        self.free[u] = True
        self.low[u] = self.solution[u]

    def _cliques_fit(self, u: int, first: int, end: int, offset: int) -> bool:
        """After placing ``u``, every clique's unplaced units still fit above its floor.

        The floor of a clique is the top of its highest placed unit, raised to the last offset (later
        units go no lower) and to the lowest low of its unplaced units (nothing can fill below that).
        With time sections only those in reach of ``u`` changed (the others passed before, and the
        rise of the last offset was checked when choosing ``u``).
        """
        model = self.model
        if self.cuts is not None:
            first, end = max(first, model.reach_first[u]), min(end, model.reach_end[u])
        if first >= end:
            return True
        bounds = model.member_bounds
        lows = self.low[model.members[bounds[first] : bounds[end]]]
        lowest = np.minimum.reduceat(lows, bounds[first:end] - bounds[first])
        base = np.maximum(np.maximum(self.floor[first:end], lowest), offset)
        over = base - self.room[first:end]
        worst = int(over[over.argmax()])
        if worst > 0:
            self._retry_at(self.capacity + worst)
        return worst <= 0

    def _retry_at(self, capacity: int) -> None:
        """Notes that a check failed that would pass from ``capacity`` bytes on.

        If the search ends without a plan, every capacity below the smallest such one would have
        built the same tree (no check depends on the capacity otherwise), so it is refuted too.
        """
        self.retry = min(self.retry, capacity)
