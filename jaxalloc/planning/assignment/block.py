"""Plans one block: merges its values into buffers, plans its sub-graphs, and places the buffers
with an allocator; `plan_function` plans a whole function."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from jaxalloc.allocators import Problem, allocate
from jaxalloc.analysis.inplace import in_place_candidates, is_view, viewed
from jaxalloc.analysis.liveness import block_liveness, defined_in
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment.buffers import BufferMerge
from jaxalloc.planning.assignment.cases import CasePlanning
from jaxalloc.planning.assignment.ir import is_small, loop_memory, products_values, small_values
from jaxalloc.planning.assignment.loops import LoopPlanning
from jaxalloc.planning.assignment.model import BlockContext, BlockPlan, Buffer, Options, padded
from jaxalloc.planning.assignment.pools import PoolPlanning


def plan_function(func: jx.FuncOp, allocator: str | None = "nnc", alignment: int = 64, include_outputs: bool = False,
                  donated: Sequence[int] = (), followed_rings: bool = False, nested_toggles: bool = True,
                  kept_loans: bool = True, pools: bool = True, products_outside: bool = False,
                  small_outside: bool = False) -> BlockPlan:
    """Plan every value of `func`; returns the function block's plan (offsets from the arena start).
    With `allocator=None` it merges values into buffers and gives their lifetimes, but places none
    (every offset 0): all that a bound on the rows (`plan_rows`) needs, without the allocation's work.

    The arguments at `donated` (as `jax.jit`'s donation) are buffers of the arena, live from the start
    to their last use and written there when the function is called: later values and outputs
    may take their bytes, an elementwise op or update computed in place into one where it dies.
    With `small_outside`, a small one stays outside with the small values its loops carry it as.

    `products_outside`: the values that a matrix product or a convolution reads or computes
    (`PRODUCTS`) stay outside the arena, in buffers of XLA's own: XLA computes such an op only on
    buffers of its own, so in the arena each would be held twice, in its slot and in the copy XLA
    reads or writes. In a loop body or a branch, but those the block hands its parent
    (`left_to_xla`). `small_outside`: every small value stays outside the arena too (`small_values`)."""
    options = Options(allocator, alignment, include_outputs, followed_rings, nested_toggles, kept_loans, pools, products_outside,
                      small_outside)
    block = func.body.block
    inside = {block.args[i] for i in donated if not (small_outside and is_small(block.args[i]))}
    outside = set(block.args) - inside
    if not include_outputs:
        outside.update(block.last_op.operands)
    if products_outside:
        outside.update(products_values(block, loop_memory(block)))
    if small_outside:
        outside.update(small_values(block))
    return BlockPlanner(block, BlockContext(options, outside, dictated={}, foldable=inside, donated=inside)).run()


class BlockPlanner(CasePlanning, LoopPlanning, PoolPlanning):
    """Plans one block: merges values into buffers, recurses into regions, allocates."""

    def __init__(self, block: Block, context: BlockContext):
        self.block, self.options = block, context.options
        self.outside, self.dictated, self.foldable = context.outside, context.dictated, context.foldable
        self.ring_holders, self.donated, self.unsettled = context.ring_holders, context.donated, context.unsettled
        self.lent, self.followed, self.pools, self.stable = context.lent, context.followed, context.pools, context.stable
        self.ops = list(block.ops)
        self.live = block_liveness(block)
        self.position = {v: i for i, v in enumerate(self.live.values)}
        self.buffers = BufferMerge()
        self.plan = BlockPlan()
        self.rings: dict[SSAValue, tuple[int, int]] = {}  # loop result -> (slot size, repeat)
        self.temporaries: list[tuple[Operation, int, int]] = []  # region op, size, index
        self.keep_alive: list[tuple[SSAValue, SSAValue]] = []  # (value, until): a result may be a view of it
        self.no_fold: set[SSAValue] = set()  # results that may be views of other memory: not overwritten (`views_outside`)
        self.views_only: set[SSAValue] = set()  # loop results that are always one of several other values
        self._reads_inside: dict[Operation, set[SSAValue]] = {}  # region op -> values its regions read
        self._toggle_checks: set[SSAValue] = set()  # buffers `toggles_from_arena` is looking into
        for group in context.aliases:  # block arguments that are one value in the rounds that may fold into them
            for value in group[1:]:
                self.buffers.join(value, group[0])

    def left_to_xla(self, block: Block, dictated: dict) -> set[SSAValue]:
        """The values of `block` (a loop body or a branch) left to XLA's buffers. With `small_outside`,
        its small values (`small_values`), whose parents' memory is XLA's too. With `products_outside`, the
        values of its products (`products_values`): within one round or one branch, but those in
        the memory of a loop's or a case's result, those the block hands its parent (or a view of),
        which lie in the parent's memory (`dictated`), and those its loops and cases read, which
        a result of theirs may be (a branch's phi, an init operand read in place): handed on, it
        would be copied into the parent's memory."""
        found = small_values(block) if self.options.small_outside else set()
        if not self.options.products_outside:
            return found
        handed = {*block.last_op.operands, *dictated}
        handed |= {v for op in block.ops if isinstance(op, jx.WhileOp | jx.CaseOp) for inner in op.walk() for v in inner.operands}
        return found | products_values(block, loop_memory(block) | handed | {viewed(v) for v in handed})

    @staticmethod
    def plan_block(block: Block, context: BlockContext) -> BlockPlan:
        """The plan of `block` (a region of one of this block's ops) in `context`."""
        return BlockPlanner(block, context).run()

    def external(self, value: SSAValue, ring: int = 1) -> bool:
        """Stored outside this block's memory: defined elsewhere, a constant, or marked outside.

        A loop ring of several slots stays in the arena even when the loop's result is an output:
        the result is whichever slot the last round wrote (`ring`: the slots a loop result's ring
        has at least, where the loop is being planned); but with `small_outside`, a ring of small
        values is XLA's loop state. A toggle ring a round may hand back a value of the arena stays
        there too (`toggles_from_arena`). An output computed into a donated argument's memory stays in
        the arena: the argument is there from the start.
        """
        root = self.buffers.find(value)
        if not defined_in(root, self.block) or isinstance(root.owner, jx.ConstOp):
            return True
        group = self.buffers.group(root)
        if any(m in self.donated for m in group):
            return False
        if self.options.small_outside and is_small(root):
            return True  # a loop's ring of small values too: XLA's loop state
        if ring > 1 or any(self.rings.get(m, (0, 1))[1] > 1 for m in group):
            return False
        return any(m in self.outside for m in group) and not self.toggles_from_arena(root, group)

    def toggles_from_arena(self, root: SSAValue, group: list[SSAValue]) -> bool:
        """Whether the memory of `root`'s buffer (`group`) holds a toggle ring, a loop result's of this
        block or a branch's that a case result holds, that a round may hand back a value lying in
        the arena (an init operand read in place, a value from outside the loop): in XLA's loop
        state, that round would read it out of the arena."""
        if root in self._toggle_checks:
            return False  # a value a ring of its own may be handed back
        self._toggle_checks.add(root)
        try:
            handed, pending = [], [(m, (self.plan,)) for m in group]
            while pending:
                value, scopes = pending.pop()
                plan = scopes[-1]
                handed.extend((v, scopes) for v in plan.toggled_from.get(value, ()))
                if isinstance(value.owner, jx.CaseOp) and value.owner in plan.regions:
                    pending.extend((r, (*scopes, branch)) for branch in plan.regions[value.owner][1]
                                   for r, into in branch.placed_in.items() if into is value)
            return any(self.in_arena(v, scopes) for v, scopes in handed)
        finally:
            self._toggle_checks.discard(root)

    def in_arena(self, value: SSAValue, scopes: tuple[BlockPlan, ...]) -> bool:
        """Whether `value` lies in the arena: a value of this block that is not `external`, or of a
        block within it (planned as the last of `scopes` that holds it) that its plan places in its
        memory, or in that of a parent value in the arena."""
        for depth in range(len(scopes) - 1, 0, -1):
            plan = scopes[depth]
            if value in plan.roots:
                root = plan.roots[value]
                if root in plan.buffer_roots:
                    return True
                parent = next((into for v, into in plan.placed_in.items() if plan.roots.get(v) is root), None)
                return parent is not None and self.in_arena(parent, scopes[:depth])
        return defined_in(value, self.block) and not self.external(value)

    def viewers(self, root: SSAValue) -> set[SSAValue]:
        """The values that may be a view of `root`'s buffer (a case result viewing what a branch hands
        back, a loop result that may be its init operand), through chains of such views."""
        found: set[SSAValue] = set()
        pending = [root]
        while pending:
            source = pending.pop()
            for value, later in self.keep_alive:
                if self.buffers.find(value) is source and later not in found:
                    found.add(later)
                    pending.append(self.buffers.find(later))
        return found

    def dies_at(self, value: SSAValue, index: int, besides: SSAValue | None = None) -> bool:
        """Whether op `index` is the last to read `value`'s buffer, views of it included (but for
        `besides`)."""
        viewers = self.viewers(self.buffers.find(value))
        return self.end_of(value) == index + 1 and all(self.end_of(v) <= index + 1 for v in viewers if v is not besides)

    def end_of(self, value: SSAValue) -> int:
        root = self.buffers.find(value)
        return max(int(self.live.end[self.position[m]]) for m in self.buffers.group(root))

    def read_inside(self, op: Operation, root: SSAValue) -> bool:
        """Whether a region of `op` reads a value of `root`'s buffer, or one that may be a view of it
        (then a ring cannot take it)."""
        group = set(self.buffers.group(root))
        for viewer in self.viewers(root):
            group.update(self.buffers.group(viewer))
        if op not in self._reads_inside:  # once per op: a loop asks for each value it carries
            self._reads_inside[op] = {v for inner in op.walk() if inner is not op for v in inner.operands}
        return not group.isdisjoint(self._reads_inside[op])

    def may_take(self, x: SSAValue, index: int, besides: SSAValue | None = None) -> bool:
        """Whether a result of op `index` may take `x`'s buffer: `x` dies there (its views included,
        but for `besides`) and its buffer is this block's to overwrite."""
        root = self.buffers.find(x)
        if self.external(x) or x in self.no_fold and not self.views_outside(x):
            return False
        if isinstance(root, BlockArgument) and root not in self.foldable:
            return False
        group = self.buffers.group(root)
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
        root = self.buffers.find(x)
        in_memory = isinstance(x.owner, jx.CaseOp) or isinstance(x.owner, jx.WhileOp) and x not in self.views_only
        return in_memory and all(
            self.external(v) or self.carried(v)
            or self.buffers.find(v) is root and (v not in self.no_fold or self.views_outside(v))
            for v, later in self.keep_alive if later is x)

    def carried(self, value: SSAValue) -> bool:
        """Whether `value` is a carried value of the loop whose body this block is: in the parent's
        memory (an init operand, a ring slot), where the loop decides whether a round's next value
        may be it (`toggling_origins`)."""
        return isinstance(value, BlockArgument) and value.block is self.block and isinstance(
            self.block.parent_op(), jx.WhileOp)

    def fold(self, index: int, op: Operation) -> None:
        """NNC's in-place folding: the result takes an operand's buffer where that operand dies here;
        a carried value's (or a donated argument's) first, which the result would otherwise be
        born beside: a ring then needs one slot less."""
        for p in sorted(in_place_candidates(op), key=lambda p: self.buffers.find(op.operands[p]) not in self.foldable):
            x = op.operands[p]
            if self.may_take(x, index):
                self.buffers.join(op.results[0], x)
                return

    def run(self) -> BlockPlan:
        for index, op in enumerate(self.ops):
            if isinstance(op, jx.YieldOp):
                continue
            if is_view(op):
                self.buffers.join(op.results[0], op.operands[0])
            elif isinstance(op, jx.CaseOp):
                self.case(index, op)
            elif isinstance(op, jx.WhileOp):
                self.loop(index, op)
            elif op.results:
                self.fold(index, op)
        self.allocate()
        return self.plan

    def allocate(self) -> None:
        groups: dict[SSAValue, list[SSAValue]] = {}
        for value, start, end in zip(self.live.values, self.live.start.tolist(), self.live.end.tolist()):
            root = self.buffers.find(value)
            self.plan.roots[value] = root
            self.plan.lifetimes[value] = (start, end)
            groups.setdefault(root, []).append(value)
        viewed = {self.buffers.find(v) for v, _ in self.keep_alive}
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
            slot = padded(slot, self.options.alignment)
            keys.append(values)
            sizes.append(slot * repeat)
            repeats.append(repeat)
            starts.append(min(int(self.live.start[self.position[v]]) for v in values))
            ends.append(max(until.get(root, 0), *(int(self.live.end[self.position[v]]) for v in values)))
        for op, size, index in self.temporaries:
            keys.append(op)
            sizes.append(padded(size, self.options.alignment) if size else 0)
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
