"""Where a value of a planned block may lie when it is a view: the values a loop result, a case
result or a toggle ring may be, read in place."""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.analysis.liveness import defined_in
from jaxalloc.dialects import jx
from jaxalloc.planning.assignment.ir import computed_within, defined_within, runs_past_inits
from jaxalloc.planning.assignment.model import BlockPlan


def view_sources(value: SSAValue, arg: BlockArgument, scopes: tuple[tuple[Block, BlockPlan], ...], body: Block,
                  into: frozenset[SSAValue], top: bool = True):
    """The values the yield `value` may be a view of where it is not computed into its next view
    (the memory of `into`: the value placed there, and the case results in it whose branches are
    looked into): `arg` itself, values from outside the loop `body`, another position's carried
    value, or that position's next value computed into its next view (or into a case result that
    is), which is its carried value in the next round and which it lends alike (empty: none). None
    where it may be a view of anything else (the body's own memory). `scopes`: the blocks from
    `body` down to the one that yields `value`, each with its plan; a value is looked up in the plan
    of the block that defines it (a branch may hand on a value of an enclosing block)."""
    if value is arg or not computed_within(value, body) or value in body.args:
        return {value}  # (another position's carried value: `loop` tells whether it stays put)
    plan = next((p for b, p in reversed(scopes) if defined_in(value, b)), scopes[0][1])
    yields = list(body.last_op.operands)
    q = yields.index(value) if value in yields and value is not yields[arg.index] else None
    if not top and q is not None and plan.placed_in.get(value) is body.parent_op().results[q]:
        return {body.args[q]}  # another position's next value, in its next view
    if not defined_within(root := plan.roots.get(value, value), body):  # a view of a value from outside
        return {root}
    if root is not value and not computed_within(root, scopes[-1][0]) and computed_within(root, body):
        # a branch's view of a value of an enclosing block of the body: where that value is
        return view_sources(root, arg, scopes, body, into, top)
    if value in plan.may_be:
        parts = [view_sources(v, arg, scopes, body, into, False) for v in plan.may_be[value]]
    elif isinstance(value.owner, jx.WhileOp) and plan.placed_in.get(value) in into:
        # an inner loop's ring in the next view: or an init operand read in place, or a value handed back
        besides = besides_ring(plan, value)
        if not besides:
            return set()  # always in its ring
        parts = [view_sources(v, arg, scopes, body, into, False) for v in besides]
    elif isinstance(value.owner, jx.CaseOp) and value.owner in plan.phis:
        case, k = value.owner, value.owner.results.index(value)
        if len(plan.phis[case][k]) < len(case.branches) and plan.placed_in.get(value) not in into:
            return None  # some branch computes it in memory of the body's own
        # a branch computing into the result's memory computes into `into` where the result is there
        there = into | {value} if plan.placed_in.get(value) in into else into
        parts = [
            view_sources(case.branches[b].block.last_op.operands[k], arg,
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


def ends_in(value: SSAValue, plan: BlockPlan, block: Block) -> list[SSAValue] | None:
    """For a value of `block` planned as `plan` that is not where its buffer is: the values it may
    be instead of being in its memory (a loop result in a ring: the init operands read in place
    before it, none where the loop says how many rounds it runs; a loop result that only passes
    values on: those; a view of a value from outside the block: that value; a case result that
    some branches make a view: the values from outside the case, or other results of it, that it
    may be there, `phi_values`). None for any other value."""
    if value in plan.may_be:
        return plan.may_be[value]
    root = plan.roots.get(value, value)
    if not defined_within(root, block):
        return [root]
    loop = value.owner
    if isinstance(loop, jx.WhileOp) and loop in plan.carries:
        carry = plan.carries[loop][loop.results.index(value)]
        besides = besides_ring(plan, value)
        # a toggle ring's result may be what it was handed back: told where that lies outside its loop
        # ring, another position's ring too (one it borrows from)
        if carry.repeat:
            return besides
        if runs_past_inits(loop, carry.initial):
            return []  # always in its ring
    handed = plan.phi_values.get(value)
    return None if handed is None else list(handed)


def besides_ring(plan: BlockPlan, value: SSAValue) -> list[SSAValue]:
    """The values a loop result in a ring may be instead of a slot of it: the init operands read in
    place before it, where the loop may run fewer rounds, and a toggle ring's values handed back
    (`toggled_from`), where they are."""
    loop = value.owner
    carry = plan.carries[loop][loop.results.index(value)]
    inits = [] if runs_past_inits(loop, carry.initial) else [loop.operands[q] for q in carry.initial]
    return list(dict.fromkeys([*inits, *plan.toggled_from.get(value, ())]))


def possible_values(value: SSAValue, plan: BlockPlan, block: Block) -> list[SSAValue] | None:
    """`ends_in`, through the values of `block` it names that may in turn be others (a case result
    handing on another one's value): every value `value` may be instead of being in its memory.
    None where it is always there."""
    found = ends_in(value, plan, block)
    if found is None:
        return None
    found, k = list(found), 0
    while k < len(found):
        if computed_within(found[k], block):
            found.extend(v for v in ends_in(found[k], plan, block) or () if v not in found)
        k += 1
    return found
