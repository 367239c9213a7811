"""What a block plan is: the buffers of a block, the multi-view of each loop-carried position, and
the options and context a block is planned with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from xdsl.ir import Operation, SSAValue


@dataclass
class Carry:
    """How one loop-carried position is stored across rounds."""

    repeat: int
    """R: the number of ring slots (0 for a position yielded unchanged)."""
    initial: tuple[int, ...]
    """Init operands read in place before the ring: `(k,)` (Type II) or `()` when slot 0 is the init's memory."""
    yielded: bool = False
    """Whether the rounds after `initial` read the value the body yielded where it is (`#mem.views` `yielded`;
    with slots, a toggle ring)."""
    holds: tuple[int, ...] = ()
    """For a toggle ring: the other positions holding its values (yielded there too, or passed on),
    whose current values its slots may hold."""
    shift: int = 0
    """The ring slot the rounds after `initial` read first: 1 for a position holding the values of
    an origin whose init operand is the ring's slot 0, as the origin yields its first value into
    slot 1."""


@dataclass(frozen=True)
class Buffer:
    """One buffer of a block: the values sharing it, where it is, and when it is live."""

    values: list[SSAValue]
    offset: int
    slot_size: int
    repeat: int
    """Ring slots laid end to end (1 for a plain buffer)."""
    start: int
    end: int
    """Half-open interval on the block's schedule."""


@dataclass
class BlockPlan:
    """The plan of one block: its buffers in the block's own memory, and its sub-graphs."""

    size: int = 0
    """Bytes of the block's own memory (for the function: the arena)."""
    buffers: list[Buffer] = field(default_factory=list)
    regions: dict[Operation, tuple[int, list["BlockPlan"]]] = field(default_factory=dict)
    """For each region op: the offset of its temporary block and the plans of its regions."""
    carries: dict[Operation, list[Carry]] = field(default_factory=dict)
    phis: dict[Operation, list[tuple[int, ...]]] = field(default_factory=dict)
    """For each case result: the branches in which it is a view of the value the branch yields."""
    phi_values: dict[SSAValue, tuple[SSAValue, ...]] = field(default_factory=dict)
    """For each case result some branch makes a view: the values from outside the case it may be
    there, through the branches' own cases and loops, and the other results of the case it may be."""
    placed_in: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """Values of this block stored in a parent value's memory (a case result, a loop ring)."""
    roots: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """The buffer representative of every value of the block."""
    lifetimes: dict[SSAValue, tuple[int, int]] = field(default_factory=dict)
    """The half-open lifetime of every value of the block on its schedule."""
    kept_until: dict[SSAValue, int] = field(default_factory=dict)
    """For buffer representatives that later values may view (phis, zero-round loop results): the
    end of the last such view."""
    viewers: dict[SSAValue, set[SSAValue]] = field(default_factory=dict)
    """For the same representatives: the values that may be views of them."""
    may_be: dict[SSAValue, list[SSAValue]] = field(default_factory=dict)
    """Values that are always one of other values, read in place (a loop result that only passes
    values on): those values."""
    placed_rings: dict[SSAValue, int] = field(default_factory=dict)
    """Parent values holding a ring of this block's (a branch's loop result): the slots it needs."""
    ring_slots: dict[SSAValue, int] = field(default_factory=dict)
    """Parent values holding a ring of this block's: the bytes of each of its slots, more than the
    value's own where a ring of a loop nested deeper lies in them."""
    toggle_holders: set[SSAValue] = field(default_factory=set)
    """Parent values holding a toggle ring of this block's: a case result, or an enclosing loop's next
    view (`nested_toggles`)."""
    toggled_from: dict[SSAValue, list[SSAValue]] = field(default_factory=dict)
    """For each loop result in a toggle ring: the values it may be besides its slots (from outside the
    loop, init operands read in place, another position's ring that lends it one), read where they are."""
    case_pools: dict[SSAValue, int] = field(default_factory=dict)
    """Case results in a parent's memory (a loop's next view, an enclosing case result's) whose
    branches compute values apart into its free slots past the result's own (`spares` of the
    branches' plans): the slots they take."""
    spares: dict[SSAValue, int] = field(default_factory=dict)
    """Values computed apart from another the same parent value may be, alive together, by value: in
    a loop body into the `n`-th free slot of a toggle ring (`#mem.next<k, n>`), in a branch into
    slot `n` of a case result's memory."""

    @cached_property
    def buffer_roots(self) -> set[SSAValue | None]:
        """The roots of the values in the block's own buffers (read once the block is planned)."""
        return {self.roots.get(m) for buffer in self.buffers for m in buffer.values}

    def spare_slot(self, value: SSAValue) -> int:
        """The `n` of `spares` for the buffer `value` is in (0: none, its parent's first slot)."""
        root = self.roots.get(value)
        return next((n for v, n in self.spares.items() if self.roots[v] is root), 0)


@dataclass(frozen=True)
class Options:
    allocator: str | None
    alignment: int
    include_outputs: bool
    followed_rings: bool = False
    """Inner rings of several slots in the next view of every carried position (`loop`'s `holders`)."""
    nested_toggles: bool = True
    """Inner toggle rings in an enclosing loop's next view, those that hold other positions' values
    too included: where the checker's paths then multiply past its budget, `assign` plans again
    without them."""
    kept_loans: bool = True
    """Lenders that toggle around the values their borrowers may keep for good (`lenders_kept_from`)."""
    pools: bool = True
    """Values a loop body may hand on as its next value, alive together, each in a free slot of a
    toggle ring (`may_pool_into`): with them, the checker's paths can multiply with the place of each."""
    products_outside: bool = False
    """The values of matrix products and convolutions left to XLA's buffers in every block
    (`plan_function`, `BlockPlanner.left_to_xla`)."""
    small_outside: bool = False
    """Every small value left to XLA's buffers, in every block (`small_values`)."""


@dataclass(frozen=True)
class BlockContext:
    """What a block is planned in: the options, and what its parent decides for its values."""

    options: Options
    outside: set
    """Values stored outside the block's memory (arguments, outputs left outside the arena)."""
    dictated: dict
    """Values computed into a parent value's memory (a case result, a loop's next view), by value; the
    block's planner adds those it places there, which its parent reads back."""
    foldable: set
    """Block arguments whose memory a value may be computed into in place where they die."""
    aliases: Sequence[Sequence[SSAValue]] = ()
    """Groups of block arguments that are one value in the rounds that may fold into them."""
    ring_holders: frozenset = frozenset()
    """Parent values that may hold an inner ring of several slots (`holds_ring`)."""
    donated: frozenset = frozenset()
    """Donated arguments: buffers of the function's block from its start."""
    unsettled: frozenset = frozenset()
    """Carried values that round 0 finds where an init operand is, outside their ring in the arena."""
    lent: frozenset = frozenset()
    """Carried values of this body that may be another position's next value (`loop`)."""
    followed: dict = field(default_factory=dict)
    """Carried values of this body held in the toggle ring of another's next view."""
    pools: bool = False
    """Whether values that a parent value may each be, alive together, go apart (`may_pool_into`)."""
    stable: frozenset = frozenset()
    """Carried values of this body that no round computes: they stay where they lie."""


def padded(size: int, alignment: int) -> int:
    return max(-(-size // alignment) * alignment, alignment)
