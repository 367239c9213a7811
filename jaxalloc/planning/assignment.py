"""Buffer assignment: every value of a jx function gets a place in one arena.

NNC's scheme, recursively over sub-graphs (nnc-allocator.md sections 6-9):
- In a block, values merge into buffers: a view joins its operand's buffer, and an op that
  may run in place joins the buffer of an operand whose last use it is (same byte size).
- Each region op gets one temporary block of memory, live only at the op, that its regions
  plan their own values into (a case's branches share it; a loop's condition and body too).
- A value a case branch computes and yields is placed where the parent keeps the case result; a
  branch that yields a value from outside makes the result a view of it (NNC's phi), kept alive
  as long as the result (a loop's carried value too: its slot is not written while it is alive);
  one whose value lies in another result's memory (yielded twice, a ring holding both) makes the
  result a view of that result. A branch value that may be any of several values the branch
  computes (a loop rotating them) makes the result's memory hold each in a slot of its own
  (`BlockPlan.spares`), the result a view of whichever it is (where the result lies in an
  enclosing case result's memory, in slots of that memory past its own); so does a value of the
  branch that a loop's ring in the result's memory may end on (an init operand its rounds read in
  place, a value handed back to a toggle ring, or one a chain of cases hands on as either), in a
  slot past the ring's, and the ring of another position whose values that loop's result may be
  (a toggle ring borrowing them), in slots past it.
  Where that value dies at the case and every other branch writes the result only after its last
  read of it (or in place, in the op that reads it last), the result takes its buffer: a case
  folds in place, as an elementwise op does. A case result that is a view in some branches of
  memory outside the block only (an argument, a value of an enclosing block, a loop body's
  carried value, or a value in its own buffer that is one of these) still has memory of
  its own, free then, which a later op (or case) may take where the result dies there: a chain of
  cases, each handing such a value on or computing from it, is one buffer, and a branch that
  yields the chain's last result into its parent's memory makes that result a view of what the
  chain may hand on. Where the chain's results are each in memory of their own instead (a branch
  computes one before its last read of the result before), the parent's memory holds each of them
  that the last may be, in a slot of its own (`spares`).
- Every loop-carried position gets a multi-view: the first rounds read init operands in place
  (Type II), later rounds a ring of R slots in the parent. A value computed in the body at
  position c reaches position p after `delay` rounds when positions pass it on unchanged (a
  rotation); its ring needs as many slots as rounds it stays in use: R = the longest delay
  where the next value can take the oldest one's place (computed in place into it, or born
  after it died), else one more. So R = 1 for scan's stacked `ys`, 2 for `x = f(x)`, k for a
  k-long rotation. Where the init operand of an origin dies at the loop it becomes the ring's
  first slot (the positions holding its values then read the ring from its second slot,
  `Carry.shift`): an enclosing loop's carried value too, where that loop lets the value it
  yields take the carry's memory, so the inner loop's result is in that memory however many
  rounds it runs, none included. A position yielded unchanged, or handed its own init operand, keeps that
  operand. Positions that only pass values round a cycle (a swap, a rotation with nothing
  computed) read the cycle's init operands in place, in turn. A value yielded at several
  positions is in one ring for all of them. A position handed a value the body does not compute
  (one from outside the loop, a constant, an init operand) reads it where it is (`Carry.passed`):
  those values keep their bytes while the loop runs, and are kept alive as long as its result.
  A position whose next value may be a lone position's carried value (an inner loop that runs no
  round hands back its init operand, a branch hands it on), or that of a position no round
  computes, toggles, reading it where it lies: the
  lone position lends it, keeping each value in its ring as many rounds longer as the borrower's
  positions hold it (a slot more each, and one more where its next value is born before their
  last read). Where the borrower may keep the value for good (it may hand back its own), where the
  lender toggles, or where the value is one a rotation hands on or one that other positions hold
  too, the lender (the rotation's origin) toggles instead, its next value going where neither its
  values nor the borrower's are.
  An origin whose values other positions hold too (a rotation, a value yielded at
  several positions) and whose next value may be one of those values toggles among a slot for
  each of these positions and one more (`Carry.holds`), the others reading their values where
  they lie. A position whose next value may be any of several values of the body alive together
  (an inner loop that swaps them, a case that computes from one and hands it on in another
  branch) toggles among a slot for each and one more: the first free slot takes one of them, the
  second free slot the next (`BlockPlan.spares`, `#mem.next<k, n>`), none where the current value is;
  where such a value is a case result, the values its branches compute apart (a chain of cases in a
  branch, one computing from another's result before its last read of it) take the free slots after
  the result's (`BlockPlan.case_pools`).
  Where a case hands on an inner loop's result whose ring is one slot, that ring takes the first
  free slot (a ring in a next view is cut from it) and the case result's own memory the next.
  An inner loop's toggle ring of one position, of a loop that says how many rounds it runs, may lie
  in the next view too: the position then toggles, reading where it is a value the inner ring was
  handed back (`BlockPlan.toggled_from`). So may a case result holding a branch's ring, and an
  inner ring whose init operand its rounds read: that operand takes another free slot of the view.

Arguments stay outside the arena, except donated ones (`jax.jit`'s donation): a buffer of the
function's block from the start to the last use, which values may be computed into in place.

The result is a set of rows on the flattened schedule (one per buffer, one per ring slot)
with absolute offsets: any two rows overlapping in time must be disjoint in address, which
the independent checker verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from jaxalloc.allocators import Problem, allocate
from jaxalloc.dialects import jx
from jaxalloc.frontend.labels import value_label
from jaxalloc.frontend.types import byte_size
from jaxalloc.analysis.inplace import PRODUCTS, in_place_candidates, is_view, viewed
from jaxalloc.analysis.liveness import block_liveness, defined_in, flat_schedule


@dataclass
class Carry:
    """How one loop-carried position is stored across rounds."""

    repeat: int
    """R: the number of ring slots (0 for a position yielded unchanged)."""
    initial: tuple[int, ...]
    """Init operands read in place before the ring: `(k,)` (Type II) or `()` when slot 0 is the init's memory."""
    passed: bool = False
    """Whether the rounds after `initial` read the value the body yields where it is (no ring)."""
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

    def spare_slot(self, value: SSAValue) -> int:
        """The `n` of `spares` for the buffer `value` is in (0: none, its parent's first slot)."""
        root = self.roots.get(value)
        return next((n for v, n in self.spares.items() if self.roots[v] is root), 0)


class _Merge:
    """Union-find over the values of one block: which values share a buffer."""

    def __init__(self) -> None:
        self.parent: dict[SSAValue, SSAValue] = {}

    def find(self, value: SSAValue) -> SSAValue:
        while (up := self.parent.get(value, value)) is not value:
            value = up
        return value


@dataclass(frozen=True)
class _Options:
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
    """Lenders that toggle around the values their borrowers may keep for good (`_keepers`)."""
    pools: bool = True
    """Values a loop body may hand on as its next value, alive together, each in a free slot of a
    toggle ring (`apart`): with them, the checker's paths can multiply with the place of each."""


def plan_function(func: jx.FuncOp, allocator: str | None = "nnc", alignment: int = 64, include_outputs: bool = False,
                  donated: Sequence[int] = (), followed_rings: bool = False, nested_toggles: bool = True,
                  kept_loans: bool = True, pools: bool = True, loop_outputs_inside: bool = False,
                  products_outside: bool = False) -> BlockPlan:
    """Plan every value of `func`; returns the function block's plan (offsets from the arena start).
    With `allocator=None` it merges values into buffers and gives their lifetimes, but places none
    (every offset 0): all that a bound on the rows (`plan_rows`) needs, without the allocation's work.

    The arguments at `donated` (as `jax.jit`'s donation) are buffers of the arena, live from the start
    to their last use and written there when the function is called: later values and outputs
    may take their bytes, an elementwise op or update computed in place into one where it dies.

    `loop_outputs_inside` (outputs outside): an output that a loop or a branch computes (or a view of
    one) stays in the arena all the same. Outside, it would be a buffer of the loop's or branch's
    own beside the arena, into which each round's value is computed apart from its operands in the
    arena; inside, each round updates it where it lies.

    `products_outside`: the values that a matrix product or a convolution of the function's block
    reads or computes (`PRODUCTS`) stay outside the arena, in buffers of XLA's own: XLA computes
    such an op only on buffers of its own, so in the arena each would be held twice, in its slot
    and in the copy XLA reads or writes."""
    options = _Options(allocator, alignment, include_outputs, followed_rings, nested_toggles, kept_loans, pools)
    block = func.body.block
    inside = {block.args[i] for i in donated}
    outside = set(block.args) - inside
    if not include_outputs:
        outside.update(v for v in block.last_op.operands
                       if not (loop_outputs_inside and isinstance(viewed(v).owner, jx.WhileOp | jx.CaseOp)))
    if products_outside:
        outside.update(_products_values(block))
    return _plan_block(block, options, outside, dictated={}, foldable=inside, donated=inside)


def _products_values(block: Block) -> set[SSAValue]:
    """The operands and results of the matrix products and convolutions of `block` (a fused op
    holding one counts as one), but values of loops and branches (multi-views and phis) and
    constants."""
    found: set[SSAValue] = set()
    for op in block.ops:
        inner = op.body.block.ops if isinstance(op, jx.FusedOp) else (op,)
        if any(isinstance(o, jx.PrimOp) and o.primitive.data in PRODUCTS for o in inner):
            found.update(v for v in (*op.operands, *op.results) if not isinstance(v, BlockArgument)
                         and not isinstance(viewed(v).owner, jx.WhileOp | jx.CaseOp | jx.ConstOp))
    return found


