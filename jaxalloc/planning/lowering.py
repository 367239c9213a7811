"""The lowering of a function's plan to its IR: `mem` attributes on the ops, the loops and the function.

`annotate` writes `mem.arena` on the function, `mem.slot` on every op whose result has a fixed place
(`mem.slots` for several results) or, in a loop body, is computed into the next round's view of a
carried position (`#mem.next<k>`; `#mem.next<k, n>`, the `n`-th free slot of its toggle ring after
the first), `mem.views` on every loop, `mem.phi` on a case whose result is, in some branches, a view
of the value the branch yields, and `mem.args` where the plan holds donated arguments.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, i64
from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import ArenaAttr, NextAttr, Place, SlotAttr, ViewsAttr
from jaxalloc.planning.assignment import BlockPlan, Carry


ANNOTATIONS = ("mem.arena", "mem.args", "mem.slot", "mem.slots", "mem.views", "mem.phi")
"""The attributes `annotate` writes."""


def annotate(func: jx.FuncOp, plan: BlockPlan, include_outputs: bool = False) -> None:
    """Write a function's plan onto its IR as `mem` attributes; where the plan holds donated
    arguments, `mem.args` gives each argument's slot (size 0: outside the arena), where the call
    writes it."""
    func.attributes["mem.arena"] = ArenaAttr(plan.size, include_outputs)
    _annotate(func.body.block, plan, 0, {}, {})
    args = {v: SlotAttr(b.offset, b.slot_size) for b in plan.buffers for v in b.values if isinstance(v, BlockArgument)}
    if args:
        func.attributes["mem.args"] = ArrayAttr(args.get(a, SlotAttr(0, 0)) for a in func.body.block.args)


def _annotate(
    block: Block, plan: BlockPlan, base: int, outer: dict[SSAValue, Place], marks: dict[SSAValue, NextAttr]
) -> None:
    """Write `mem.slot`s for the values `plan` placed, then recurse into regions.

    `outer` holds the places of the parent's values that this block's values may be placed in
    (a case result); `marks` the values of a loop body computed into the next round's view.
    """
    slots: dict[SSAValue, Place] = dict(marks)
    for buffer in plan.buffers:
        holders = [v.owner for v in buffer.values if isinstance(v.owner, jx.WhileOp | jx.CaseOp)]
        loops = [op for op in holders if isinstance(op, jx.WhileOp)]
        loop = max(loops, key=block.get_operation_index) if loops else holders[0] if holders else None
        for value in buffer.values:
            # a ring's values move every round; the last loop's result and the init operand that is
            # the ring's first slot (an earlier loop's result too) are named by that slot (a case
            # result holding a branch's ring too); views of the result read it in place, in whichever
            # slot it is
            if (buffer.repeat == 1 or value.owner is loop or isinstance(value, BlockArgument)
                    or value.owner.is_before_in_block(loop)):
                slots[value] = SlotAttr(base + buffer.offset, buffer.slot_size)
    for value, parent_value in plan.placed_in.items():
        if parent_value in outer:
            place, n = outer[parent_value], plan.spare_slot(value)  # a case result's further slots
            if isinstance(place, NextAttr):  # a case result in a next view: further free slots of the toggle ring
                slots[value] = NextAttr(place.position.data, place.nth.data + n)
            else:
                slots[value] = SlotAttr(place.offset.data + n * place.size.data, place.size.data) if n else place
    for op in block.ops:
        if isinstance(op, jx.WhileOp):
            _annotate_loop(op, plan, slots)
        elif op.results and not isinstance(op, jx.CaseOp | jx.ConstOp):
            placed = [slots.get(r) for r in op.results]
            if len(placed) == 1 and placed[0] is not None:
                op.attributes["mem.slot"] = placed[0]
            elif any(s is not None for s in placed):
                op.attributes["mem.slots"] = ArrayAttr(s or SlotAttr(0, 0) for s in placed)
        if isinstance(op, jx.CaseOp):
            placed = [slots.get(r) for r in op.results]
            if any(s is not None for s in placed):
                op.attributes["mem.slots"] = ArrayAttr(s or SlotAttr(0, 0) for s in placed)
            if any(plan.phis.get(op, ())):
                op.attributes["mem.phi"] = ArrayAttr(DenseArrayBase.from_list(i64, v) for v in plan.phis[op])
        if op in plan.regions:
            offset, plans = plan.regions[op]
            placed = {**outer, **slots} if isinstance(op, jx.CaseOp) else {}  # a loop's ring moves every round
            for region, child in zip(op.regions, plans):
                marks = _next_marks(op, plan.carries[op], child) if isinstance(op, jx.WhileOp) and region is op.body else {}
                _annotate(region.block, child, base + offset, placed, marks)


def _next_marks(op: jx.WhileOp, carries: list[Carry], body: BlockPlan) -> dict[SSAValue, NextAttr]:
    """The body's values computed into the next round's view of a carried position: those sharing
    the buffer of the value the body computes and yields there (in-place updates of it included)."""
    block = op.body.block
    roots: dict[SSAValue, int] = {}
    for c, (views, carry, value) in enumerate(zip(op.attributes["mem.views"].data, carries, block.last_op.operands)):
        if views.slots.data and value in body.roots and not isinstance(value, BlockArgument):
            roots.setdefault(body.roots[value], c)
            for source in body.may_be.get(value, ()):  # a loop result's value the body computes there
                if body.placed_in.get(source) is op.results[c] and not isinstance(source, BlockArgument):
                    roots.setdefault(body.roots[source], c)
    # values in further free slots of a toggle ring, and inner loops' results placed in a next view
    for value, parent in body.placed_in.items():
        if parent in op.results and (value in body.spares or isinstance(value.owner, jx.WhileOp)):
            roots.setdefault(body.roots[value], op.results.index(parent))
    # an inner loop's ring of several slots: the values after the loop are in whichever slot, read in place
    rings = {body.roots[r]: r.owner for r in body.roots
             if isinstance(r.owner, jx.WhileOp) and body.carries[r.owner][r.owner.results.index(r)].repeat > 1}
    return {
        value: NextAttr(roots[root], body.spare_slot(value))  # n > 0: a toggle ring's further free slot
        for value, root in body.roots.items()
        if root in roots and value in body.placed_in and not isinstance(value, BlockArgument)
        and not (root in rings and rings[root].is_before_in_block(value.owner))
    }


def _annotate_loop(op: jx.WhileOp, plan: BlockPlan, slots: dict[SSAValue, Place]) -> None:
    views, body = [], plan.regions[op][1][1]
    for result, carry, value in zip(op.res, plan.carries[op], op.body.block.last_op.operands):
        first = slots.get(result)
        if isinstance(first, NextAttr) and carry.repeat:  # the ring is the enclosing loop's next view, cut in order
            assert carry.shift == 0 or carry.repeat == 1, "a rotated ring is never an enclosing loop's next view"
            views.append(ViewsAttr(carry.initial, [first] * carry.repeat, carry.yielded, carry.holds))
            continue
        first = first if isinstance(first, SlotAttr) else None
        if first is None and carry.repeat:  # the ring is the function's output
            # each round's value is an array of its own where an op of the body computes it there (or
            # it passes on another position's); a case or loop result may be elsewhere: read out
            outside = isinstance(value, BlockArgument) or (value in body.placed_in and isinstance(value.owner, jx.PrimOp | jx.FusedOp))
            views.append(ViewsAttr(carry.initial, (), yielded=True) if outside else ViewsAttr((), ()))
            continue
        ring = [SlotAttr(first.offset.data + (i + carry.shift) % carry.repeat * first.size.data, first.size.data)
                for i in range(carry.repeat)]
        views.append(ViewsAttr(carry.initial, ring, carry.yielded, carry.holds))
    op.attributes["mem.views"] = ArrayAttr(views)
