"""The plain buffer-assignment problem and its answer, independent of xDSL and of any allocator.

A problem is a list of blocks (byte sizes) and the pairs of blocks that may not share memory. Two
kinds of conflicts exist and may be mixed:

- half-open live intervals ``[start, end)`` on one schedule: blocks conflict when their intervals
  overlap, so a block ending at ``t`` may share memory with one starting at ``t``;
- explicit conflict pairs, for conflicts that are not plain intervals (operands and results of an op
  that cannot run in place, values of sub-graphs).

Every offset must be a multiple of ``alignment``; sizes are rounded up to it (as libnnc pads every
tensor), so plans are built from padded sizes and the peak counts padded bytes. ``companions`` are
groups of blocks that must get the same offset (a loop-carried value and the value that replaces it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def _int_array(values, what: str, ndim: int = 1) -> np.ndarray:
    array = np.asarray(values)
    if array.size == 0:
        array = np.zeros((0,) if ndim == 1 else (0, 2), np.int64)
    if array.ndim != ndim:
        raise ValueError(f"{what} must be a {ndim}-d array, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.equal(np.mod(array, 1), 0)):
            raise ValueError(f"{what} must hold integers")
    array = np.array(array, dtype=np.int64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Problem:
    """Blocks to place in one arena, with the conflicts between them.

    Attributes:
        sizes: byte size of every block (int64, non-negative; a size-0 block takes no memory).
        starts, ends: half-open live intervals on one schedule, both given or both ``None``.
        pairs: explicit conflict pairs, a ``(k, 2)`` int64 array, normalised to ``i < j``, sorted,
            without duplicates; empty when there are none.
        alignment: every offset is a multiple of it; sizes are rounded up to it.
        companions: groups of blocks that must get the same offset; the blocks of a group may not
            conflict with each other, and a block belongs to at most one group.
        names: optional display names, one per block.
    """

    sizes: np.ndarray
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    alignment: int = 1
    companions: tuple[tuple[int, ...], ...] = ()
    names: tuple[str, ...] | None = None
    _padded: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        sizes = _int_array(self.sizes, "sizes")
        n = len(sizes)
        if np.any(sizes < 0):
            raise ValueError("sizes must be non-negative")
        object.__setattr__(self, "sizes", sizes)
        self._init_intervals(n)
        self._init_pairs(n)
        if int(self.alignment) != self.alignment or self.alignment < 1:
            raise ValueError(f"alignment must be a positive integer, got {self.alignment!r}")
        object.__setattr__(self, "alignment", int(self.alignment))
        self._init_companions(n)
        if self.names is not None:
            names = tuple(str(name) for name in self.names)
            if len(names) != n:
                raise ValueError(f"{len(names)} names for {n} blocks")
            object.__setattr__(self, "names", names)
        padded = -(-sizes // self.alignment) * self.alignment
        padded.setflags(write=False)
        object.__setattr__(self, "_padded", padded)

    def _init_intervals(self, n: int) -> None:
        if (self.starts is None) != (self.ends is None):
            raise ValueError("give both starts and ends, or neither")
        if self.starts is None:
            return
        starts = _int_array(self.starts, "starts")
        ends = _int_array(self.ends, "ends")
        if len(starts) != n or len(ends) != n:
            raise ValueError(f"starts/ends have {len(starts)}/{len(ends)} entries for {n} blocks")
        bad = np.flatnonzero(ends <= starts)
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"block {i}: empty interval [{starts[i]}, {ends[i]})")
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "ends", ends)

    def _init_pairs(self, n: int) -> None:
        raw = np.zeros((0, 2), np.int64) if self.pairs is None else self.pairs
        pairs = _int_array(raw, "pairs", ndim=2)
        if pairs.shape[1:] != (2,):
            raise ValueError(f"pairs must have shape (k, 2), got {pairs.shape}")
        if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
            raise ValueError("a conflict pair names a block that does not exist")
        if np.any(pairs[:, 0] == pairs[:, 1]):
            raise ValueError("a block cannot conflict with itself")
        pairs = np.unique(np.sort(pairs, axis=1), axis=0).astype(np.int64)
        pairs.setflags(write=False)
        object.__setattr__(self, "pairs", pairs)

    def _init_companions(self, n: int) -> None:
        groups = tuple(tuple(int(i) for i in group) for group in self.companions)
        seen: set[int] = set()
        for group in groups:
            for i in group:
                if not 0 <= i < n:
                    raise ValueError(f"companion group {group} names a block that does not exist")
                if i in seen:
                    raise ValueError(f"block {i} is in more than one companion group")
                seen.add(i)
        object.__setattr__(self, "companions", tuple(g for g in groups if len(g) > 1))
        if not self.companions:
            return
        pair_set = {(int(a), int(b)) for a, b in self.pairs}
        for group in self.companions:
            for x, i in enumerate(group):
                for j in group[x + 1 :]:
                    if (min(i, j), max(i, j)) in pair_set or self._overlap(i, j):
                        raise ValueError(f"companions {i} and {j} conflict, so they cannot share an offset")

    def _overlap(self, i: int, j: int) -> bool:
        if self.starts is None or self.ends is None:
            return False
        return bool(self.starts[i] < self.ends[j] and self.starts[j] < self.ends[i])

    @property
    def n(self) -> int:
        """Number of blocks."""
        return len(self.sizes)

    @property
    def padded_sizes(self) -> np.ndarray:
        """Sizes rounded up to the alignment: what the plan reserves for each block."""
        return self._padded

    @property
    def has_intervals(self) -> bool:
        return self.starts is not None

    @property
    def has_pairs(self) -> bool:
        return len(self.pairs) > 0

    @classmethod
    def from_intervals(
        cls,
        sizes: Sequence[int] | np.ndarray,
        starts: Sequence[int] | np.ndarray,
        ends: Sequence[int] | np.ndarray,
        **options,
    ) -> Problem:
        """A problem whose conflicts are the overlaps of half-open intervals ``[start, end)``."""
        return cls(sizes=np.asarray(sizes), starts=np.asarray(starts), ends=np.asarray(ends), **options)

    @classmethod
    def from_pairs(cls, sizes: Sequence[int] | np.ndarray, pairs, **options) -> Problem:
        """A problem whose conflicts are only the explicit pairs (no schedule)."""
        return cls(sizes=np.asarray(sizes), pairs=np.asarray(pairs, dtype=np.int64).reshape(-1, 2), **options)


@dataclass(frozen=True, eq=False)
class Allocation:
    """An allocator's answer: an arena offset for every block and the arena size.

    Attributes:
        offsets: byte offset of every block in the arena (int64).
        peak: arena size in bytes, ``max(offset + padded size)`` (0 for an empty problem).
        allocator: the registered name of the allocator that made the plan.
        groups: for NNC plans, the group (libnnc buffer) of every block, -1 for size-0 blocks.
        group_sizes: for NNC plans, the size of every group; groups are laid end to end.
        proven_optimal: for ``search`` plans, whether the peak is proven minimal (``None``: not asked).
    """

    offsets: np.ndarray
    peak: int
    allocator: str
    groups: np.ndarray | None = None
    group_sizes: np.ndarray | None = None
    proven_optimal: bool | None = None


def make_allocation(problem: Problem, offsets: np.ndarray, allocator: str, **extra) -> Allocation:
    """Freezes offsets into an Allocation whose peak is the end of the highest block."""
    offsets = np.array(offsets, dtype=np.int64)
    offsets.setflags(write=False)
    sizes = problem.padded_sizes
    peak = int((offsets + sizes).max()) if problem.n else 0
    return Allocation(offsets=offsets, peak=max(peak, 0), allocator=allocator, **extra)