def _pad(size: int, alignment: int) -> int:
    return max(-(-size // alignment) * alignment, alignment)


class _BlockPlanner:
    """Plans one block: merges values into buffers, recurses into regions, allocates."""

    def __init__(self, block: Block, options: _Options, outside: set, dictated: dict, foldable: set, aliases=(),
                 ring_holders: frozenset = frozenset(), donated: set = frozenset(), unsettled: frozenset = frozenset(),
                 lent: frozenset = frozenset(), followed: dict | None = None, pools: bool = False,
                 stable: frozenset = frozenset()):
        self.block, self.options, self.ring_holders, self.donated = block, options, ring_holders, donated
        self.pools = pools  # whether values that a parent value may each be, alive together, go apart (`apart`)
        self.outside, self.dictated, self.foldable, self.unsettled = outside, dictated, foldable, unsettled
        self.lent = lent  # carried values of this body that may be another position's next value (`loop`)
        self.followed = followed or {}  # carried values of this body held in the toggle ring of another's next view
        self.stable = stable  # carried values of this body that no round computes: they stay where they lie
        self.ops = list(block.ops)
        self.live = block_liveness(block)
        self.position = {v: i for i, v in enumerate(self.live.values)}
        self.merge = _Merge()
        self.members: dict[SSAValue, list[SSAValue]] = {}
        self.plan = BlockPlan()
        self.rings: dict[SSAValue, tuple[int, int]] = {}  # loop result -> (slot size, repeat)
        self.temporaries: list[tuple[Operation, int, int]] = []  # region op, size, index
        self.keep_alive: list[tuple[SSAValue, SSAValue]] = []  # (value, until): a result may be a view of it
        self.no_fold: set[SSAValue] = set()  # results that may be views of other memory: not overwritten (`views_outside`)
        self.views_only: set[SSAValue] = set()  # loop results that are always one of several other values
        self._reads_inside: dict[Operation, set[SSAValue]] = {}  # region op -> values its regions read
        for group in aliases:  # block arguments that are one value in the rounds that may fold into them
            for value in group[1:]:
                self.join(value, group[0])

    def external(self, value: SSAValue) -> bool:
        """Stored outside this block's memory: defined elsewhere, a constant, or marked outside.

        A loop ring of several slots stays in the arena even when the loop's result is an output:
        the result is whichever slot the last round wrote. So does an output computed into a donated
        argument's memory: the argument is there from the start.
        """
        root = self.merge.find(value)
        if not defined_in(root, self.block) or isinstance(root.owner, jx.ConstOp):
            return True
        group = self.members.get(root, [root])
        if any(self.rings.get(m, (0, 1))[1] > 1 for m in group):
            return False
        return any(m in self.outside for m in group) and not any(m in self.donated for m in group)

    def viewers(self, root: SSAValue) -> set[SSAValue]:
        """The values that may be a view of `root`'s buffer (a case result viewing what a branch hands
        back, a loop result that may be its init operand), through chains of such views."""
        found: set[SSAValue] = set()
        pending = [root]
        while pending:
            source = pending.pop()
            for value, later in self.keep_alive:
                if self.merge.find(value) is source and later not in found:
                    found.add(later)
                    pending.append(self.merge.find(later))
        return found

    def dies_at(self, value: SSAValue, index: int, besides: SSAValue | None = None) -> bool:
        """Whether op `index` is the last to read `value`'s buffer, views of it included (but for
        `besides`)."""
        viewers = self.viewers(self.merge.find(value))
        return self.end_of(value) == index + 1 and all(self.end_of(v) <= index + 1 for v in viewers if v is not besides)

    def end_of(self, value: SSAValue) -> int:
        root = self.merge.find(value)
        return max(int(self.live.end[self.position[m]]) for m in self.members.get(root, [root]))

    def read_inside(self, op: Operation, root: SSAValue) -> bool:
        """Whether a region of `op` reads a value of `root`'s buffer, or one that may be a view of it
        (then a ring cannot take it)."""
        group = set(self.members.get(root, [root]))
        for viewer in self.viewers(root):
            group.update(self.members.get(self.merge.find(viewer), [viewer]))
        if op not in self._reads_inside:  # once per op: a loop asks for each value it carries
            self._reads_inside[op] = {v for inner in op.walk() if inner is not op for v in inner.operands}
        return not group.isdisjoint(self._reads_inside[op])

    def join(self, value: SSAValue, into: SSAValue) -> None:
        root, other = self.merge.find(into), self.merge.find(value)
        if root is other:
            return
        self.merge.parent[other] = root
        self.members.setdefault(root, [root]).extend(self.members.pop(other, [other]))

    def may_take(self, x: SSAValue, index: int, besides: SSAValue | None = None) -> bool:
        """Whether a result of op `index` may take `x`'s buffer: `x` dies there (its views included,
        but for `besides`) and its buffer is this block's to overwrite."""
        root = self.merge.find(x)
        if self.external(x) or x in self.no_fold and not self.views_outside(x):
            return False
        if isinstance(root, BlockArgument) and root not in self.foldable:
            return False
        group = self.members.get(root, [root])
        if any(m in self.dictated for m in group) and root not in self.foldable:
            return False
        if any(self.rings.get(m, (0, 1))[1] > 1 for m in group):
            return False  # a ring's result is in one of its slots, known only when the loop ends
        return self.dies_at(x, index, besides)

    def views_outside(self, x: SSAValue) -> bool:
        """Whether `x` is a case result that, where a branch makes it a view, views only memory outside
        this block's (an argument, a value of an enclosing block), or a value in its own buffer
        that is no view or in turn views only such memory (a chain of cases), or a loop result in a
        ring that may also be only such memory (its init operand, an argument or an enclosing loop's
        carried value, where the loop runs no round): its own memory is free then, and a value
        taking it keeps no value of this block alive any longer. (A loop result that is only ever a
        view has no memory to take.)"""
        root = self.merge.find(x)
        in_memory = isinstance(x.owner, jx.CaseOp) or isinstance(x.owner, jx.WhileOp) and x not in self.views_only
        return in_memory and all(
            self.external(v) or self.carried(v)
            or self.merge.find(v) is root and (v not in self.no_fold or self.views_outside(v))
            for v, later in self.keep_alive if later is x)

    def carried(self, value: SSAValue) -> bool:
        """Whether `value` is a carried value of the loop whose body this block is: in the parent's
        memory (an init operand, a ring slot), where the loop decides whether a round's next value
        may be it (`_toggles`)."""
        return isinstance(value, BlockArgument) and value.block is self.block and isinstance(
            self.block.parent_op(), jx.WhileOp)

    def fold(self, index: int, op: Operation) -> None:
        """NNC's in-place folding: the result takes an operand's buffer where that operand dies here."""
        for p in in_place_candidates(op):
            x = op.operands[p]
            if self.may_take(x, index):
                self.join(op.results[0], x)
                return

    def run(self) -> BlockPlan:
        for index, op in enumerate(self.ops):
            if isinstance(op, jx.YieldOp):
                continue
            if is_view(op):
                self.join(op.results[0], op.operands[0])
            elif isinstance(op, jx.CaseOp):
                self.case(index, op)
            elif isinstance(op, jx.WhileOp):
                self.loop(index, op)
            elif op.results:
                self.fold(index, op)
        self.allocate()
        return self.plan

    def case(self, index: int, op: jx.CaseOp) -> None:
        plans: list[BlockPlan] = []
        # per result, the branches that make it a view, each with the outside values it may be there
        viewed: list[dict[int, set]] = [{} for _ in op.res]
        twins: dict[SSAValue, list[SSAValue]] = {}  # the other results of the case each may be a view of
        for b, branch in enumerate(op.branches):
            block = branch.block
            placed: dict[SSAValue, SSAValue] = {}
            # a value yielded twice is computed into the memory of a result placed in a parent's
            # (a next round's view) where there is one, and the other result views it
            for k in sorted(range(len(op.res)), key=lambda k: op.res[k] not in self.dictated):
                value, result = block.last_op.operands[k], op.res[k]
                if value in placed:  # yielded twice: a view of the result the branch computes it into
                    viewed[k][b] = {None}
                    self.keep_alive.append((placed[value], result))
                    self.no_fold.add(result)
                    twins.setdefault(result, []).append(placed[value])
                elif defined_in(value, block) and not _constant(value):
                    placed[value] = result
                else:  # NNC's phi: the result is a view of what this branch yields, kept alive as long
                    viewed[k][b] = {value}
                    self.keep_alive.append((value, result))
                    self.no_fold.add(result)
            # a result that may be any of several values of the branch holds each in a slot of its own
            # (`spares`), where the branch puts no ring there; where the result lies in a parent's
            # memory (a next view's toggle ring, an enclosing case result's), each goes to a free slot
            # of it past the result's (`case_pools`)
            pools, yielded = all(self.apart(self.dictated[r]) for r in op.res if r in self.dictated), dict(placed)
            while True:
                placed = dict(yielded)  # the branch's planner adds the values it computes into results
                branch_plan = _plan_block(block, self.options, set(), placed, set(),
                                          ring_holders=frozenset(op.res), pools=pools)
                pooled = _pool_sizes(branch_plan)
                if not any(n < branch_plan.placed_rings.get(branch_plan.placed_in.get(v), 0) for v, n in branch_plan.spares.items()):
                    break  # the slots of a ring the branch puts in a result's memory come first
                pools = False
            plans.append(branch_plan)
            for value, result in placed.items():
                if result in self.dictated and result in pooled:  # further free slots of the parent's toggle ring
                    self.plan.case_pools[result] = max(self.plan.case_pools.get(result, 1), pooled.pop(result))
                # a loop's ring the branch yields is the result's memory, as many slots, each as
                # large as the ring's (a slot may hold an inner loop's ring)
                if result in branch_plan.placed_rings or result in pooled or result in branch_plan.ring_slots:
                    slot, before = self.rings.get(result, (byte_size(result.type), 1))
                    slot = max(slot, branch_plan.ring_slots.get(result, slot))
                    self.rings[result] = (slot, max(before, branch_plan.placed_rings.get(result, 1), pooled.get(result, 1)))
                # where the value is wherever it ends (a ring slot, or one of some values from
                # outside the branch or computed into the memory of the result or of another result
                # of the case: a ring holding both), the result is a view of it, not a copy
                sources = _may_be(value, branch_plan, block)
                home = branch_plan.placed_in.get(value, result)
                if sources is None and home is result:
                    continue
                sources = sources or []
                holders = [home, *(branch_plan.placed_in.get(v) for v in sources if _computed_in(v, block))]
                if all(r in op.res for r in holders):
                    outside = {v for v in sources if not _computed_in(v, block)}
                    others = [r for r in dict.fromkeys(holders) if r is not result]
                    for k in (k for k, r in enumerate(op.results) if r is result):
                        viewed[k][b] = outside | ({None} if others else set())
                    self.keep_alive.extend((v, result) for v in [*outside, *others])
                    self.no_fold.add(result)
                    twins.setdefault(result, []).extend(others)
        for k in range(len(op.res)):
            self.case_in_place(index, op, k, plans, viewed[k])
            self.case_views_only(op, k)
        self.plan.regions[op] = (0, plans)
        self.plan.phis[op] = [tuple(v) for v in viewed]
        for result, views in zip(op.res, viewed):
            if views:
                handed = [v for b in sorted(views) for v in views[b] if v is not None]
                self.plan.phi_values[result] = tuple(dict.fromkeys([*handed, *twins.get(result, ())]))
                # values of this block a branch hands on where the result is the loop's next value
                parent = self.dictated.get(result)
                if parent is not None and self.apart(parent):
                    own = [v for v in self.handed_through(handed) if defined_in(v, self.block)
                           and not isinstance(v, BlockArgument) and self.unplaced(v)
                           and byte_size(v.type) == byte_size(result.type)]
                    ringed = [v for v in own if isinstance(v.owner, jx.WhileOp) and self.ring_of(v) == 1]
                    if len(ringed) == 1 and result not in self.rings and result not in self.plan.spares:
                        # a loop's ring of one slot that a branch hands on lies in the parent's first
                        # free slot (a ring in a next view is cut from it), the result's own memory past it
                        self.dictated[ringed[0]] = parent
                        own = [result, *(v for v in own if v is not ringed[0])]
                    self.computed_apart(own, parent)
        self.temporaries.append((op, max(p.size for p in plans), index))

    def case_views_only(self, op: jx.CaseOp, k: int) -> None:
        """A result that every branch hands a value from outside the case (or a constant) is always
        one of them, read where it lies: it needs no memory of its own (unless it lies in a parent's
        memory, or took a value's buffer in place). A branch that yields a value of its own (a
        loop's, a case's) may compute into the result's memory."""
        result = op.res[k]
        yields = [branch.block.last_op.operands[k] for branch in op.branches]
        if (all(_constant(v) or not _inside(v, branch.block) for v, branch in zip(yields, op.branches))
                and result not in self.dictated and result not in self.rings
                and self.members.get(self.merge.find(result), [result]) == [result]):
            self.views_only.add(result)

    def handed_through(self, handed: list[SSAValue]) -> list[SSAValue]:
        """`handed`, and the values each case result among them may in turn be handed (an earlier
        case of this block whose branches hand a value on): a chain of cases, each of whose results
        a parent's memory then holds in a slot of its own, so the last is a view of one of them."""
        found, k = list(dict.fromkeys(handed)), 0
        while k < len(found):
            found.extend(v for v in self.plan.phi_values.get(found[k], ()) if v not in found)
            k += 1
        return found

    def case_in_place(self, index: int, op: jx.CaseOp, k: int, plans: list[BlockPlan], viewed: dict[int, set]) -> None:
        """NNC's in-place folding through a case: where the branches that make result `k` a view
        (`viewed`: of the outside values it may be there) make it a view of one value `x` of this
        block that dies here, or of the result's own memory (a loop's ring in it), and every branch
        that computes the result computes it into its memory only once it has read `x` for the last
        time (or in place, in the op that reads it last), the result takes `x`'s buffer. It is then
        in its own memory in every branch, not a view of other memory, unless `x` may be a view of
        memory outside this block (`views_outside`): then so may the result."""
        result = op.res[k]
        yields = [branch.block.last_op.operands[k] for branch in op.branches]
        handed = set().union(*viewed.values())
        # beside one other value, the carried value of the position whose next view the result is:
        # where a branch hands that back, the position toggles (`_toggles`), its value staying put
        parent = self.dictated.get(result)
        carried = {v for v in handed if parent is not None and self.carried_into(v, parent)}
        if len(handed - carried) == 1:
            handed -= carried
        if len(handed) != 1 or None in handed:
            return
        (x,) = handed
        root = self.merge.find(x)
        group = self.members.get(root, [root])
        if (not self.may_take(x, index, besides=result) or byte_size(x.type) != byte_size(result.type)
                or len({self.dictated[m] for m in [*group, result] if m in self.dictated}) > 1
                or any(v is x for branch in op.branches for j, v in enumerate(branch.block.last_op.operands) if j != k)):
            return
        for value, branch, plan in zip(yields, op.branches, plans):
            if value is not x and not _written_after_reads(branch.block, plan, x, result):
                return
        self.join(result, x)
        if x not in self.no_fold:
            self.no_fold.discard(result)

    def loop(self, index: int, op: jx.WhileOp) -> None:
        body = op.body.block
        args, yields, results = list(body.args), list(body.last_op.operands), list(op.res)
        computed = {v: k for k, v in reversed(list(enumerate(yields)))
                    if defined_in(v, body) and not isinstance(v, BlockArgument) and not _constant(v)}
        # a case or loop result that only hands on carried values and values from outside: no round
        # computes it, so the positions yielding it keep no ring, each a view of the values it may be
        handed = _handed_yields(body, computed)
        computed = {v: k for v, k in computed.items() if v not in handed}
        origins = _carry_origins(args, yields, computed)
        cycles = _rotation_cycles(args, yields)
        # Each computed position c starts a ring; its values reach position p after `delay` rounds.
        longest: dict[int, tuple[int, int]] = {}  # origin -> (delay, position) of its farthest reader
        readers: dict[tuple[int, int], list[int]] = {}  # (origin, delay) -> positions reading one slot
        for p, (c, delay) in origins.items():
            readers.setdefault((c, delay), []).append(p)
            if delay > longest.get(c, (0, c))[0]:
                longest[c] = (delay, p)
        # the other positions holding an origin's values: yielded there too, or passed on in a rotation
        followers = {c: sorted(p for (o, _), group in readers.items() if o == c for p in group if p != c)
                     for c in longest}
        followers = {c: group for c, group in followers.items() if group}
        init_roots = [self.merge.find(v) for v in op.inits]
        # a lone origin whose init operand dies here: that memory is its ring's slot 0 (an enclosing
        # loop's carried value only where every round finds it there, not `unsettled`)
        eligible = set()
        for c in longest:
            init, root = op.inits[c], init_roots[c]
            group = self.members.get(root, [root])
            ring = [results[q] for q in (c, *followers.get(c, ()))] + group
            if (self.settles(c in followers, ring) and not self.external(init) and self.dies_at(init, index)
                    and init_roots.count(root) == 1 and not self.read_inside(op, root)
                    and not any(m in self.no_fold for m in group)
                    and ((root in self.foldable and root not in self.unsettled)
                         or not any(m in self.dictated for m in group))):
                eligible.add(c)
        for p, (c, delay) in origins.items():
            # init operands of this block that the rounds read in place, where the result lies in an
            # enclosing loop's next view: other free slots of that view, so the result is there too
            # after fewer rounds (an origin's in a case result's memory too; a follower's there
            # take slots past the ring, `values_beside_ring`)
            parent = self.dictated.get(results[p])
            if parent is None and p == c:  # an origin whose follower's ring is that memory: one ring
                parent = next((self.dictated[results[f]] for f in followers.get(c, ()) if results[f] in self.dictated), None)
            if parent is None or not self.apart(parent) or (
                    c in eligible if p == c else isinstance(parent.owner, jx.CaseOp)):
                continue
            chain = (c,) if p == c else _chain(p, delay, args, yields)
            if p != c and _past_inits(op, chain):
                continue  # the follower's rounds always end in its ring
            self.computed_apart(self.own_values([op.inits[q] for q in chain], results[p]), parent)
        dictated = dict(zip(args, results)) | {v: results[c] for v, c in computed.items()}
        aliases = [[args[p] for p in group] for group in readers.values() if len(group) > 1]
        # The next value may be computed in place into the oldest value of its ring (read for the last
        # time in this round); in round 0 that is an init operand, read in place, and the result goes
        # to the ring slot instead.
        foldable = {args[p]: yields[c] for c, (_, p) in longest.items()}
        # the next views that may hold an inner ring of several slots, which toggle where one lies there:
        # of a lone position, or of one whose value other positions yield too; with `followed_rings`,
        # also of one whose values a rotation hands on, where the checker's paths can multiply round
        # after round (random program 10659), so `assign` tries it only where the plan without it copies
        holders = frozenset(results[c] for c, (delay, _) in longest.items() if delay == 1 or self.options.followed_rings)
        # each position holding an origin's values (yielded there too, or passed on), by carried value
        origin_of = {args[p]: c for c, group in followers.items() for p in group}
        followed = {a: results[c] for a, c in origin_of.items()}
        # carried values that round 0 finds where an init operand is, outside their ring in the arena
        unsettled = frozenset(
            args[p] for c, (_, p) in longest.items() if (c not in eligible or p != c) and not self.external(results[c]))
        # carried values of lone positions that another position's next value may be (an inner loop
        # that runs no round hands back its init operand): kept in their slot a round longer
        lent = frozenset(args[c] for c in longest if c not in followers)
        # carried values that are never computed, only read where they lie (an init operand, a value
        # from outside the loop): another position's next value may be one of them, read there too
        stable = {args[k]: _stable_values(k, args, yields, op.inits, cycles, handed) for k in range(len(args)) if k not in origins}
        # carried values of origins that other positions follow and of those positions, which another
        # position's next value may be: that origin then toggles around it (`_keepers`)
        borrowable = frozenset(origin_of) | {args[c] for c in followers}
        pools = self.options.pools
        while True:
            # a fresh copy each try: planning the body dictates more values (`computed_into_parent`)
            body_plan = _plan_block(body, self.options, set(), dict(dictated), set(foldable), aliases, holders,
                                    unsettled=unsettled, lent=lent, followed=followed, pools=pools, stable=frozenset(stable))
            # an unsettled value whose next value is not then in its next view would be copied there
            # every round: its inner rings start in its slot instead, copying only where round 0 finds
            # the init operand elsewhere and an inner loop runs no round
            stray = {args[p] for c, (_, p) in longest.items()
                     if args[p] in unsettled and body_plan.placed_in.get(yields[c]) is not results[c]}
            if stray:
                unsettled -= stray
                continue
            # the positions whose next value may be one of several values of the body, each in a free slot
            pooled = {results.index(r): n - 1 for r, n in _pool_sizes(body_plan).items()}
            toggles, able = _toggles(body, body_plan, longest, results, lent | borrowable, followers, frozenset(stable),
                                     frozenset(pooled))
            if any(c not in toggles for c in pooled):
                pools = False  # such a position that cannot toggle: its values are copied there instead
                continue
            # a position may keep the values it lends longer, where it toggles not itself and the borrower
            # never hands its own value back (which would then stay in the lender's slot for good); else
            # the lender toggles too, its next value going where neither its nor the borrower's value is
            keepers, refused = _keepers(toggles, able if self.options.kept_loans else frozenset(), args,
                                        lent | borrowable, origin_of)
            if refused:
                lent, borrowable = lent - refused, borrowable - refused
                continue
            toggles |= {q: set() for q in keepers if q not in toggles}
            lenders = {args.index(a): [c for c, sources in toggles.items() if a in sources and a is not args[c]]
                       for a in lent}
            lenders = {q: borrowers for q, borrowers in lenders.items() if borrowers}
            wrong = {a for a, y in foldable.items() if not self._folds_only(body_plan, body, a, y)}
            wrong |= {args[q] for q in lenders}  # never computed in place of the value it lends
            wrong |= {args[longest[c][1]] for c in toggles if c in followers}  # nor into its oldest value
            # a toggle ring of one slot: the next value computed where the current one is, in place
            # or after its last read; else of two, the next value never computed into the current's
            one_slot = {c for c in toggles if c not in followers and c not in keepers and c not in pooled
                        and _one_slot_toggle(body_plan, args[c], yields[c], results[c])}
            wrong |= {args[c] for c in toggles if c not in one_slot}
            if not wrong & foldable.keys():
                break
            foldable = {a: y for a, y in foldable.items() if a not in wrong}
        cond_plan = _plan_block(op.cond.block, self.options, set(), dict(zip(op.cond.block.args, results)), set())
        # the other positions whose current values a toggle ring's slots may hold: its followers, the
        # borrowers that may keep its values and theirs
        holding = {c: tuple(sorted({*followers.get(c, ()), *keepers.get(c, ()),
                                    *(f for k in keepers.get(c, ()) for f in followers.get(k, ()))})) for c in toggles}
        repeat = {}
        for c, (delay, p) in longest.items():
            if c in toggles:  # a slot for the next value beside the current value of every position holding one
                repeat[c] = 1 if c in one_slot else 2 + len(holding[c]) + pooled.get(c, 0)
            elif c in lenders:  # a lent value stays in its slot as long as the borrower's positions hold it,
                # the slot written again after their last read in the round they read it last, or a round later
                kept = max(longest[k][0] for k in lenders[c])
                repeat[c] = kept + 1 if all(_dies_before(body_plan, args[longest[k][1]], r) for k in lenders[c]
                                            for r in _into(body_plan, yields[c], results[c])) else kept + 2
            else:
                repeat[c] = delay if _shares(body_plan, args[p], yields[c], results[c]) else delay + 1
            # each slot holds an inner loop's ring, whose slots may hold rings of loops nested deeper
            inner, size = body_plan.placed_rings.get(results[c], 1), byte_size(results[c].type)
            inner_slot = max(size, body_plan.ring_slots.get(results[c], size))
            slot = size if inner == 1 and inner_slot == size else inner * _pad(inner_slot, self.options.alignment)
            self.rings[results[c]] = (slot, repeat[c])
        # where a toggle ring's values may lie besides its slots: values from outside the loop, the init
        # operands read in place (its own, its followers'), a lender's ring and its init operand
        elsewhere = {}
        for c, sources in toggles.items():
            found = [v for v in sources if v not in args] + [u for v in sources if v in stable for u in stable[v]]
            if any(v in args and v not in lent - {args[c]} and v not in stable for v in sources):
                found += [op.inits[j] for j in ((() if c in eligible else (c,)) + tuple(followers.get(c, ())))]
            for q in (args.index(v) for v in sources & lent - {args[c]}):
                found += [results[q], *([] if q in eligible else [op.inits[q]])]
            for q in {origin_of.get(v, args.index(v)) for v in sources & borrowable} - {c}:
                found += [results[q], *(op.inits[j] for j in (q, *followers[q]))]
            elsewhere[c] = found
        carries = []
        for k in range(len(args)):
            if yields[k] is args[k] or yields[k] is op.inits[k]:  # every round reads the init operand
                carries.append(Carry(0, (k,)))
                self.join(results[k], op.inits[k])
            elif k in cycles:  # a rotation of carries with nothing computed: each round reads an init in place
                carries.append(Carry(0, cycles[k]))
                self.views_of(results[k], stable[args[k]])
            elif k in origins and origins[k][0] in toggles and k != origins[k][0]:
                # a toggle ring's value that this position holds too (yielded here too, or passed on):
                # read where it is, in that ring, an init operand or a value from outside the loop
                c = origins[k][0]
                carries.append(Carry(0, (k,), passed=True))
                self.views_of(results[k], [results[c], *(op.inits[j] for j in (c, *followers[c])), *elsewhere[c]])
            elif k in origins:
                c, delay = origins[k]
                initial = () if k in eligible else _chain(k, delay, args, yields)
                carries.append(Carry(repeat[c], initial, passed=k in toggles, holds=holding.get(k, ()),
                                     shift=int(k != c and c in eligible)))
                if k in toggles:  # the result may be a value a branch handed back, wherever that is
                    self.keep_alive.extend((v, results[k]) for v in elsewhere[k])
                    self.plan.toggled_from[results[k]] = elsewhere[k]
                    self.no_fold.add(results[k])
                if k in eligible:
                    self.join(results[k], op.inits[k])
                elif k != c:
                    self.join(results[k], results[c])
                if initial:
                    self.no_fold.add(results[k])
                if initial and not _past_inits(op, initial):
                    # after fewer rounds than `initial` lists, the result is an init operand
                    self.keep_alive.extend((op.inits[q], results[k]) for q in initial)
            else:  # handed a value the body does not compute: read where it is
                carries.append(Carry(0, (k,), passed=True))
                self.views_of(results[k], stable[args[k]])
        for result in results:
            self.computed_into_parent(result)
        self.values_beside_ring(op, carries)
        self.plan.carries[op] = carries
        self.plan.regions[op] = (0, [cond_plan, body_plan])
        self.temporaries.append((op, max(cond_plan.size, body_plan.size), index))

    def values_beside_ring(self, op: jx.WhileOp, carries: list[Carry]) -> None:
        """The values this block computes that a loop result in a case result's ring may be instead
        of a slot of it: the init operands its first rounds read in place (where the loop may run
        fewer rounds), a value a branch of its body hands back to a toggle ring, and the values a
        chain of cases may hand on as either. Each goes into a slot of that memory past the ring's
        (`computed_apart`), so the result is a view of wherever its value lies, never copied."""
        for result, carry in zip(op.res, carries):
            parent = self.dictated.get(result)
            if parent is None or not isinstance(parent.owner, jx.CaseOp) or not self.apart(parent) or not carry.repeat:
                continue
            inits = [] if _past_inits(op, carry.initial) else [op.inits[q] for q in carry.initial]
            values = self.handed_through([*inits, *self.plan.toggled_from.get(result, ())])
            self.computed_apart(self.own_values(values, result), parent, past=carry.repeat)

    def own_values(self, values: list[SSAValue], result: SSAValue) -> list[SSAValue]:
        """The values among `values` that this block computes, in no memory but their own, as large
        as the loop result `result`: they may be computed into the memory the result lies in."""
        return [v for v in dict.fromkeys(values) if defined_in(v, self.block) and not _constant(v)
                and not isinstance(v, BlockArgument) and self.unplaced(v) and byte_size(v.type) == byte_size(result.type)]

    def settles(self, followed: bool, ring: list[SSAValue]) -> bool:
        """Whether an origin's init operand may be its ring's slot 0 as far as the positions holding
        its values go (`ring`: the loop results in the ring and the init operand's buffer): a lone
        origin; one with followers where their rotated ring (`Carry.shift`) is slots of its own,
        not an enclosing loop's next view cut in order."""
        return not followed or all(isinstance(self.dictated[v].owner, jx.CaseOp) for v in ring if v in self.dictated)

    def views_of(self, result: SSAValue, values: list[SSAValue]) -> None:
        """`result` is always one of `values`, read in place: it needs no memory of its own, and
        they stay alive as long as it."""
        self.keep_alive.extend((v, result) for v in values)
        self.no_fold.add(result)
        self.views_only.add(result)
        self.plan.may_be[result] = values

    def computed_into_parent(self, result: SSAValue) -> None:
        """A loop result that is one of several values, yielded into a parent value's memory (a case
        result, a next round's view): the one of them this block computes is computed there, so the
        result is where its value is, in that memory or outside this block, and is never copied.
        Where this block computes several (an inner loop that swaps them), alive together, and the
        parent allows (`apart`): each into a slot of its own (`computed_apart`). Where one loop's
        ring holds several of them (a rotation) and the parent is a case result, the result holds
        that ring, and the others a slot each past it. A toggle ring's result that may lie in
        another position's ring of its loop (one it borrows from), yielded into a case result: that
        ring lies in the case result's memory too, past the first (`rings_apart`)."""
        parent = self.dictated.get(result)
        if parent is not None and result in self.plan.toggled_from:
            self.rings_apart(result, parent)
        if parent is None or result not in self.plan.may_be:
            return
        own = [v for v in self.plan.may_be[result] if self.unplaced(v)]
        ringed = [v for v in own if self.ring_of(v)]
        rings = {self.merge.find(v) for v in ringed}
        if len(own) == 1:
            self.dictated[own[0]] = parent
        elif isinstance(parent.owner, jx.CaseOp) and len(rings) == 1 and self.apart(parent):
            (ring,) = rings
            self.dictated[ringed[0]] = parent
            if len({byte_size(v.type) for v in own}) == 1:
                self.computed_apart([v for v in own if self.merge.find(v) is not ring], parent, past=self.ring_of(ring))
        elif self.apart(parent) and len({byte_size(v.type) for v in own}) == 1:
            self.dictated[own[0]] = parent
            self.computed_apart(own[1:], parent)

    def rings_apart(self, result: SSAValue, parent: SSAValue) -> None:
        """The rings of other positions of `result`'s loop that `result` may lie in, each into the
        memory of the case result `parent` past the ring there, where this block's branch allows
        (`apart`) and the ring is in no other memory: `parent` is then where its value is, whichever
        ring holds it."""
        loop = result.owner
        others = [v for v in self.plan.toggled_from[result] if v.owner is loop and v is not result
                  and self.ring_of(v) and self.unplaced(v) and byte_size(v.type) == byte_size(result.type)]
        if not others or not isinstance(parent.owner, jx.CaseOp) or not self.apart(parent):
            return
        first = self.next_spare(parent, self.ring_of(result))
        for value in others:
            self.dictated[value] = parent
            self.plan.spares[value] = first
            first += self.ring_of(value)

    def ring_of(self, value: SSAValue) -> int:
        """The slots of the loop's ring `value`'s buffer is (0 where it is in none)."""
        return max((self.rings[m][1] for m in self.members.get(self.merge.find(value), [value]) if m in self.rings), default=0)

    def unplaced(self, value: SSAValue) -> bool:
        """Whether `value`'s buffer is this block's, in no parent's memory, and no view of others."""
        return not self.external(value) and not any(
            m in self.dictated or m in self.views_only for m in self.members.get(self.merge.find(value), [value]))

    def apart(self, parent: SSAValue) -> bool:
        """Whether values this block computes that `parent` may be can each go to a slot of their own:
        a free slot of a toggle ring (`parent`: the next view of the loop whose body this is), or a
        slot of the memory of a result of the case whose branch this is."""
        return self.pools and parent.owner is self.block.parent_op()

    def computed_apart(self, values: list[SSAValue], parent: SSAValue, past: int = 1) -> None:
        """`values` of this block that `parent` may be, alive together with the value computed into
        it: each into a slot of its own (`spares`), after those the others take: a free slot of a
        loop position's toggle ring, or a slot of a case result's memory, from slot `past` on (past
        the ring the result holds). Not a loop's ring: one in a next view is cut from its first free
        slot."""
        values = [v for v in values if not self.ring_of(v)]
        for n, value in enumerate(values, start=self.next_spare(parent, past)):
            self.dictated[value] = parent
            self.plan.spares[value] = n

    def next_spare(self, parent: SSAValue, past: int) -> int:
        """The first slot of `parent`'s memory, from slot `past` on, past those its spares take
        (a ring there as many as its slots)."""
        return max([past, *(n + max(self.ring_of(v), 1) for v, n in self.plan.spares.items() if self.dictated.get(v) is parent),
                    *(self.plan.spares.get(r, 0) + k for r, k in self.plan.case_pools.items() if self.dictated.get(r) is parent)])

    def holds_ring(self, value: SSAValue, group: list[SSAValue], repeat: int) -> bool:
        """Whether the parent value `value` is computed into may hold `group`'s ring of `repeat`
        slots: a case result (given as many), or a loop's next view (of a lone position, which
        toggles between two slots as large as the ring, for several), where the ring's loop result
        is in that memory however many rounds it runs (init operands read in place are computed
        there too): so the position's value is always in the slot last computed into, and which
        slot that is depends on the round alone. A toggle ring's result may also be a value it was
        handed back (`toggled_from`): the position then toggles, reading it where it is."""
        parent = self.dictated[value]
        if repeat > 1 and parent not in self.ring_holders:
            return False
        if isinstance(parent.owner, jx.CaseOp):
            return True
        for v in group:
            if v in self.rings:
                owner = v.owner
                if isinstance(owner, jx.CaseOp):
                    if repeat == 1:
                        continue  # a case result holding a branch's one-slot ring
                    # the rings of the branches' loops that the case result holds, none of a case deeper
                    held = [(r, branch) for branch in self.plan.regions[owner][1]
                            for r, into in branch.placed_in.items() if into is v and r.owner in branch.regions]
                    if not all(self.ring_starts_there(r, branch, parent, group, owner)
                               if isinstance(r.owner, jx.WhileOp)
                               else not any(r in b.placed_rings for b in branch.regions[r.owner][1])
                               for r, branch in held):
                        return False
                elif not isinstance(owner, jx.WhileOp) or not self.ring_starts_there(v, self.plan, parent, group):
                    return False
        return True

    def ring_starts_there(self, result: SSAValue, plan: BlockPlan, parent: SSAValue, group: list[SSAValue],
                          case: jx.CaseOp | None = None) -> bool:
        """Whether the ring of the loop result `result` (planned in `plan`: this block's, or a branch's
        of `case`) may lie in `parent`, a next view: what its first rounds read in place is computed
        there, is the position's own carried value, stays where it lies (a value from outside the loop
        whose body this is, a carried value no round computes), or is lent."""
        loop = result.owner
        carries = plan.carries[loop]
        if any(c.shift and c.repeat > 1 and (r in group or case) for r, c in zip(loop.results, carries)):
            return False  # a rotated ring (`settles`) is not an enclosing loop's next view cut in order
        carry = carries[loop.results.index(result)]
        inits = [] if _past_inits(loop, carry.initial) else [loop.operands[q] for q in carry.initial]
        if case is not None and any(_inside(i, branch.block) for i in inits for branch in case.branches):
            return False
        return not (carry.passed and not carry.repeat) and all(
            self.computed_into(i, parent) or self.carried_into(i, parent) or self.handed_in(i) or i in self.lent
            or i in self.stable or self.followed.get(i) is parent or self.next_of_another(i, parent) for i in inits)

    def next_of_another(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is the next value of another position of the loop whose next view `parent`
        is, computed into that position's next view: the position of `parent` then borrows it (an
        inner loop that runs no round hands it back), which that position lends (`_toggles`)."""
        loop, into = parent.owner, self.dictated.get(value)
        return (into is not parent and into is not None and into.owner is loop and self.block.parent_op() is loop
                and self.block.last_op.operands[loop.results.index(into)] is value)

    def carried_into(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is the carried value of the position whose next view is `parent` (an
        inner loop that runs no round hands it back: the position toggles, so it is never
        written over while it is that position's value)."""
        return isinstance(value, BlockArgument) and value.block is self.block and self.dictated.get(value) is parent

    def handed_in(self, value: SSAValue) -> bool:
        """Whether `value` comes from outside the loop whose body this block is, or is a constant: an
        inner loop that runs no round hands it back, and the position whose next view holds the
        inner ring then toggles (`_toggles`), reading it where it is."""
        return _constant(value) or not defined_in(value, self.block)

    def holds_toggle(self, value: SSAValue) -> bool:
        """Whether `value` is in a toggle ring: a loop result whose rounds read what the body yielded,
        or a case result holding a branch's."""
        owner = value.owner
        if isinstance(owner, jx.WhileOp) and owner in self.plan.carries:
            carry = self.plan.carries[owner][owner.results.index(value)]
            return carry.passed and carry.repeat > 0
        if isinstance(owner, jx.CaseOp) and owner in self.plan.regions:
            return any(value in branch.toggle_holders for branch in self.plan.regions[owner][1])
        return False

    def computed_into(self, value: SSAValue, parent: SSAValue) -> bool:
        """Whether `value` is computed into `parent`'s memory (not a block argument living there)."""
        if self.external(value):
            return False
        root = self.merge.find(value)
        group = self.members.get(root, [root])
        return any(self.dictated.get(m) is parent for m in group) and not any(isinstance(m, BlockArgument) for m in group)

    @staticmethod
    def _folds_only(plan: BlockPlan, body: Block, arg: BlockArgument, allowed: SSAValue) -> bool:
        """A result computed into a carried value's memory must be the one yield allowed there, and only it."""
        root = plan.roots.get(arg)
        merged = [v for v, r in plan.roots.items() if r is root and v is not arg]
        if not merged:
            return True
        others = [y for y in body.last_op.operands if y is not allowed]
        return allowed in merged and not any(plan.roots.get(v) is root for v in [*others, *body.args] if v is not arg)

    def allocate(self) -> None:
        groups: dict[SSAValue, list[SSAValue]] = {}
        for value, start, end in zip(self.live.values, self.live.start.tolist(), self.live.end.tolist()):
            root = self.merge.find(value)
            self.plan.roots[value] = root
            self.plan.lifetimes[value] = (start, end)
            groups.setdefault(root, []).append(value)
        viewed = {self.merge.find(v) for v, _ in self.keep_alive}
        self.plan.viewers = {root: self.viewers(root) for root in viewed}
        # the end of the longest-lived value that may be a view of each
        until = self.plan.kept_until = {root: max((self.end_of(v) for v in self.plan.viewers[root]), default=0)
                                        for root in viewed}
        keys, sizes, starts, ends, repeats = [], [], [], [], []
        for root, values in groups.items():
            if self.external(root):
                continue
            ring = max((self.rings[v] for v in values if v in self.rings), key=lambda r: r[1], default=None)
            placed = [v for v in values if v in self.dictated]
            toggle = any(self.holds_toggle(v) for v in values)
            if placed and toggle and not isinstance(self.dictated[placed[0]].owner, jx.CaseOp) and not self.options.nested_toggles:
                placed = []  # its slots are fixed offsets instead
            # a ring of several slots fits a case result (given as many), or a loop's next view of a
            # position that toggles between two slots as large as the ring
            if placed and (ring is None or self.holds_ring(placed[0], values, ring[1])):
                if ring is not None and ring[1] > 1 and not any(v in self.plan.spares for v in values):
                    self.plan.placed_rings[self.dictated[placed[0]]] = ring[1]  # (a ring past it counts in `spares`)
                if ring is not None:
                    self.plan.ring_slots[self.dictated[placed[0]]] = ring[0]
                if toggle:
                    self.plan.toggle_holders.add(self.dictated[placed[0]])
                self.plan.placed_in.update((v, self.dictated[placed[0]]) for v in values)
                continue
            if all(v in self.views_only for v in values):
                continue
            slot, repeat = ring if ring is not None else (max(byte_size(v.type) for v in values), 1)
            slot = _pad(slot, self.options.alignment)
            keys.append(values)
            sizes.append(slot * repeat)
            repeats.append(repeat)
            starts.append(min(int(self.live.start[self.position[v]]) for v in values))
            ends.append(max(until.get(root, 0), *(int(self.live.end[self.position[v]]) for v in values)))
        for op, size, index in self.temporaries:
            keys.append(op)
            sizes.append(_pad(size, self.options.alignment) if size else 0)
            repeats.append(1)
            starts.append(index)
            ends.append(index + 1)
        if not keys:
            return
        if self.options.allocator is None:  # buffers and lifetimes only, every one at offset 0
            offsets = [0] * len(keys)
        else:
            allocation = allocate(Problem.from_intervals(sizes, starts, ends, alignment=self.options.alignment), self.options.allocator)
            offsets, self.plan.size = allocation.offsets, int(allocation.peak)
        for key, offset, size, repeat, start, end in zip(keys, offsets, sizes, repeats, starts, ends):
            if isinstance(key, list):
                self.plan.buffers.append(Buffer(key, int(offset), size // repeat, repeat, start, end))
            else:
                self.plan.regions[key] = (int(offset), self.plan.regions[key][1])


def _plan_block(block: Block, options: _Options, outside: set, dictated: dict, foldable: set, aliases=(),
                ring_holders: frozenset = frozenset(), donated: set = frozenset(),
                unsettled: frozenset = frozenset(), lent: frozenset = frozenset(), followed: dict | None = None,
                pools: bool = False, stable: frozenset = frozenset()) -> BlockPlan:
    return _BlockPlanner(block, options, outside, dictated, foldable, aliases, ring_holders, donated, unsettled,
                         lent, followed, pools, stable).run()


@dataclass(frozen=True)
class Row:
    """One buffer (or one ring slot) on the flattened schedule, at its absolute arena offset."""

    name: str
    size: int
    offset: int
    start: int
    end: int
    region: str
    repeat: int
    label: str = ""
    """What defines the buffer, for people: the primitive and the user's source line."""


def plan_rows(func: jx.FuncOp, plan: BlockPlan) -> list[Row]:
    """The checkable form of a plan: rows overlapping in time must be disjoint in address."""
    spans = flat_schedule(func)
    rows: list[Row] = []

    def visit(block: Block, block_plan: BlockPlan, base: int, region: str) -> None:
        ops = list(block.ops)
        for buffer in block_plan.buffers:
            begin, finish = spans[ops[buffer.start]][0], spans[ops[buffer.end - 1]][1]
            named = next((v for v in buffer.values if v.name_hint), buffer.values[0])
            name, label = named.name_hint or "%", value_label(named)
            for slot in range(buffer.repeat):
                offset = base + buffer.offset + slot * buffer.slot_size
                rows.append(Row(name, buffer.slot_size, offset, begin, finish, region, buffer.repeat, label))
        for op, (offset, plans) in block_plan.regions.items():
            for i, (child_region, child_plan) in enumerate(zip(op.regions, plans)):
                visit(child_region.block, child_plan, base + offset, f"{region}/{op.name}#{ops.index(op)}.{i}")

    visit(func.body.block, plan, 0, func.sym_name.data)
    return rows


def _written_after_reads(block: Block, plan: BlockPlan, x: SSAValue, result: SSAValue) -> bool:
    """Whether `block` (a branch, planned as `plan`) writes `result`'s memory only after its last read
    of `x` (from outside the branch) or of a view of it, or in place of `x` in the op that reads it
    last, where that op computes its one result elementwise from `x`. Never where `result`'s memory
    holds a ring of several slots, or one past its first slot (`spares`), which is not where `x` is."""
    if result in plan.placed_rings or any(isinstance(v.owner, jx.WhileOp) for v in plan.spares if plan.placed_in.get(v) is result):
        return False
    ops = list(block.ops)
    of_x = {x} | {v for v, root in plan.roots.items() if root is x}
    for op in ops:  # and the values of the branch that may be views of it: a case's phis
        if isinstance(op, jx.CaseOp) and op in plan.phis:
            of_x.update(r for k, r in enumerate(op.results)
                        if any(op.branches[b].block.last_op.operands[k] in of_x for b in plan.phis[op][k]))
        of_x.update(r for r in op.results if any(v in of_x for v in plan.may_be.get(r, ())))
    reads = [i for i, op in enumerate(ops) if any(v in of_x for inner in op.walk() for v in inner.operands)]
    written = [plan.lifetimes[v][0] for v, parent in plan.placed_in.items() if parent is result]
    if not reads or not written or max(reads) < min(written):
        return True
    last = ops[max(reads)]
    if max(reads) > min(written) or not any(r in plan.placed_in for r in last.results):
        return False
    if isinstance(last, jx.WhileOp):
        return _ring_starts_in(last, of_x, plan, result)
    candidates = in_place_candidates(last)
    return not last.regions and bool(candidates) and all(p in candidates for p, v in enumerate(last.operands) if v in of_x)


def _ring_starts_in(loop: jx.WhileOp, of_x: set, plan: BlockPlan, result: SSAValue) -> bool:
    """Whether `loop` reads `x` only as the init operand of positions whose one-slot rings are in
    `result`'s memory: with `x` there too, round 0 reads it in that slot, as every later round reads
    the value before it, and the body writes the next value where a round may."""
    inits = [c for c, v in enumerate(loop.inits) if v in of_x]
    return bool(inits) and all(plan.placed_in.get(loop.res[c]) is result for c in inits) and not any(
        v in of_x for region in loop.regions for inner in region.walk() for v in inner.operands)


def _dies_before(plan: BlockPlan, x: BlockArgument, root_y: SSAValue, besides: frozenset = frozenset(),
                 read_there: bool = False) -> bool:
    """Whether carried value `x` is dead before the buffer of the next round's value is born (its
    views but `besides` included), or as the op that makes it reads `x` last, where `read_there`."""
    x_root = plan.roots.get(x, x)
    kept = plan.kept_until.get(x_root, 0)
    if besides & plan.viewers.get(x_root, set()):
        roots = {plan.roots.get(v, v) for v in plan.viewers[x_root] - besides}
        kept = max((end for m, (_, end) in plan.lifetimes.items() if plan.roots.get(m) in roots), default=0)
    x_end = max(kept, *(plan.lifetimes[v][1] for v, r in plan.roots.items() if r is x_root))
    y_start = min(plan.lifetimes[v][0] for v, r in plan.roots.items() if r is root_y)
    return x_end <= y_start + read_there


def _carry_origins(args, yields, computed) -> dict[int, tuple[int, int]]:
    """For each carried position fed by a value computed in the body, possibly through positions that
    pass it on unchanged (a rotation), the position whose ring holds it (the first to yield it) and
    the delay in rounds."""
    position = {a: k for k, a in enumerate(args)}
    origins = {}
    for k in range(len(args)):
        source, delay, seen = k, 1, {k}
        while yields[source] in position and yields[source] is not args[source]:
            source = position[yields[source]]
            delay += 1
            if source in seen:
                break
            seen.add(source)
        else:
            if yields[source] in computed and yields[k] is not args[k]:
                origins[k] = (computed[yields[source]], delay)
    return origins


def _shares(plan: BlockPlan, arg: BlockArgument, value: SSAValue, result: SSAValue) -> bool:
    """Whether each buffer computed into the next view of `result` (`_into`) is the carried value
    `arg`'s own, computed in place, or is written after `arg`'s last read: then one slot holds the
    current and next value."""
    return all(r is plan.roots.get(arg) or _dies_before(plan, arg, r) for r in _into(plan, value, result))


def _pool_sizes(plan: BlockPlan) -> dict[SSAValue, int]:
    """For each parent value that values of the block are computed into apart (`spares`): the number
    of slots they take, the first one's included (a ring there as many as its slots)."""
    sizes: dict[SSAValue, int] = {}
    for value, n in plan.spares.items():
        parent = plan.placed_in.get(value)
        if parent is not None:
            sizes[parent] = max(sizes.get(parent, 1), n + _ring_length(plan, value))
    for result, k in plan.case_pools.items():
        parent = plan.placed_in.get(result)
        if parent is not None:
            sizes[parent] = max(sizes.get(parent, 1), plan.spare_slot(result) + k)
    return sizes


def _ring_length(plan: BlockPlan, value: SSAValue) -> int:
    """The slots of the ring the loop result `value` is (1 for any other value)."""
    loop = value.owner
    if isinstance(loop, jx.WhileOp) and loop in plan.carries:
        return max(plan.carries[loop][loop.results.index(value)].repeat, 1)
    return 1


def _into(plan: BlockPlan, value: SSAValue, result: SSAValue) -> set[SSAValue]:
    """The buffers computed into the next view of `result`: the next value `value`'s, and any
    other placed there (a loop result's)."""
    return {plan.roots.get(value)} | {
        plan.roots[v] for v, r in plan.placed_in.items() if r is result and not isinstance(v, BlockArgument)
    }


def _one_slot_toggle(plan: BlockPlan, arg: BlockArgument, value: SSAValue, result: SSAValue) -> bool:
    """Whether a toggle ring needs one slot alone: the next value is computed where the current
    one is (`_shares`). An inner loop's ring in the next view must be one slot whose first round
    reads the current value there and nothing else reads it (`_ring_starts_in`): its rounds then
    compute in place from the current value, and its results, which may be the current value (no
    round run), lie in this same slot, where they keep nothing else alive."""
    if result in plan.toggle_holders:
        return False  # an inner toggle ring may hand back the current value after writing over it
    loops = {v.owner for v, r in plan.placed_in.items()
             if r is result and not isinstance(v, BlockArgument) and isinstance(v.owner, jx.WhileOp)}
    if not loops:
        return _shares(plan, arg, value, result)
    root = plan.roots.get(arg, arg)
    of_arg = {arg} | {v for v, r in plan.roots.items() if r is root}
    if result in plan.placed_rings or not all(_ring_starts_in(loop, of_arg, plan, result) for loop in loops):
        return False
    results = frozenset(r for loop in loops for r in loop.results)
    rings = {plan.roots.get(r, r) for r in results if plan.placed_in.get(r) is result}
    return all(r is root or _dies_before(plan, arg, r, results, read_there=r in rings)
               for r in _into(plan, value, result))


def _toggles(body: Block, plan: BlockPlan, longest: dict, results, lent: frozenset,
             followers: dict, stable: frozenset, pooled: frozenset) -> tuple[dict[int, set[SSAValue]], frozenset[int]]:
    """The origins whose next value may be a view (a case result a branch hands the carried
    value back at, or a value from outside the loop), or is somewhere in an inner loop's ring: they
    toggle between two slots, the next value going where the current one is not (or keep to one,
    `_one_slot_toggle`). For each, the values from outside the loop it may be, and its own carried
    value where a round may hand that back.

    An inner ring holding the values of several positions lies in one position's next view: the
    others read their values in that ring too, so they toggle where that position does (never moved
    into a slot of their own, it is never moved over their values) and are otherwise moved out of it.
    A position that may be handed another position's carried value toggles where that one is `lent`,
    or where no round computes it (`stable`: it stays where it lies).
    An origin whose values other positions hold (`followers`: yielded there too, or passed on in a
    rotation) toggles too, where its next value may be one of those: among a slot for each of these
    positions and one more, the next value going where no position's value is (however their
    values may lie, one slot is free). A position whose next value may be one of several values of
    the body (`pooled`: each computed into a free slot of its own) toggles too. Also returns the
    origins that need not toggle but may, their next value always computed into their next view
    (or in place of the oldest value of their ring, a follower's, which toggling forbids)."""
    args, yields = body.args, body.last_op.operands
    found, able = {}, set()
    for c in longest:
        into = frozenset({plan.placed_in[yields[c]]} if yields[c] in plan.placed_in else ())
        sources = _view_sources(yields[c], args[c], ((body, plan),), body, into)
        allowed = lent | stable | {args[p] for p in followers.get(c, ())}
        if sources is not None and any(v in args and v is not args[c] and v not in allowed for v in sources):
            sources = None
        holder = plan.placed_in.get(yields[c], results[c])
        if sources is not None and (sources or holder in plan.placed_rings or c in pooled):
            found[c] = sources, holder
        elif sources == set() and (holder is results[c] or holder in {results[p] for p in followers.get(c, ())}):
            able.add(c)
    toggled = {results[c] for c, (_, holder) in found.items() if holder is results[c]}
    toggles = {c: sources for c, (sources, holder) in found.items() if holder is results[c] or holder in toggled}
    return toggles, frozenset(able - toggles.keys())


def _keepers(toggles: dict[int, set[SSAValue]], able: frozenset[int], args, lent: frozenset,
             origin_of: dict[SSAValue, int]) -> tuple[dict[int, set[int]], set[SSAValue]]:
    """The lenders whose values a borrower may keep for good, by lender: the borrower may hand its
    own value back, so a value it took stays where it is round after round, or the lender toggles
    (its slots follow no round count), or the value is one a rotation hands on (`origin_of`: the
    lender is the origin whose ring holds it). Such a lender toggles, holding the borrowers' values,
    where its next value is always computed into its next view (`able`); a position that toggles so
    may hold another's value in turn, as its own borrowers see. Also the lent values of lenders that
    cannot toggle: not lent, after all."""
    keepers: dict[int, set[int]] = {}
    refused = set()
    while more := {(q, a, c) for c, sources in toggles.items() for a in sources & lent - {args[c]} - refused
                   if (q := origin_of.get(a, args.index(a))) != c and c not in keepers.get(q, ())
                   and (a in origin_of or args[c] in sources or q in toggles or q in keepers)}:
        for q, a, c in more:
            if q in toggles or q in able:
                keepers.setdefault(q, set()).add(c)
            else:
                refused.add(a)
    return keepers, refused


def _view_sources(value: SSAValue, arg: BlockArgument, scopes: tuple[tuple[Block, BlockPlan], ...], body: Block,
                  into: frozenset[SSAValue], top: bool = True):
    """The values the yield `value` may be a view of where it is not computed into its next view
    (the memory of `into`: the value placed there, and the case results in it whose branches are
    looked into): `arg` itself, values from outside the loop `body`, another position's carried
    value, or that position's next value computed into its next view (or into a case result that
    is), which is its carried value in the next round and which it lends alike (empty: none). None
    where it may be a view of anything else (the body's own memory). `scopes`: the blocks from
    `body` down to the one that yields `value`, each with its plan; a value is looked up in the plan
    of the block that defines it (a branch may hand on a value of an enclosing block)."""
    if value is arg or not _computed_in(value, body) or value in body.args:
        return {value}  # (another position's carried value: `loop` tells whether it stays put)
    plan = next((p for b, p in reversed(scopes) if defined_in(value, b)), scopes[0][1])
    yields = list(body.last_op.operands)
    q = yields.index(value) if value in yields and value is not yields[arg.index] else None
    if not top and q is not None and plan.placed_in.get(value) is body.parent_op().results[q]:
        return {body.args[q]}  # another position's next value, in its next view
    if not _inside(root := plan.roots.get(value, value), body):  # a view of a value from outside
        return {root}
    if root is not value and not _computed_in(root, scopes[-1][0]) and _computed_in(root, body):
        # a branch's view of a value of an enclosing block of the body: where that value is
        return _view_sources(root, arg, scopes, body, into, top)
    if value in plan.may_be:
        parts = [_view_sources(v, arg, scopes, body, into, False) for v in plan.may_be[value]]
    elif isinstance(value.owner, jx.WhileOp) and plan.placed_in.get(value) in into:
        # an inner loop's ring in the next view: or an init operand read in place, or a value handed back
        besides = _besides_ring(plan, value)
        if not besides:
            return set()  # always in its ring
        parts = [_view_sources(v, arg, scopes, body, into, False) for v in besides]
    elif isinstance(value.owner, jx.CaseOp) and value.owner in plan.phis:
        case, k = value.owner, value.owner.results.index(value)
        if len(plan.phis[case][k]) < len(case.branches) and plan.placed_in.get(value) not in into:
            return None  # some branch computes it in memory of the body's own
        # a branch computing into the result's memory computes into `into` where the result is there
        there = into | {value} if plan.placed_in.get(value) in into else into
        parts = [
            _view_sources(case.branches[b].block.last_op.operands[k], arg,
                          (*scopes, (case.branches[b].block, plan.regions[case][1][b])), body, there, False)
            for b in plan.phis[case][k]
        ]
    else:
        holder, results = plan.placed_in.get(value), body.parent_op().results
        if not top and holder in yields and holder is not yields[arg.index] and (
                scopes[0][1].placed_in.get(holder) is results[yields.index(holder)]):
            return {body.args[yields.index(holder)]}  # in a case result that is another position's next value
        if not top and value in plan.spares and holder in results and holder is not results[arg.index]:
            return {body.args[results.index(holder)]}  # in a free slot of another position's toggle ring
        computed_there = holder in into and plan.roots.get(value) is not plan.roots.get(arg)
        # the yield itself is computed into its next view, where it is placed in one (else it lies in
        # the body's own memory, a loop's ring the view cannot hold)
        return set() if top and into or computed_there else None
    return None if None in parts else set().union(*parts)


def _ends_in(value: SSAValue, plan: BlockPlan, block: Block) -> list[SSAValue] | None:
    """For a value of `block` planned as `plan` that is not where its buffer is: the values it may
    be instead of being in its memory (a loop result in a ring: the init operands read in place
    before it, none where the loop says how many rounds it runs; a loop result that only passes
    values on: those; a view of a value from outside the block: that value; a case result that
    some branches make a view: the values from outside the case, or other results of it, that it
    may be there, `phi_values`). None for any other value."""
    if value in plan.may_be:
        return plan.may_be[value]
    root = plan.roots.get(value, value)
    if not _inside(root, block):
        return [root]
    loop = value.owner
    if isinstance(loop, jx.WhileOp) and loop in plan.carries:
        carry = plan.carries[loop][loop.results.index(value)]
        besides = _besides_ring(plan, value)
        # a toggle ring's result may be what it was handed back: told where that lies outside its loop
        # ring, another position's ring too (one it borrows from)
        if carry.repeat:
            return besides
        if _past_inits(loop, carry.initial):
            return []  # always in its ring
    handed = plan.phi_values.get(value)
    return None if handed is None else list(handed)


def _besides_ring(plan: BlockPlan, value: SSAValue) -> list[SSAValue]:
    """The values a loop result in a ring may be instead of a slot of it: the init operands read in
    place before it, where the loop may run fewer rounds, and a toggle ring's values handed back
    (`toggled_from`), where they are."""
    loop = value.owner
    carry = plan.carries[loop][loop.results.index(value)]
    inits = [] if _past_inits(loop, carry.initial) else [loop.operands[q] for q in carry.initial]
    return list(dict.fromkeys([*inits, *plan.toggled_from.get(value, ())]))


def _may_be(value: SSAValue, plan: BlockPlan, block: Block) -> list[SSAValue] | None:
    """`_ends_in`, through the values of `block` it names that may in turn be others (a case result
    handing on another one's value): every value `value` may be instead of being in its memory.
    None where it is always there."""
    found = _ends_in(value, plan, block)
    if found is None:
        return None
    found, k = list(found), 0
    while k < len(found):
        if _computed_in(found[k], block):
            found.extend(v for v in _ends_in(found[k], plan, block) or () if v not in found)
        k += 1
    return found


def _past_inits(loop: jx.WhileOp, initial: Sequence[int]) -> bool:
    """Whether `loop` says it runs at least as many rounds as a position reads init operands in
    place (`initial`: their positions): its result at that position is then always in its ring."""
    return loop.rounds is not None and loop.rounds.data >= len(initial)


def _computed_in(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or a region nested in it, and not a constant (which
    stays outside the arena)."""
    return _inside(value, block) and not _constant(value)


def _constant(value: SSAValue) -> bool:
    """Whether `value` is a constant or a view of one (a literal reshaped): outside the arena, never
    computed into a parent's memory."""
    return isinstance(viewed(value).owner, jx.ConstOp)


def _inside(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or in a region nested in it."""
    at = value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
    while at is not None:
        if at is block:
            return True
        parent = at.parent_op()
        at = parent.parent_block() if parent is not None else None
    return False


def _stable_values(k: int, args, yields, inits, cycles: dict, handed: dict) -> list[SSAValue]:
    """The values a position that no round computes may hold: its init operand where it keeps it,
    those of its rotation (`_rotation_cycles`), or those it is handed (`_handed_on`)."""
    if yields[k] is args[k] or yields[k] is inits[k]:
        return [inits[k]]
    if k in cycles:
        return [inits[q] for q in cycles[k]]
    return list(dict.fromkeys([inits[k], *_handed_on(k, args, yields, inits, handed)]))


def _handed_on(k: int, args, yields, inits, handed: dict) -> list[SSAValue]:
    """The values a position handed what the body does not compute may hold after a round: those
    yielded along the positions passing values on, directly or through the cases and inner loops
    of `handed` (`_handed_yields`): init operands read in place, values from outside the loop,
    constants."""
    position = {a: j for j, a in enumerate(args)}
    values, seen, todo = [], {k}, [yields[k]]
    while todo:
        for value in handed.get(v := todo.pop(), [v]):
            if value not in position:
                values.append(value)
                continue
            j = position[value]
            values.append(inits[j])
            if j not in seen:
                seen.add(j)
                todo.append(yields[j])
    return values


def _handed_yields(body: Block, computed: dict) -> dict[SSAValue, list[SSAValue]]:
    """The yields of a loop body among `computed` that no round computes, each with the values it
    may be: a case result or an inner loop result that only hands on the body's carried values and
    values from outside the loop (`_hands_on`), where none of those carried values may be computed
    in an earlier round (a position that computes, or is handed what one computes)."""
    position = {a: j for j, a in enumerate(body.args)}
    yields = list(body.last_op.operands)
    handed = {v: found for v in computed if (found := _hands_on(v, body)) is not None}
    computing: set[int] = set()
    while more := {k for k, y in enumerate(yields) if k not in computing and (
            (y in computed and y not in handed) or any(position.get(a) in computing for a in handed.get(y, [y])))}:
        computing |= more
    return {v: found for v, found in handed.items() if not any(position.get(a) in computing for a in found)}


def _hands_on(value: SSAValue, body: Block) -> list[SSAValue] | None:
    """The values `value`, of loop body `body`, may be where every path hands one on unchanged:
    the body's carried values and values from outside the loop, through the branches of cases and
    the init operands and rounds of inner loops. None where some path computes it."""
    found, todo, seen = [], [value], set()
    while todo:
        if (v := todo.pop()) in seen:
            continue
        seen.add(v)
        loop = v.block.parent_op() if isinstance(v, BlockArgument) else v.owner
        if not _inside(v, body) or isinstance(v, BlockArgument) and v.block is body:
            found.append(v)
        elif isinstance(loop, jx.WhileOp) and (not isinstance(v, BlockArgument) or v.block is loop.body.block):
            # an inner loop's carried value or result: its init operand, or what its body yields there
            todo += [loop.inits[v.index], loop.body.block.last_op.operands[v.index]]
        elif isinstance(v.owner, jx.CaseOp):
            todo += [branch.block.last_op.operands[v.index] for branch in v.owner.branches]
        else:
            return None
    return found


def _rotation_cycles(args, yields) -> dict[int, tuple[int, ...]]:
    """For each carried position on a cycle of positions that pass their values on unchanged (a swap
    `(a, b) -> (b, a)`, a rotation), the init operands it reads in rounds 0, 1, ...: its own, then
    the next position's, around the cycle."""
    position = {a: j for j, a in enumerate(args)}
    cycles = {}
    for k in range(len(args)):
        chain = [k]
        while yields[chain[-1]] in position and position[yields[chain[-1]]] not in chain:
            chain.append(position[yields[chain[-1]]])
        if len(chain) > 1 and yields[chain[-1]] is args[k]:
            cycles[k] = tuple(chain)
    return cycles


def _chain(k: int, delay: int, args, yields) -> tuple[int, ...]:
    """The init operands position `k` reads in rounds 0 .. delay-1: its own, then its sources'."""
    position = {a: j for j, a in enumerate(args)}
    chain = [k]
    while len(chain) < delay:
        chain.append(position[yields[chain[-1]]])
    return tuple(chain)
